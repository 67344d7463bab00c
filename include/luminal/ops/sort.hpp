// sort, argsort and topk along one axis, as torch.sort(stable=True), torch.argsort and
// torch.topk. Composites of comparisons and sums: every backend runs them with no kernel
// of its own. Each element's rank is counted against every other element of its row,
//
//     rank[i] = #{j : x[j] before x[i]} + #{j < i : x[j] ties x[i]},
//
// and the r-th output picks the element of rank r, so the work is O(L^2) per row of
// length L (the axis must be static, at most max_sort_extent). Ties keep their order in
// x (a stable sort, torch's stable=True; torch.topk then lists tied values by index too).
// NaN sorts after +inf ascending and first descending, as torch. The gradient of the
// values flows back to the picked positions; the indices are i32 and carry none.
//
//     auto x = input<"x", f32>(shape<4, 6>);
//     auto [values, indices] = sort<1>(x, descending);
//     auto order = argsort<1>(x);
//     auto [top, where_top] = topk<2, 1>(x);     // the 2 largest of each row, largest first
#pragma once
#include "take_along.hpp"

namespace luminal {

/// The longest axis sort, argsort and topk accept: they compare every pair of a row.
inline constexpr long long max_sort_extent = 4096;

/// Marker: `sort<Axis>(x, descending)`, as torch's descending=True.
struct descending_t {};
inline constexpr descending_t descending{};

/// What sort and topk return, as torch's (values, indices): `auto [v, i] = sort<1>(x);`.
template <expression Values, expression Indices>
struct sorted_values {
  Values values;
  Indices indices;
};

namespace error {
template <auto Shape, int Axis, long long Limit>
struct sort_needs_a_static_axis_of_at_most {
  static_assert(always_false<Shape, Axis, Limit>,
                "luminal: sort, argsort and topk compare every pair of elements along the axis "
                "(O(L^2)): the axis must have a static extent no larger than max_sort_extent "
                "(see the shape, the axis and the limit above)");
};
template <auto Shape, int Axis, long long K>
struct topk_needs_k_within_the_axis {
  static_assert(always_false<Shape, Axis, K>,
                "luminal: topk needs 1 <= K <= the axis' extent (see the shape, the axis and K above)");
};
}  // namespace error

namespace detail {

/// rank[i] along axis A of x (i32, x's shape): the position of x[i] in a stable sort,
/// ascending, or descending if Descending.
template <std::size_t A, bool Descending, expression X>
constexpr auto stable_ranks(X x) {
  using In = shape_t<X>;
  using T = typename X::value_type;
  constexpr Dim L = In::dims[A];
  using Pairs = shape_from<dims_inserted(In::dims, A + 1, L)>;  // i at axis A, j at A + 1
  auto xi = unsqueeze<int(A + 1)>(x);
  auto xj = unsqueeze<int(A)>(x);
  auto j_below_i = cast<i32>(less_than(iota<int(A + 1), i32>(Pairs{}), iota<int(A), i32>(Pairs{})));
  auto ji_less = cast<i32>(less_than(xj, xi));
  auto ij_less = cast<i32>(less_than(xi, xj));
  // Exactly one of: j strictly before i, i strictly before j, a tie.
  if constexpr (floating_element<T>) {
    auto nan_i = cast<i32>(logical_not(is_ordered(xi)));
    auto nan_j = cast<i32>(logical_not(is_ordered(xj)));
    auto ties = cast<i32>(equal(ji_less + ij_less, c<0>)) * cast<i32>(equal(nan_i, nan_j));
    // NaN compares less than nothing: it goes last ascending, first descending.
    auto before = [&] {
      if constexpr (Descending) return ij_less + nan_j * (c<1> - nan_i);
      else return ji_less + nan_i * (c<1> - nan_j);
    }();
    return sum<int(A + 1)>(before + ties * j_below_i);
  } else {
    auto ties = cast<i32>(equal(ji_less + ij_less, c<0>));
    auto before = [&] {
      if constexpr (Descending) return ij_less;
      else return ji_less;
    }();
    return sum<int(A + 1)>(before + ties * j_below_i);
  }
}

/// The first K elements of x's stable order along axis A, and their indices.
template <std::size_t A, bool Descending, Dim K, expression X>
constexpr auto sorted_first(X x) {
  using In = shape_t<X>;
  auto ranks = stable_ranks<A, Descending>(x);
  using Picks = shape_from<dims_inserted(In::dims, A + 1, K)>;  // i at axis A, r at A + 1
  auto picks = equal(unsqueeze<int(A + 1)>(ranks), iota<int(A + 1), i32>(Picks{}));
  auto values = sum<int(A)>(where(picks, unsqueeze<int(A + 1)>(x), c<0>));
  auto indices = sum<int(A)>(where(picks, iota<int(A), i32>(Picks{}), c<0>));
  return sorted_values<decltype(values), decltype(indices)>{values, indices};
}

template <class In, int Axis>
constexpr bool sortable_axis() {
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  if constexpr (a >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return false;
  } else if constexpr (!In::dims[a].is_static() || In::dims[a].offset > max_sort_extent) {
    (void)error::sort_needs_a_static_axis_of_at_most<In::text, Axis, max_sort_extent>{};
    return false;
  } else {
    return true;
  }
}

}  // namespace detail

/// torch.sort(x, dim=Axis, descending=..., stable=True): `{values, indices}` along Axis
/// (default the last), ascending, or descending with `sort<Axis>(x, descending)`.
/// O(L^2) per row (see the top of this file).
template <int Axis = -1, expression X, class... Order>
  requires(std::is_same_v<Order, descending_t> && ...) && (sizeof...(Order) <= 1)
constexpr auto sort(X x, Order...) {
  using In = shape_t<X>;
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  if constexpr (!detail::sortable_axis<In, Axis>()) {
    return sorted_values<std::remove_cvref_t<X>, std::remove_cvref_t<X>>{x, x};
  } else {
    return detail::sorted_first<a, sizeof...(Order) == 1, In::dims[a]>(x);
  }
}

/// torch.argsort(x, dim=Axis, descending=..., stable=True): the i32 indices of sort.
template <int Axis = -1, expression X, class... Order>
  requires(std::is_same_v<Order, descending_t> && ...) && (sizeof...(Order) <= 1)
constexpr auto argsort(X x, Order... order) {
  return sort<Axis>(x, order...).indices;
}

/// torch.topk(x, K, dim=Axis): `{values, indices}` of the K largest along Axis (default the
/// last), largest first; tied values come by increasing index. O(L^2) per row.
template <long long K, int Axis = -1, expression X>
constexpr auto topk(X x) {
  using In = shape_t<X>;
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  if constexpr (!detail::sortable_axis<In, Axis>()) {
    return sorted_values<std::remove_cvref_t<X>, std::remove_cvref_t<X>>{x, x};
  } else if constexpr (K < 1 || K > In::dims[a].offset) {
    (void)error::topk_needs_k_within_the_axis<In::text, Axis, K>{};
    return sorted_values<std::remove_cvref_t<X>, std::remove_cvref_t<X>>{x, x};
  } else {
    return detail::sorted_first<a, true, Dim{K}>(x);
  }
}

}  // namespace luminal
