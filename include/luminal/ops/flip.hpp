// flip: the elements of one axis in reverse order, as torch.flip(x, dims), a view.
//
//     auto r = flip<0>(xs);        // r[t] = xs[L - 1 - t], L static or symbolic
//     auto b = flip<0, -1>(x);     // several axes: one view per axis
#pragma once
#include "view.hpp"

namespace luminal {

/// Axis Axis in reverse order: the view's coordinate i reads the child's n - 1 - i.
template <int Axis>
struct Flip : view_op {
  static constexpr std::string_view name = "flip";
  template <class In>
  using shape = In;
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> to_child(extents<R> c, const extents<R>&, const extents<R>& in) {
    c[Axis] = in[Axis] - 1 - c[Axis];
    return c;
  }
};

/// x with each axis in Axes reversed (negative axes count from the end), as torch.flip.
template <int First, int... Rest, expression X>
constexpr auto flip(X) {
  constexpr int rank = int(shape_t<X>::rank);
  static_assert(First >= -rank && First < rank, "luminal: flip: an axis is outside the tensor's rank");
  using flipped = typename node_of<Flip<(First < 0 ? First + rank : First)>, std::remove_cvref_t<X>>::type;
  if constexpr (sizeof...(Rest) == 0) return flipped{};
  else return flip<Rest...>(flipped{});
}

}  // namespace luminal
