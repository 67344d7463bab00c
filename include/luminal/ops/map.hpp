// The generic elementwise node: `Node<Map<F>, Children...>` applies the scalar functor F
// to same-shape children. Each primitive functor carries its traits beside it (name,
// cost, whether it needs floating point), as Eigen's functor + traits pairs do.
#pragma once
#include <cmath>
#include <type_traits>
#include <boost/mp11/list.hpp>
#include <boost/mp11/utility.hpp>

#include "../core/errors.hpp"
#include "../core/node.hpp"

namespace luminal {

template <class F>
struct Map {
  static constexpr op_kind kind = op_kind::map;
  static constexpr std::string_view name = F::name;
  using functor = F;
  template <class... T>
  using value_type = typename detail::apply_alias<F::template result, T...>::type;
  template <class... S>
  using shape = boost::mp11::mp_first<boost::mp11::mp_list<S...>>;
};

template <element_type T>
constexpr text<16> dtype_text() {
  text<16> out;
  out.append(dtype_name<T>());
  return out;
}
constexpr text<16> op_text(std::string_view name) {
  text<16> out;
  out.append(name);
  return out;
}

/// Common traits for a functor whose result has the type of its operands.
struct same_type_result {
  template <class... T>
  using result = boost::mp11::mp_first<boost::mp11::mp_list<T...>>;
};

/// Common traits for a floating-point function of one operand computed by a libm call
/// (exp2, sin, erf, log1p...).
struct float_function : same_type_result {
  static constexpr int cost = 4;
  static constexpr bool floating_only = true, takes_bool = false;
};
/// A loop that applies a map of at least this cost (a float_function) is bound by its
/// arithmetic rather than by the memory it moves (loop_kernels.hpp widens its vectors).
inline constexpr int arithmetic_bound_cost = float_function::cost;

namespace detail {
template <class F, class T>
constexpr void check_operand_type() {
  if constexpr (F::floating_only && !floating_element<T>)
    (void)error::op_needs_floating_point<op_text(F::name), dtype_text<T>()>{};
  if constexpr (!F::takes_bool && std::is_same_v<T, bool>)
    (void)error::op_not_for_bool<op_text(F::name), dtype_text<T>()>{};
}
}  // namespace detail

/// Builds `Node<Map<F>, X>` after checking X's element type against F's traits.
namespace detail {
template <class F, class X>
constexpr auto simplify_unary();
}
struct not_simplified;

template <class F, expression X>
constexpr auto make_unary(X) {
  detail::check_operand_type<F, typename X::value_type>();
  using Simpler = decltype(detail::simplify_unary<F, std::remove_cvref_t<X>>());
  if constexpr (!std::is_same_v<Simpler, not_simplified>) return Simpler{};
  else return typename node_of<Map<F>, std::remove_cvref_t<X>>::type{};
}

}  // namespace luminal
