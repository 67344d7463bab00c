// permute / transpose: reorder axes. A view.
#pragma once
#include "../core/errors.hpp"
#include <boost/mp11/list.hpp>

#include "view.hpp"

namespace luminal {

template <int... Order>
struct Permute : view_op {
  static constexpr std::string_view name = "permute";
  static constexpr std::array<int, sizeof...(Order)> order{Order...};
  template <class In>
  using shape = Shape<In::dims[Order]...>;

  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> to_child(const extents<R>& c, const extents<R>&, const extents<R>&) {
    extents<R> in_c{};
    std::size_t k = 0;
    ((in_c[Order] = c[k++]), ...);  // not order[k]: a static array is host memory under CUDA
    return in_c;
  }
  /// The view's coordinates of the child's coordinates c (the inverse of to_child).
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> from_child(const extents<R>& c) {
    extents<R> out_c{};
    std::size_t k = 0;
    ((out_c[k++] = c[Order]), ...);
    return out_c;
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

namespace detail {
template <class Op>
struct permute_order {
  static constexpr bool is_permute = false;
};
template <int... Order>
struct permute_order<Permute<Order...>> {
  static constexpr bool is_permute = true;
  static constexpr std::array<int, sizeof...(Order)> value{Order...};
};
template <class X>
constexpr bool is_permute_node() {
  if constexpr (computed_node<X>) return permute_order<typename X::op>::is_permute;
  else return false;
}

/// Permute P applied to x. A permute of a permute is one permute of the inner node (its
/// axes composed), and nothing at all where the two cancel, as transpose(transpose(w)):
/// a GEMM then reads w itself.
template <class P, class X>
constexpr auto permuted([[maybe_unused]] X x) {
  if constexpr (is_permute_node<X>()) {
    using Inner = boost::mp11::mp_first<typename X::children>;
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      constexpr auto outer = permute_order<P>::value;
      constexpr auto inner = permute_order<typename X::op>::value;
      if constexpr (((inner[outer[K]] == int(K)) && ...)) return Inner{};
      else return typename node_of<Permute<inner[outer[K]]...>, Inner>::type{};
    }(std::make_index_sequence<permute_order<P>::value.size()>{});
  } else {
    return typename node_of<P, X>::type{};
  }
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
    return detail::permuted<Permute<Order...>>(std::remove_cvref_t<X>{});
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
    return detail::permuted<P>(std::remove_cvref_t<X>{});
  }
}

}  // namespace luminal
