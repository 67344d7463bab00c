// Composite elementwise ops, written in terms of the primitives only. A composite needs
// no gradient rule of its own: the reverse pass differentiates its primitives.
#pragma once
#include <limits>
#include <numbers>

#include "binary.hpp"
#include "cast.hpp"
#include "pow.hpp"
#include "rounding.hpp"
#include "special.hpp"
#include "unary.hpp"
#include "where.hpp"

namespace luminal {

/// a - b with broadcasting.
template <expression A, broadcasts_with<A> B> constexpr auto operator-(A a, B b) { return a + neg(b); }
/// a / b with broadcasting (floating point).
template <expression A, broadcasts_with<A> B> constexpr auto operator/(A a, B b) {
  using TA = std::remove_cvref_t<A>;
  using TB = std::remove_cvref_t<B>;
  // bf16 or f16 over the same type or a literal: in f32, one rounding (cast.hpp). Other
  // mixes go on to the product, which names the two element types.
  if constexpr ((detail::half_valued<A> && (is_literal<TB>::value || std::is_same_v<value_t<A>, value_t<B>>)) ||
                (detail::half_valued<B> && is_literal<TA>::value))
    return cast<value_t<std::conditional_t<detail::half_valued<A>, A, B>>>(detail::widened(a) / detail::widened(b));
  else if constexpr (is_literal<std::remove_cvref_t<B>>::value) return a * c<1.0 / std::remove_cvref_t<B>::value>;
  else return a * recip(b);
}
/// A plain number as an operand (`x * 2.0`, `1 - x`) is refused with one message: a
/// constant's value is part of the graph's type, so it is spelled `2.0_c` or `c<2.0>`, and
/// a value to change between runs is an input of shape `shape<>`, bound by name.
namespace detail {
// A class is never a number: the cheap builtin test comes first, so that overload
// resolution of every operator between two expressions does not instantiate
// std::is_arithmetic and its helpers for each node type. Not is_arithmetic_v: a variable
// template is a symbol GCC mangles once per type (see `expression`).
template <class S>
concept plain_number = !__is_class(std::remove_cvref_t<S>) && std::is_arithmetic<std::remove_cvref_t<S>>::value;
template <class S>
constexpr void refuse_plain_number() {
  static_assert(error::always_false<sizeof(S)>,
                "luminal: a plain number is not an expression. Write a constant as 2.0_c or c<2.0>, or "
                "bind a value at run time as input<\"name\", f32>(shape<>)");
}
}  // namespace detail
#define LUMINAL_REFUSE_PLAIN_NUMBER(OP)                                                          \
  template <expression A, detail::plain_number S> constexpr A operator OP(A a, S) {               \
    detail::refuse_plain_number<S>();                                                           \
    return a;                                                                                   \
  }                                                                                             \
  template <detail::plain_number S, expression B> constexpr B operator OP(S, B b) {               \
    detail::refuse_plain_number<S>();                                                           \
    return b;                                                                                   \
  }
LUMINAL_REFUSE_PLAIN_NUMBER(+)
LUMINAL_REFUSE_PLAIN_NUMBER(-)
LUMINAL_REFUSE_PLAIN_NUMBER(*)
LUMINAL_REFUSE_PLAIN_NUMBER(/)
LUMINAL_REFUSE_PLAIN_NUMBER(%)
#undef LUMINAL_REFUSE_PLAIN_NUMBER

/// Elementwise minimum (NaN propagates); gradients as max's, mirrored.
template <expression A, broadcasts_with<A> B> constexpr auto min(A a, B b) { return neg(max(neg(a), neg(b))); }
/// torch's spellings of the elementwise max and min: a tie between two tensors splits the
/// gradient in two (torch.maximum); against a constant, x takes none of it at the tie
/// (torch.clamp's bound, see fn::Max's row in grad/rules.hpp).
template <expression A, broadcasts_with<A> B> constexpr auto maximum(A a, B b) { return max(a, b); }
template <expression A, broadcasts_with<A> B> constexpr auto minimum(A a, B b) { return min(a, b); }
/// a > b, a <= b, a >= b as bool.
template <expression A, broadcasts_with<A> B> constexpr auto greater_than(A a, B b) { return less_than(b, a); }
template <expression X> constexpr auto logical_not(X x) { return less_than(cast<i32>(x), c<1>); }
namespace detail {
/// True where x is not NaN: NaN is neither below +inf nor above -inf.
template <expression X>
constexpr auto is_ordered(X x) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  return less_than(c<0>, cast<i32>(less_than(x, c<inf>)) + cast<i32>(less_than(c<-inf>, x)));
}
/// not(b < a), and false when either operand is NaN, as IEEE a <= b.
template <expression A, expression B>
constexpr auto not_greater(A a, B b) {
  using T = value_t<decltype(typed_operand<A, B>())>;  // a literal takes the other's type
  if constexpr (floating_element<T>)
    return where(is_ordered(a), where(is_ordered(b), logical_not(less_than(b, a)), c<0>), c<0>);
  else
    return logical_not(less_than(b, a));
}
}  // namespace detail
template <expression A, broadcasts_with<A> B> constexpr auto less_equal(A a, B b) { return detail::not_greater(a, b); }
template <expression A, broadcasts_with<A> B> constexpr auto greater_equal(A a, B b) { return detail::not_greater(b, a); }
/// a == b as bool: neither is less than the other. Unlike IEEE ==, a NaN compares equal
/// to everything here (it is less than nothing).
template <expression A, broadcasts_with<A> B> constexpr auto equal(A a, B b) {
  return less_than(cast<i32>(less_than(a, b)) + cast<i32>(less_than(b, a)), c<1>);
}
LUMINAL_REFUSE_UNBROADCASTABLE(operator-)
LUMINAL_REFUSE_UNBROADCASTABLE(operator/)
LUMINAL_REFUSE_UNBROADCASTABLE(min)
LUMINAL_REFUSE_UNBROADCASTABLE(maximum)
LUMINAL_REFUSE_UNBROADCASTABLE(minimum)
LUMINAL_REFUSE_UNBROADCASTABLE(greater_than)
LUMINAL_REFUSE_UNBROADCASTABLE(less_equal)
LUMINAL_REFUSE_UNBROADCASTABLE(greater_equal)
LUMINAL_REFUSE_UNBROADCASTABLE(equal)

