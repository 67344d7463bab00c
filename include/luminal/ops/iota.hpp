// iota: the index along one axis of a shape, computed, never stored.
#pragma once
#include "../core/errors.hpp"
#include "view.hpp"

namespace luminal {

template <int Axis, shape_type S, element_type T>
struct Iota {
  static constexpr op_kind kind = op_kind::iota;
  static constexpr std::string_view name = "iota";
  static constexpr int axis = Axis;
  template <class... None>
  using value_type = T;
  template <class... None>
  using shape = S;
};

/// `iota<1, i32>(shape<4, 5>)` holds out[i, j] = j.
template <int Axis, element_type T = i32, Dim... D>
constexpr auto iota(Shape<D...> = {}) {
  using S = Shape<D...>;
  constexpr std::size_t axis = normalize_axis<S::rank>(Axis);
  if constexpr (axis >= S::rank) {
    (void)error::axis_out_of_range<S::text, Axis>{};
    return Const<T, T(0)>{};
  } else {
    return typename node_of<Iota<int(axis), S, T>>::type{};
  }
}

}  // namespace luminal
