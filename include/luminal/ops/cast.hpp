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
template <element_type T, expression X>
constexpr auto cast(X x) {
  if constexpr (std::is_same_v<typename X::value_type, T>) return std::remove_cvref_t<X>{};
  else return make_unary<fn::Cast<T>>(x);
}

}  // namespace luminal
