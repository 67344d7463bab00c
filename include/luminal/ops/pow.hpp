// pow(a, b): a primitive with std::pow's (and torch.pow's) definition for every sign: a
// negative base with an integral exponent gives the signed power ((-2)^3 = -8), with a
// non-integral one NaN. Not a composite 2^(b log2 a), which is NaN for every a <= 0.
#pragma once
#include "binary.hpp"

namespace luminal {

namespace fn {
struct Pow : same_type_result {
  static constexpr std::string_view name = "pow";
  static constexpr int cost = 8;
  static constexpr bool floating_only = true, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T a, T b) { using std::pow; return pow(a, b); }
};
}  // namespace fn

namespace detail {
/// x^N for 1 <= N by squaring: about log2 N products, which CSE shares.
template <long long N, expression X>
constexpr auto power_by_squaring(X x) {
  if constexpr (N == 1) {
    return x;
  } else if constexpr (N % 2 == 0) {
    auto half = power_by_squaring<N / 2>(x);
    return half * half;
  } else {
    return power_by_squaring<N - 1>(x) * x;
  }
}
/// Whether B is a compile-time constant positive integer up to 64.
template <class B>
constexpr bool is_small_natural_constant() {
  constexpr double v = constant_value<B>::value;
  return constant_value<B>::known && v >= 1 && v <= 64 && v == double(static_cast<long long>(v));
}
}  // namespace detail

/// a^b elementwise with broadcasting, as torch.pow: negative bases with integral exponents
/// are defined (pow(-2, 3) = -8), 0^b = 0 for b > 0 and inf for b < 0, x^0 = 1. Gradients
/// as torch: d/da = b a^(b-1) (0 where b == 0), d/db = a^b log a (0 where a == 0, b >= 0).
/// A compile-time positive integer exponent (`pow(x, 2.0_c)`, `pow(x, c<3>)`) is repeated
/// multiplication, exact for every sign in value and gradient.
template <expression A, broadcasts_with<A> B>
constexpr auto pow(A a, B b) {
  using TB = std::remove_cvref_t<B>;
  if constexpr (detail::is_small_natural_constant<TB>())
    return detail::power_by_squaring<static_cast<long long>(detail::constant_value<TB>::value)>(a);
  else
    return make_binary<fn::Pow>(a, b);
}
LUMINAL_REFUSE_UNBROADCASTABLE(pow)

}  // namespace luminal
