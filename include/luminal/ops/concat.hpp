// concat and stack as views: each operand is padded with zeros to the joined extent at its
// own offset, and the padded views are added. The fused kernel that reads the sum reads
// every operand through its pad view (one kernel, no copy); the gradient of each operand
// is the slice of g that pad's adjoint takes.
#pragma once
#include "binary.hpp"
#include "slice.hpp"
#include "squeeze.hpp"

namespace luminal {

namespace detail {
/// Whether all shapes have the first one's rank and extents, except along `axis`, and a
/// static extent along it.
template <std::size_t axis, class First, class... Rest>
constexpr bool joinable() {
  auto same_but_axis = [](const auto& a, const auto& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (k != axis && !(a[k] == b[k])) return false;
    return b[axis].is_static();
  };
  return First::dims[axis].is_static() && (same_but_axis(First::dims, Rest::dims) && ...);
}
/// Each operand padded to `total` at `before`, the sum of those padded views.
template <int Axis, long long Before, long long Total, expression X, expression... Rest>
constexpr auto padded_sum(X x, Rest... rest) {
  constexpr long long extent = shape_t<X>::dims[Axis].offset;
  auto placed = pad<Axis, Before, Total - Before - extent>(x);
  if constexpr (sizeof...(Rest) == 0) return placed;
  else return placed + padded_sum<Axis, Before + extent, Total>(rest...);
}
}  // namespace detail

/// Joins tensors along an existing axis, as torch.cat(xs, dim=Axis): the shapes agree
/// except along Axis, whose extents are static. `auto y = concat<1>(a, b, c);`
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
    static_assert(detail::joinable<axis, In, shape_t<Rest>...>(),
                  "luminal: concat needs equal extents except along the axis, and static extents along it");
    static_assert((std::is_same_v<typename X::value_type, typename Rest::value_type> && ...),
                  "luminal: concat needs operands of one element type");
    constexpr long long total = (In::dims[axis].offset + ... + shape_t<Rest>::dims[axis].offset);
    return detail::padded_sum<int(axis), 0, total>(x, rest...);
  }
}

/// Joins tensors of one shape along a new axis, as torch.stack(xs, dim=Axis).
template <int Axis, expression X, expression... Rest>
constexpr auto stack(X x, Rest... rest) {
  return concat<Axis>(unsqueeze<Axis>(x), unsqueeze<Axis>(rest)...);
}

}  // namespace luminal
