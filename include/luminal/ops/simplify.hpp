// Type-level rewrites applied as nodes are built, in forward and reverse graphs alike:
// x*1, 1*x, x+0, 0+x -> x; x*0 -> 0; constant folding of + and *; neg(neg x), recip(recip x),
// exp2(log2 x), log2(exp2 x) -> x. Building the simpler type directly means the planner
// never sees the redundant node, and CSE by type identity then merges more.
// x*0 -> 0 ignores that inf*0 and NaN*0 are NaN, as XLA's algebraic simplifier does.
#pragma once
#include "expand.hpp"
#include "map.hpp"

namespace luminal {

namespace fn {
struct Add;
struct Mul;
struct Neg;
struct Recip;
struct Exp2;
struct Log2;
}  // namespace fn

/// The result of a rewrite that did not apply.
struct not_simplified {};

namespace detail {
template <class X>
struct constant_value {
  static constexpr bool known = false;
  static constexpr double value = 0;
};
template <element_type T, T V>
struct constant_value<Const<T, V>> {
  static constexpr bool known = true;
  static constexpr double value = double(V);
};
template <double V>
struct constant_value<Literal<V>> {
  static constexpr bool known = true;
  static constexpr double value = V;
};
template <class X>
inline constexpr bool is_expand_op = false;
template <class S>
inline constexpr bool is_expand_op<Expand<S>> = true;
template <computed_node N>
  requires is_expand_op<typename N::op>
struct constant_value<N> : constant_value<boost::mp11::mp_first<typename N::children>> {};

template <class X>
constexpr bool constant_is(double v) {
  return constant_value<X>::known && constant_value<X>::value == v;
}

/// The operand of a unary map node with functor F, or void.
template <class F, class X>
struct operand_of {
  using type = void;
};
template <class F, node_with_op<Map<F>> N>
  requires(boost::mp11::mp_size<typename N::children>::value == 1)
struct operand_of<F, N> {
  using type = boost::mp11::mp_first<typename N::children>;
};

template <class F, class TA, class TB, class S>
constexpr auto simplify_binary() {
  using T = typename TA::value_type;
  constexpr bool both_known = constant_value<TA>::known && constant_value<TB>::known;
  if constexpr (std::is_same_v<F, fn::Mul>) {
    if constexpr (both_known)
      return expand(Const<T, T(constant_value<TA>::value * constant_value<TB>::value)>{}, S{});
    else if constexpr (constant_is<TA>(0) || constant_is<TB>(0)) return expand(Const<T, T(0)>{}, S{});
    else if constexpr (constant_is<TB>(1)) return expand(TA{}, S{});
    else if constexpr (constant_is<TA>(1)) return expand(TB{}, S{});
    else return not_simplified{};
  } else if constexpr (std::is_same_v<F, fn::Add>) {
    if constexpr (both_known)
      return expand(Const<T, T(constant_value<TA>::value + constant_value<TB>::value)>{}, S{});
    else if constexpr (constant_is<TB>(0)) return expand(TA{}, S{});
    else if constexpr (constant_is<TA>(0)) return expand(TB{}, S{});
    else return not_simplified{};
  } else {
    return not_simplified{};
  }
}

template <class F, class X>
constexpr auto simplify_unary() {
  using T = typename X::value_type;
  if constexpr (std::is_same_v<F, fn::Neg> && !std::is_void_v<typename operand_of<fn::Neg, X>::type>)
    return typename operand_of<fn::Neg, X>::type{};
  else if constexpr (std::is_same_v<F, fn::Neg> && constant_value<X>::known && !std::is_same_v<T, bool>)
    return expand(Const<T, T(-constant_value<X>::value)>{}, shape_t<X>{});
  else if constexpr (std::is_same_v<F, fn::Recip> && !std::is_void_v<typename operand_of<fn::Recip, X>::type>)
    return typename operand_of<fn::Recip, X>::type{};
  else if constexpr (std::is_same_v<F, fn::Exp2> && !std::is_void_v<typename operand_of<fn::Log2, X>::type>)
    return typename operand_of<fn::Log2, X>::type{};
  else if constexpr (std::is_same_v<F, fn::Log2> && !std::is_void_v<typename operand_of<fn::Exp2, X>::type>)
    return typename operand_of<fn::Exp2, X>::type{};
  else
    return not_simplified{};
}
}  // namespace detail

}  // namespace luminal
