// Primitive special functions: erf, erfc, log1p, expm1. Primitives rather than composites
// for accuracy: erfc = 1 - erf loses every digit for large x, and log(1 + x), exp(x) - 1
// lose them near 0. Their gradients are rows in grad/rules.hpp.
#pragma once
#include "map.hpp"
#include "simplify.hpp"
#include "vector_math.hpp"

namespace luminal {

namespace fn {
struct Erf : float_function {
  static constexpr std::string_view name = "erf";
  template <class T> LUMINAL_HD static T apply(T x) {
#ifndef __CUDA_ARCH__
    if constexpr (std::is_same_v<T, float>) return detail::erf_f32(x);  // vectorizes (vector_math.hpp)
#endif
    using std::erf;
    return erf(x);
  }
};
struct Erfc : float_function {
  static constexpr std::string_view name = "erfc";
  template <class T> LUMINAL_HD static T apply(T x) { using std::erfc; return erfc(x); }
};
struct Log1p : float_function {
  static constexpr std::string_view name = "log1p";
  template <class T> LUMINAL_HD static T apply(T x) { using std::log1p; return log1p(x); }
};
struct Expm1 : float_function {
  static constexpr std::string_view name = "expm1";
  template <class T> LUMINAL_HD static T apply(T x) { using std::expm1; return expm1(x); }
};
}  // namespace fn

/// The error function 2/sqrt(pi) int_0^x e^(-t^2) dt, as torch.erf.
template <expression X> constexpr auto erf(X x) { return make_unary<fn::Erf>(x); }
/// 1 - erf(x), accurate where erf(x) is near 1, as torch.erfc.
template <expression X> constexpr auto erfc(X x) { return make_unary<fn::Erfc>(x); }
/// log(1 + x), accurate near 0, as torch.log1p.
template <expression X> constexpr auto log1p(X x) { return make_unary<fn::Log1p>(x); }
/// e^x - 1, accurate near 0, as torch.expm1.
template <expression X> constexpr auto expm1(X x) { return make_unary<fn::Expm1>(x); }

}  // namespace luminal