/// e^x = 2^(x log2 e).
template <expression X> constexpr auto exp(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(exp(cast<f32>(x)));  // cast.hpp
  else return exp2(x * c<std::numbers::log2e>);
}
/// Natural log = log2(x) ln 2.
template <expression X> constexpr auto log(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(log(cast<f32>(x)));  // cast.hpp
  else return log2(x) * c<std::numbers::ln2>;
}
/// x*x.
template <expression X> constexpr auto square(X x) { return x * x; }
/// 1/sqrt(x), as torch.rsqrt (inf at 0, gradient -inf there).
template <expression X> constexpr auto rsqrt(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(rsqrt(cast<f32>(x)));  // cast.hpp
  else return recip(sqrt(x));
}
/// |x| = max(x, -x): the tie at 0 splits the gradient into +1/2 and -1/2, so abs'(0) = 0,
/// as torch.abs (whose gradient is sign(x)).
template <expression X> constexpr auto abs(X x) { return max(x, neg(x)); }
/// -1, 0 or +1 as x is negative, zero or positive (0 for NaN); gradient zero, as torch.sign.
template <expression X> constexpr auto sign(X x) {
  using T = typename X::value_type;
  return cast<T>(less_than(c<0>, x)) - cast<T>(less_than(x, c<0>));
}
/// max(x, 0), as torch.relu: NaN propagates, and relu'(0) = 0 (the tie with a constant
/// gives x no gradient, see fn::Max's row).
template <expression X> constexpr auto relu(X x) { return max(x, c<0.0>); }
/// x for x > 0, Slope*x otherwise (Slope in [0, 1]); the gradient at 0 is Slope, as
/// torch.nn.functional.leaky_relu.
template <double Slope = 0.01, expression X> constexpr auto leaky_relu(X x) {
  static_assert(Slope >= 0 && Slope <= 1, "luminal: leaky_relu needs 0 <= slope <= 1");
  return where(less_than(c<0.0>, x), x, x * c<Slope>);
}
/// 1 / (1 + e^-x).
/// The exponent is capped at 88 (x >= -88, where e^-x is still finite in float32): past it
/// e^-x is infinite and the reciprocal's gradient inf * 0, NaN where torch gives 0.
template <expression X> constexpr auto sigmoid(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(sigmoid(cast<f32>(x)));  // cast.hpp
  else return recip(exp(neg(max(x, c<-88.0>))) + c<1.0>);
}
/// SiLU (swish), x sigmoid(x), as torch.nn.functional.silu: Llama's gated MLP.
template <expression X> constexpr auto silu(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(silu(cast<f32>(x)));  // cast.hpp
  else return x * sigmoid(x);
}
/// tanh x = 2 sigmoid(2x) - 1.
template <expression X> constexpr auto tanh(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(tanh(cast<f32>(x)));  // cast.hpp
  else return sigmoid(x * c<2.0>) * c<2.0> - c<1.0>;
}
/// log(1 + e^x) as torch.nn.functional.softplus (beta 1, threshold 20): x itself above 20.
/// Capping x at 30 in the other branch keeps e^x finite where `where` does not take it, so
/// that branch's gradient there is 0, not inf * 0.
template <expression X> constexpr auto softplus(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(softplus(cast<f32>(x)));  // cast.hpp
  else return where(less_than(c<20.0>, x), x, log1p(exp(min(x, c<30.0>))));
}

