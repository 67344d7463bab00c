// Primitive rounding: floor, ceil, round (half to even), trunc. Each is piecewise
// constant, so its gradient is zero everywhere, as in torch (one row in grad/rules.hpp
// for the whole family, keyed by `rounds`). Integer tensors come back unchanged.
#pragma once
#include "map.hpp"
#include "simplify.hpp"

namespace luminal {

namespace fn {
/// The traits the four share; `rounds` marks the family for its gradient row. Self::of
/// rounds a floating-point value.
template <class Self>
struct rounding : same_type_result {
  static constexpr bool rounds = true;
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T x) {
    if constexpr (std::is_integral_v<T>) return x;
    else return Self::of(x);
  }
};
struct Floor : rounding<Floor> {
  static constexpr std::string_view name = "floor";
  template <class T> LUMINAL_HD static T of(T x) { using std::floor; return floor(x); }
};
struct Ceil : rounding<Ceil> {
  static constexpr std::string_view name = "ceil";
  template <class T> LUMINAL_HD static T of(T x) { using std::ceil; return ceil(x); }
};
/// rint rounds in the current rounding mode, which is to nearest, ties to even, unless a
/// program changes it (as torch.round: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2).
struct Round : rounding<Round> {
  static constexpr std::string_view name = "round";
  template <class T> LUMINAL_HD static T of(T x) { using std::rint; return rint(x); }
};
struct Trunc : rounding<Trunc> {
  static constexpr std::string_view name = "trunc";
  template <class T> LUMINAL_HD static T of(T x) { using std::trunc; return trunc(x); }
};
}  // namespace fn

/// The largest integer <= x, as torch.floor. Gradient zero.
template <expression X> constexpr auto floor(X x) { return make_unary<fn::Floor>(x); }
/// The smallest integer >= x, as torch.ceil. Gradient zero.
template <expression X> constexpr auto ceil(X x) { return make_unary<fn::Ceil>(x); }
/// The nearest integer, halves to even (2.5 -> 2, -0.5 -> -0), as torch.round. Gradient zero.
template <expression X> constexpr auto round(X x) { return make_unary<fn::Round>(x); }
/// x rounded toward zero, as torch.trunc. Gradient zero.
template <expression X> constexpr auto trunc(X x) { return make_unary<fn::Trunc>(x); }

}  // namespace luminal
