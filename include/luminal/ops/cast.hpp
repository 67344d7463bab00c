// cast<T>(x): element type conversion (bool -> 0/1, float -> int truncates toward zero).
#pragma once
#include "map.hpp"

namespace luminal {

namespace fn {
template <element_type To>
struct Cast {
  static constexpr std::string_view name = "cast";
  using cast_target = To;
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = true;
  template <class From> using result = To;
  template <class From> LUMINAL_HD static To apply(From x) { return static_cast<To>(x); }
};
}  // namespace fn

/// Converts the element type: `auto y = cast<f64>(x);` (x itself when already of type T).
/// To bf16 and f16 it rounds to nearest even (core/half_types.hpp); its gradient is the
/// cotangent cast back to x's type (grad/rules.hpp), as torch's `x.to(dtype)`.
namespace detail {
/// Whether every value of T is a value of U: a cast to U and back gives the value itself.
template <class U, class T>
inline constexpr bool holds_every_value_of =
    (is_half_float<T> && (std::is_same_v<U, f32> || std::is_same_v<U, f64>)) ||
    (std::is_same_v<T, f32> && std::is_same_v<U, f64>);
/// The value under a cast that widened it exactly (cast<f32> of a bf16 value), or void.
template <class X, class T>
struct widened_from {
  using type = void;
};
template <computed_node X, class T>
  requires requires { typename X::op::functor::cast_target; }
struct widened_from<X, T> {
  using child = boost::mp11::mp_first<typename X::children>;
  using type = std::conditional_t<std::is_same_v<value_t<child>, T> &&
                                      holds_every_value_of<typename X::op::functor::cast_target, T>,
                                  child, void>;
};
}  // namespace detail

/// Converts the element type: `auto y = cast<f64>(x);` (x itself when already of type T,
/// and the value under an exact widening: cast<bf16>(cast<f32>(h)) is h).
///
/// A cast of a view is the view of the cast (an index remapping commutes with a
/// conversion of each element): the planner then stores the value below the views, in
/// the loop shape it has, a broadcast converts each element once, and a round trip
/// through views, cast<bf16>(reshape(cast<f32>(h))), is reshape(h).
template <element_type T, expression X>
constexpr auto cast(X x) {
  using N = std::remove_cvref_t<X>;
  using Narrowed = typename detail::widened_from<N, T>::type;
  if constexpr (std::is_same_v<typename X::value_type, T>) {
    return N{};
  } else if constexpr (!std::is_void_v<Narrowed>) {
    return Narrowed{};
  } else if constexpr (computed_node<N> && N::kind == op_kind::view) {
    using Child = boost::mp11::mp_first<typename N::children>;
    return typename node_of<typename N::op, decltype(cast<T>(Child{}))>::type{};
  } else {
    return make_unary<fn::Cast<T>>(x);
  }
}

namespace detail {
/// Whether X holds bf16 or f16. Every primitive op on such values computes in f32 and
/// rounds its result, as each of PyTorch's ops does (exec/eval.hpp). A composite op (exp,
/// gelu, softmax...) is one op in PyTorch, which rounds once: on bf16 and f16 it runs on
/// widened(x) and casts its result back, rather than rounding after each primitive it is
/// written in (exp as exp2(x * log2 e) would round the product and lose the low bits).
template <class X>
concept half_valued = is_half_float<value_t<X>>;
/// x as an operand of a composite computed in f32: bf16 and f16 widened, others as they are.
template <class X>
constexpr auto widened(X x) {
  if constexpr (half_valued<X>) return cast<f32>(x);
  else return x;
}
}  // namespace detail

}  // namespace luminal