/// GELU's two forms, spelled as torch's `approximate=` argument: `gelu(x)` is exact,
/// `gelu(x, approximate::tanh)` the tanh form.
namespace approximate {
struct none_t {};
struct tanh_t {};
inline constexpr none_t none{};
inline constexpr tanh_t tanh{};
}  // namespace approximate
/// GELU, exact: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), as torch.nn.functional.gelu(x).
template <expression X> constexpr auto gelu(X x, approximate::none_t = {}) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(gelu(cast<f32>(x)));  // cast.hpp
  else return x * c<0.5> * (erf(x * c<std::numbers::sqrt2 / 2>) + c<1.0>);
}
/// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as
/// torch.nn.functional.gelu(x, approximate="tanh").
template <expression X> constexpr auto gelu(X x, approximate::tanh_t) {
  constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(gelu(cast<f32>(x), approximate::tanh));  // cast.hpp
  else return x * c<0.5> * (tanh((x + x * x * x * c<0.044715>) * c<k>) + c<1.0>);
}
/// min(max(x, Lo), Hi), as torch.clamp: the gradient is 1 strictly between the bounds and
/// 0 at them and outside (torch 2.x; a tie with a constant gives x no gradient).
template <double Lo, double Hi, expression X> constexpr auto clamp(X x) {
  static_assert(Lo <= Hi, "luminal: clamp needs Lo <= Hi");
  return min(max(x, c<Lo>), c<Hi>);
}

// ---- torch.nn.functional's other activations -------------------------------------------
// Composites like the ones above: autodiff through their primitives gives torch's
// gradients, at the kinks too (tests/unit/ops_activations_test.cpp checks every one
// against torch at its kinks, around them and at +-1000). A NaN input gives NaN.

