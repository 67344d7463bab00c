// permute / transpose: reorder axes. A view.
#pragma once
#include "../errors.hpp"
#include "view.hpp"

namespace luminal {

template <int... Order>
struct Permute : view_op {
  static constexpr std::string_view name = "permute";
  static constexpr std::array<int, sizeof...(Order)> order{Order...};
  template <class In>
  using shape = Shape<In::dims[Order]...>;

  template <std::size_t R>
  LUMINAL_HD static index_t source(index_t i, const extents<R>& out, const extents<R>& in) {
    auto coord = detail::unravel(i, out);
    std::array<index_t, R> in_coord{};
    std::size_t k = 0;
    ((in_coord[Order] = coord[k++]), ...);  // not order[k]: a static array is host memory under CUDA
    index_t flat = 0;
    for (std::size_t axis = 0; axis < R; ++axis) flat = flat * in[axis] + in_coord[axis];
    return flat;
  }
};

namespace detail {
template <std::size_t R, std::size_t N>
constexpr bool is_permutation_of_rank(const std::array<int, N>& order) {
  if (N != R) return false;
  std::array<bool, N> seen{};
  for (int axis : order) {
    if (axis < 0 || axis >= int(R) || seen[axis]) return false;
    seen[axis] = true;
  }
  return true;
}
template <std::size_t N>
constexpr text<64> order_text(const std::array<int, N>& order) {
  text<64> out;
  out.append("order (");
  for (std::size_t i = 0; i < N; ++i) { if (i) out.append(", "); out.append_int(order[i]); }
  out.append(")");
  return out;
}
}  // namespace detail

/// Reorders axes: `permute<0, 2, 1>(x)` swaps the last two axes of a rank-3 tensor.
template <int... Order, expression X>
constexpr auto permute(X) {
  using In = shape_t<X>;
  constexpr std::array<int, sizeof...(Order)> order{Order...};
  if constexpr (!detail::is_permutation_of_rank<In::rank>(order)) {
    (void)error::not_a_permutation<In::text, detail::order_text(order)>{};
    return std::remove_cvref_t<X>{};
  } else {
    return typename node_of<Permute<Order...>, std::remove_cvref_t<X>>::type{};
  }
}

namespace detail {
template <std::size_t R, std::size_t A, std::size_t B, std::size_t... I>
constexpr auto swapped_permute(std::index_sequence<I...>) {
  return Permute<int(I == A ? B : I == B ? A : I)...>{};
}
}  // namespace detail

/// Swaps two axes (default: the last two). `transpose(w)` for a matrix w.
template <int AxisA = -2, int AxisB = -1, expression X>
constexpr auto transpose(X) {
  constexpr std::size_t R = rank_v<X>;
  static_assert(R >= 2 || (AxisA != -2 || AxisB != -1), "luminal: transpose() of the last two axes needs rank >= 2");
  constexpr std::size_t a = normalize_axis<R>(AxisA), b = normalize_axis<R>(AxisB);
  if constexpr (a >= R || b >= R) {
    (void)error::axis_out_of_range<shape_t<X>::text, (a >= R ? AxisA : AxisB)>{};
    return std::remove_cvref_t<X>{};
  } else {
    using P = decltype(detail::swapped_permute<R, a, b>(std::make_index_sequence<R>{}));
    return typename node_of<P, std::remove_cvref_t<X>>::type{};
  }
}

}  // namespace luminal
