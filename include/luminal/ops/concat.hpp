// concat and stack as views: each operand is padded with zeros to the joined extent at its
// own offset, and the padded views are added (along a symbolic axis, two at a time, the
// shift of the second a run-time extent). The fused kernel that reads the sum reads
// every operand through its pad view (one kernel, no copy); the gradient of each operand
// is the slice of g that pad's adjoint takes.
#pragma once
#include "binary.hpp"
#include "slice.hpp"
#include "squeeze.hpp"

namespace luminal {

namespace detail {
/// Whether all shapes have the first one's rank and extents, except along `axis`.
template <std::size_t axis, class First, class... Rest>
constexpr bool same_but_axis() {
  auto same = [](const auto& a, const auto& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (k != axis && !(a[k] == b[k])) return false;
    return true;
  };
  return (same(First::dims, Rest::dims) && ...);
}
/// Whether the extents along `axis`, added left to right, stay one extent each step:
/// static ones, a symbolic one and static ones (Past and 1: Past+1), or multiples of one
/// symbol product (Seq and Seq: 2*Seq).
template <std::size_t axis, class... S>
constexpr bool axis_extents_add() {
  Dim total{0};
  bool ok = true;
  for (const Dim& d : {S::dims[axis]...}) ok = ok && add_extents(Dim{total}, d, total);
  return ok;
}
/// Each operand padded to `total` at `before`, the sum of those padded views.
template <int Axis, long long Before, long long Total, expression X, expression... Rest>
constexpr auto padded_sum(X x, Rest... rest) {
  constexpr long long extent = shape_t<X>::dims[Axis].offset;
  auto placed = pad<Axis, Before, Total - Before - extent>(x);
  if constexpr (sizeof...(Rest) == 0) return placed;
  else return placed + padded_sum<Axis, Before + extent, Total>(rest...);
}
/// Operands joined two at a time, left to right, where an extent along the axis is
/// symbolic: each join pads one side by a static amount (0), so the other side's shift,
/// a symbolic extent, is read from the extents at run time (PadExtents).
template <int Axis, expression X, expression Y, expression... Rest>
constexpr auto joined_pairwise(X x, Y y, Rest... rest) {
  constexpr Dim ex = shape_t<X>::dims[Axis], ey = shape_t<Y>::dims[Axis];
  auto joined = pad_by<Axis, Dim{0}, ey>(x) + pad_by<Axis, ex, Dim{0}>(y);
  if constexpr (sizeof...(Rest) == 0) return joined;
  else return joined_pairwise<Axis>(joined, rest...);
}
}  // namespace detail

/// Joins tensors along an existing axis, as torch.cat(xs, dim=Axis): the shapes agree
/// except along Axis. `auto y = concat<1>(a, b, c);` Along a symbolic axis the extents must
/// add up to one extent: a key cache (Past, D) and a new row (1, D) join to (Past+1, D),
/// (Seq, D) and (Seq, D) to (2*Seq, D); (Past, D) and (Seq, D) are refused.
template <int Axis, expression X, expression... Rest>
constexpr auto concat(X x, Rest... rest) {
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (sizeof...(Rest) == 0) {
    return x;
  } else {
    static_assert(detail::same_but_axis<axis, In, shape_t<Rest>...>(),
                  "luminal: concat needs equal extents except along the axis");
    static_assert((std::is_same_v<typename X::value_type, typename Rest::value_type> && ...),
                  "luminal: concat needs operands of one element type");
    constexpr bool all_static = (In::dims[axis].is_static() && ... && shape_t<Rest>::dims[axis].is_static());
    if constexpr (all_static) {
      constexpr long long total = (In::dims[axis].offset + ... + shape_t<Rest>::dims[axis].offset);
      return detail::padded_sum<int(axis), 0, total>(x, rest...);
    } else {
      static_assert(detail::axis_extents_add<axis, In, shape_t<Rest>...>(),
                    "luminal: concat along a symbolic axis needs extents that add up to one extent: static "
                    "ones and one symbolic extent (Past and 1 give Past+1), or multiples of one symbol "
                    "product (Seq and Seq give 2*Seq); Past and Seq cannot be joined");
      if constexpr (detail::axis_extents_add<axis, In, shape_t<Rest>...>())
        return detail::joined_pairwise<int(axis)>(x, rest...);
      else
        return std::remove_cvref_t<X>{};
    }
  }
}

/// Joins tensors of one shape along a new axis, as torch.stack(xs, dim=Axis).
template <int Axis, expression X, expression... Rest>
constexpr auto stack(X x, Rest... rest) {
  return concat<Axis>(unsqueeze<Axis>(x), unsqueeze<Axis>(rest)...);
}

}  // namespace luminal