/// min(max(x, 0), 6), as torch.nn.functional.relu6: the gradient is 0 at 0 and at 6.
template <expression X> constexpr auto relu6(X x) { return clamp<0.0, 6.0>(x); }
/// x clamped to [Min, Max], as torch.nn.functional.hardtanh(x, Min, Max): the gradient is
/// 0 at both bounds. `hardtanh(x)` is [-1, 1]; `hardtanh<-2.0, 0.5>(x)` another range.
template <double Min = -1.0, double Max = 1.0, expression X> constexpr auto hardtanh(X x) {
  static_assert(Min <= Max, "luminal: hardtanh needs Min <= Max (torch: min_val cannot be greater than max_val)");
  return clamp<Min, Max>(x);
}
/// relu6(x + 3) / 6, as torch.nn.functional.hardsigmoid: the gradient is 1/6 strictly
/// between -3 and 3 and 0 at them.
template <expression X> constexpr auto hardsigmoid(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(hardsigmoid(cast<f32>(x)));  // cast.hpp
  else return relu6(x + c<3.0>) * c<1.0 / 6.0>;
}
/// x hardsigmoid(x), as torch.nn.functional.hardswish (MobileNetV3): the gradient is 0 at
/// -3 and 1 at 3, as torch's.
template <expression X> constexpr auto hardswish(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(hardswish(cast<f32>(x)));  // cast.hpp
  else return x * hardsigmoid(x);
}
namespace detail {
/// torch's elu kernel, which elu, selu and celu share: Pos x for x > 0, else
/// Neg (e^(In x) - 1), so the gradient at 0 is Neg In. The exponential sees min(x, 0)
/// (spelled with where, so that x = 0 keeps its gradient): e^x of a large x would make the
/// unused branch's gradient inf * 0.
template <double Pos, double Neg, double In, expression X> constexpr auto elu_form(X x) {
  if constexpr (half_valued<X>) {
    return cast<value_t<X>>(elu_form<Pos, Neg, In>(cast<f32>(x)));  // cast.hpp
  } else {
    auto positive = less_than(c<0.0>, x);
    auto negative_part = where(positive, c<0.0>, x);
    auto below = expm1(negative_part * c<In>) * c<Neg>;
    if constexpr (Pos == 1.0) return where(positive, x, below);
    else return where(positive, x * c<Pos>, below);
  }
}
inline constexpr double selu_alpha = 1.6732632423543772848170429916717;
inline constexpr double selu_scale = 1.0507009873554804934193349852946;
}  // namespace detail
/// x for x > 0, Alpha (e^x - 1) otherwise, as torch.nn.functional.elu(x, Alpha): the
/// gradient at 0 is Alpha (torch takes the negative branch there). `elu<0.5>(x)`.
template <double Alpha = 1.0, expression X> constexpr auto elu(X x) { return detail::elu_form<1.0, Alpha, 1.0>(x); }
/// scale elu(x, alpha) with torch's constants (alpha 1.6733, scale 1.0507), as
/// torch.nn.functional.selu: the gradient at 0 is alpha scale.
template <expression X> constexpr auto selu(X x) {
  return detail::elu_form<detail::selu_scale, detail::selu_alpha * detail::selu_scale, 1.0>(x);
}
/// x for x > 0, Alpha (e^(x / Alpha) - 1) otherwise, as torch.nn.functional.celu(x, Alpha):
/// the gradient at 0 is 1. `celu<2.0>(x)`.
template <double Alpha = 1.0, expression X> constexpr auto celu(X x) {
  static_assert(Alpha != 0, "luminal: celu needs a nonzero Alpha (it divides x by it; torch: alpha cannot be 0)");
  return detail::elu_form<1.0, Alpha, 1.0 / Alpha>(x);
}
/// x tanh(softplus(x)), as torch.nn.functional.mish: the gradient at 0 is 0.6. Written
/// with u = e^-|x| so that nothing overflows and float32 keeps both the value where it is
/// tiny and the gradient where it is near 1: tanh(log(1 + e^x)) is u (u + 2) / ((u + 1)^2 + 1)
/// for x < 0 and 1 - 2u^2 / (2u^2 + 2u + 1) otherwise. (u is recomputed, not shared, so
/// mish fuses into one kernel.)
template <expression X> constexpr auto mish(X x) {
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(mish(cast<f32>(x)));  // cast.hpp
  } else {
    auto u = exp(neg(abs(x)));
    auto below = u * (u + c<2.0>) / (square(u + c<1.0>) + c<1.0>);
    auto above = c<1.0> - u * u * c<2.0> / ((u * c<2.0> + c<2.0>) * u + c<1.0>);
    return x * where(less_than(x, c<0.0>), below, above);
  }
}
/// log(sigmoid(x)) = -softplus(-x), as torch.nn.functional.logsigmoid: nothing overflows
/// (x itself below -20, softplus' threshold; e^-x capped as softplus caps it).
template <expression X> constexpr auto logsigmoid(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(logsigmoid(cast<f32>(x)));  // cast.hpp
  else return neg(softplus(neg(x)));
}
/// x / (1 + |x|), as torch.nn.functional.softsign: the gradient at 0 is 1.
template <expression X> constexpr auto softsign(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(softsign(cast<f32>(x)));  // cast.hpp
  else return x / (abs(x) + c<1.0>);
}
/// x - tanh(x), as torch.nn.functional.tanhshrink. tanh(x) is written e / (e + 2) with
/// e = e^2x - 1 (expm1), which keeps its digits near 0 where x - tanh(x) ~ x^3 / 3; x is
/// capped at 20 (tanh is 1 in float32 there) so that e stays finite.
template <expression X> constexpr auto tanhshrink(X x) {
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(tanhshrink(cast<f32>(x)));  // cast.hpp
  } else {
    auto e = expm1(min(x, c<20.0>) * c<2.0>);
    return x - e / (e + c<2.0>);
  }
}

}  // namespace luminal
