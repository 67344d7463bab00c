// Primitive unary ops: exp2 log2 sin cos sqrt recip neg. cos is a primitive, not
// sin(x + pi/2): adding pi/2 rounds x, and cos loses its relative accuracy near its zeros.
#pragma once
#include "map.hpp"
#include "simplify.hpp"
#include "vector_math.hpp"

namespace luminal {

namespace fn {
struct Exp2 : float_function {
  static constexpr std::string_view name = "exp2";
  template <class T> LUMINAL_HD static T apply(T x) {
#ifndef __CUDA_ARCH__
    if constexpr (std::is_same_v<T, float>) return detail::exp2_f32(x);  // vectorizes (vector_math.hpp)
#endif
    using std::exp2;
    return exp2(x);
  }
};
struct Log2 : float_function {
  static constexpr std::string_view name = "log2";
  template <class T> LUMINAL_HD static T apply(T x) {
#ifndef __CUDA_ARCH__
    if constexpr (std::is_same_v<T, float>) return detail::log2_f32(x);  // vectorizes (vector_math.hpp)
#endif
    using std::log2;
    return log2(x);
  }
};
struct Sin : float_function {
  static constexpr std::string_view name = "sin";
  template <class T> LUMINAL_HD static T apply(T x) { using std::sin; return sin(x); }
};
struct Cos : float_function {
  static constexpr std::string_view name = "cos";
  template <class T> LUMINAL_HD static T apply(T x) { using std::cos; return cos(x); }
};
struct Sqrt : same_type_result {
  static constexpr std::string_view name = "sqrt";
  static constexpr int cost = 2;
  static constexpr bool floating_only = true, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T x) { using std::sqrt; return sqrt(x); }
};
struct Recip : same_type_result {
  static constexpr std::string_view name = "recip";
  static constexpr int cost = 2;
  static constexpr bool floating_only = true, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T x) { return T(1) / x; }
};
struct Neg : same_type_result {
  static constexpr std::string_view name = "neg";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T x) { return -x; }
};
}  // namespace fn

/// 2^x, elementwise. `auto y = exp2(x);`
template <expression X> constexpr auto exp2(X x) { return make_unary<fn::Exp2>(x); }
/// log2(x), elementwise.
template <expression X> constexpr auto log2(X x) { return make_unary<fn::Log2>(x); }
/// sin(x), elementwise.
template <expression X> constexpr auto sin(X x) { return make_unary<fn::Sin>(x); }
/// cos(x), elementwise.
template <expression X> constexpr auto cos(X x) { return make_unary<fn::Cos>(x); }
/// sqrt(x), elementwise; sqrt(0) = 0 with gradient +inf, as torch.
template <expression X> constexpr auto sqrt(X x) { return make_unary<fn::Sqrt>(x); }
/// 1/x, elementwise (1/0 = inf, as torch.reciprocal).
template <expression X> constexpr auto recip(X x) { return make_unary<fn::Recip>(x); }
/// -x, elementwise.
template <expression X> constexpr auto neg(X x) { return make_unary<fn::Neg>(x); }
template <expression X> constexpr auto operator-(X x) { return neg(x); }
/// A negated literal stays a literal, so it still adopts the other operand's type.
template <double V> constexpr auto neg(Literal<V>) { return Literal<-V>{}; }

}  // namespace luminal
