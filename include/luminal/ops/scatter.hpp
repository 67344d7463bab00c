// scatter_add<Axis>(x, index, src) and index_add<Axis>(x, index, src): src added into a
// copy of x at positions an index picks along one axis, as torch.Tensor.scatter_add and
// torch.Tensor.index_add (out of place). Composites of a one-hot comparison and a sum, so
// every backend runs them and both passes differentiate them: the gradient w.r.t. x is
// the output's, w.r.t. src the output's cotangent gathered at the index.
//
//     auto x = input<"x", f32>(shape<3, 4>);
//     auto src = input<"src", f32>(shape<3, 2>);
//     auto idx = input<"idx", i32>(shape<3, 2>);
//     auto y = scatter_add<1>(x, idx, src);   // y[i, idx[i, j]] += src[i, j]
//     auto rows = input<"rows", i32>(shape<5>);
//     auto z = index_add<0>(x, rows, input<"r", f32>(shape<5, 4>));  // z[rows[j], :] += r[j, :]
#pragma once
#include "take_along.hpp"

namespace luminal {

namespace error {
template <auto Input, auto Source, int Axis>
struct index_add_source_must_match_input_but_along_axis {
  static_assert(always_false<Input, Source, Axis>,
                "luminal: index_add's source must have the input's shape except along the axis, "
                "where its extent is the index's length (see the input's shape, the source's "
                "shape and the axis above)");
};
template <auto Source, auto Index>
struct scatter_add_needs_a_source_no_smaller_than_its_index {
  static_assert(always_false<Source, Index>,
                "luminal: scatter_add's source must have the index's rank and, on every axis, an "
                "extent no smaller than the index's (see the source's and the index's shapes above)");
};
template <auto Index>
struct index_add_needs_a_vector_index {
  static_assert(always_false<Index>, "luminal: index_add's index must have rank 1 (see its shape above)");
};
}  // namespace error

/// torch.scatter_add(x, Axis, index, src), out of place: out = x, then for every position
/// p of index, out[p with p[Axis] replaced by index[p]] += src[p]. index is i32 with
/// src's rank, its extents no larger than src's, and no larger than x's on the other axes
/// (torch's rule; the part of src beyond index's extents is not read). An index outside
/// [0, x.shape[Axis]) makes run() throw run_error. Repeated indices add up, in a fixed
/// order (deterministic, unlike torch's CUDA atomics). O(numel(index) * x.shape[Axis]).
template <int Axis, expression X, expression Index, expression Src>
constexpr auto scatter_add(X x, Index index, Src src) {
  using In = shape_t<X>;
  using Idx = shape_t<Index>;
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  detail::require_integer_index<Index>();
  if constexpr (!std::is_same_v<typename X::value_type, typename Src::value_type>) {
    (void)error::element_types_differ<dtype_text<typename X::value_type>(), dtype_text<typename Src::value_type>()>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (a >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (!detail::fits_except<In, Idx>(a)) {
    (void)error::index_shape_does_not_fit_along_axis<In::text, Idx::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (!detail::fits_except<shape_t<Src>, Idx>(In::rank)) {
    (void)error::scatter_add_needs_a_source_no_smaller_than_its_index<shape_t<Src>::text, Idx::text>{};
    return std::remove_cvref_t<X>{};
  } else {
    constexpr Dim L = In::dims[a];
    auto picks = detail::one_hot_along<a, L>(detail::checked_index<L>(index));  // [.., J, L, ..]
    auto source = unsqueeze<int(a + 1)>(detail::cut_to<Idx, In::rank>(src));     // [.., J, 1, ..]
    auto added = sum<int(a)>(where(picks, source, c<0>));                         // [.., L, ..]
    return x + detail::pad_to<In, a>(added);
  }
}

/// torch.index_add(x, Axis, index, src), out of place: out = x, then for each j,
/// out[..., index[j], ...] += src[..., j, ...]. index is i32 of rank 1 (length J), src has
/// x's shape with extent J along Axis. Repeated indices add up; an index outside
/// [0, x.shape[Axis]) makes run() throw run_error. O(numel(src) * x.shape[Axis]).
template <int Axis, expression X, expression Index, expression Src>
constexpr auto index_add(X x, Index index, Src src) {
  using In = shape_t<X>;
  using S = shape_t<Src>;
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  detail::require_integer_index<Index>();
  if constexpr (!std::is_same_v<typename X::value_type, typename Src::value_type>) {
    (void)error::element_types_differ<dtype_text<typename X::value_type>(), dtype_text<typename Src::value_type>()>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (a >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (shape_t<Index>::rank != 1) {
    (void)error::index_add_needs_a_vector_index<shape_t<Index>::text>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (S::rank != In::rank || !(S::dims == detail::dims_replaced(In::dims, a, shape_t<Index>::dims[0]))) {
    (void)error::index_add_source_must_match_input_but_along_axis<In::text, S::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    constexpr Dim L = In::dims[a], J = shape_t<Index>::dims[0];
    // The index as [1, .., J, 1, ..] (J at axis a), compared with l along axis a + 1.
    using Column = shape_from<detail::unit_dims_but<In::rank>(a, J)>;
    using Picks = shape_from<detail::dims_inserted(Column::dims, a + 1, L)>;
    auto ids = unsqueeze<int(a + 1)>(reshape(detail::checked_index<L>(index), Column{}));
    auto picks = equal(ids, iota<int(a + 1), i32>(Picks{}));
    auto added = sum<int(a)>(where(picks, unsqueeze<int(a + 1)>(src), c<0>));  // [.., L, ..]
    return x + added;
  }
}

}  // namespace luminal
