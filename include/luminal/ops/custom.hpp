// custom_vjp / custom_jvp: an op whose value is a forward expression and whose derivative
// is a rule the user writes, as jax.custom_vjp and jax.custom_jvp. The node is an
// identity map over the forward expression (it fuses and costs nothing); its functor
// names the rule and the inputs, and the passes in grad/ read them there: the reverse pass
// sends the rule's cotangents to the inputs instead of differentiating the forward, the
// forward pass likewise with the tangent rule. A pass without a rule of its own goes
// through the forward expression as if the node were not there.
#pragma once
#include <tuple>

#include "map.hpp"

namespace luminal {

namespace fn {
template <class Rule, class... Inputs>
struct Custom : same_type_result {
  static constexpr std::string_view name = "custom";
  static constexpr int cost = 0;
  static constexpr bool floating_only = false, takes_bool = true;
  using rule = Rule;
  using inputs = boost::mp11::mp_list<Inputs...>;
  template <class T> LUMINAL_HD static T apply(T x) { return x; }
};
}  // namespace fn

namespace detail {
template <class F>
inline constexpr bool is_custom_functor = false;
template <class Rule, class... Inputs>
inline constexpr bool is_custom_functor<fn::Custom<Rule, Inputs...>> = true;

/// Whether N is a custom node whose rule has a reverse (vjp) / forward (jvp) derivative.
template <class Op>
inline constexpr bool custom_vjp_op = false;
template <class Rule, class... X>
inline constexpr bool custom_vjp_op<Map<fn::Custom<Rule, X...>>> = Rule::has_vjp;
template <class Op>
inline constexpr bool custom_jvp_op = false;
template <class Rule, class... X>
inline constexpr bool custom_jvp_op<Map<fn::Custom<Rule, X...>>> = Rule::has_jvp;
template <class N>
inline constexpr bool custom_vjp_node = false;
template <computed_node N>
inline constexpr bool custom_vjp_node<N> = custom_vjp_op<typename N::op>;
template <class N>
inline constexpr bool custom_jvp_node = false;
template <computed_node N>
inline constexpr bool custom_jvp_node<N> = custom_jvp_op<typename N::op>;

/// A rule's result as a tuple: one element per input.
template <class R>
constexpr auto as_tuple(R r) {
  if constexpr (requires { std::tuple_size<R>::value; }) return r;
  else return std::tuple<R>{r};
}

template <class Rule, bool Vjp, bool Jvp>
struct custom_rule : Rule {
  static constexpr bool has_vjp = Vjp, has_jvp = Jvp;
};

/// Whether Rule has vjp(g, out, x...) / jvp(out, x..., t...) for these inputs (the
/// output as g, the inputs as their own tangents: only the types are asked).
template <class Rule, class Out, class... X>
inline constexpr bool rule_has_vjp = requires { Rule::vjp(Out{}, Out{}, X{}...); };
template <class Rule, class Out, class... X>
inline constexpr bool rule_has_jvp = requires { Rule::jvp(Out{}, X{}..., X{}...); };

template <class Rule, bool NeedVjp, bool NeedJvp, expression... X>
constexpr auto make_custom(X... x) {
  static_assert(sizeof...(X) >= 1, "luminal: a custom op needs at least one input");
  auto forward = Rule::forward(x...);
  using Out = std::remove_cvref_t<decltype(forward)>;
  static_assert(expression<Out>, "luminal: a custom op's forward(inputs...) must return an expression");
  constexpr bool vjp = rule_has_vjp<Rule, Out, std::remove_cvref_t<X>...>;
  constexpr bool jvp = rule_has_jvp<Rule, Out, std::remove_cvref_t<X>...>;
  static_assert(vjp || !NeedVjp, "luminal: custom_vjp's rule needs a static vjp(g, out, inputs...)");
  static_assert(jvp || !NeedJvp, "luminal: custom_jvp's rule needs a static jvp(out, inputs..., tangents...)");
  using F = fn::Custom<custom_rule<Rule, vjp, jvp>, std::remove_cvref_t<X>...>;
  return typename node_of<Map<F>, Out>::type{};
}
}  // namespace detail

/// An op with a reverse-mode derivative of your own, as jax.custom_vjp. `Rule` has
/// `forward(x...)`, the value as an expression, and `vjp(g, out, x...)`, the cotangent of
/// each input given the output's cotangent g and value out: one expression, or a
/// std::tuple with one per input. The reverse pass uses vjp() and never differentiates
/// forward(). Forward mode uses the rule's jvp() if it has one, else differentiates forward().
///
///     struct straight_through {  // round in the forward pass, identity in the backward
///       static constexpr auto forward(auto x) { return round(x); }
///       static constexpr auto vjp(auto g, auto, auto) { return g; }
///     };
///     auto y = custom_vjp<straight_through>(x);
template <class Rule, expression... X>
constexpr auto custom_vjp(X... x) {
  return detail::make_custom<Rule, true, false>(x...);
}

/// An op with a forward-mode derivative of your own, as jax.custom_jvp. `Rule` has
/// `forward(x...)` and `jvp(out, x..., t...)`, the output's tangent given each input's
/// tangent t (zeros for an input the pass does not vary). The reverse pass differentiates
/// forward() unless Rule also has vjp() (then both rules are used, one per mode).
///
///     struct stable_softplus {
///       static constexpr auto forward(auto x) { return log1p(exp(neg(abs(x)))) + relu(x); }
///       static constexpr auto jvp(auto, auto x, auto t) { return t * sigmoid(x); }
///     };
template <class Rule, expression... X>
constexpr auto custom_jvp(X... x) {
  return detail::make_custom<Rule, false, true>(x...);
}

}  // namespace luminal
