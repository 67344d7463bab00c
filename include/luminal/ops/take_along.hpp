// gather<Axis>(x, index): elements picked along one axis by an index of the output's shape,
// as torch.gather (also spelled take_along_dim<Axis>). A composite: every backend runs it
// with no kernel of its own, and both passes differentiate it.
//
//     auto x = input<"x", f32>(shape<4, 5>);
//     auto idx = input<"idx", i32>(shape<4, 2>);
//     auto y = gather<1>(x, idx);        // y[i, j] = x[i, idx[i, j]], shape (4, 2)
//
// gather(table, ids) without an axis (ops/gather.hpp) is the embedding lookup, a primitive;
// an explicit axis picks this overload, so the two spellings never clash.
#pragma once
#include "../core/errors.hpp"
#include "composite.hpp"
#include "expand.hpp"
#include "gather.hpp"
#include "iota.hpp"
#include "reduce.hpp"
#include "reshape.hpp"
#include "slice.hpp"
#include "squeeze.hpp"
#include "where.hpp"

namespace luminal {

namespace error {
template <auto Input, auto Index, int Axis>
struct index_shape_does_not_fit_along_axis {
  static_assert(always_false<Input, Index, Axis>,
                "luminal: the index must have the input's rank, and on every axis but the one "
                "indexed an extent no larger than the input's (equal where either is symbolic) "
                "(see the input's shape, the index's shape and the axis above)");
};
}  // namespace error

namespace detail {

/// dims with d inserted before position `at`.
template <std::size_t R>
constexpr dims_t<R + 1> dims_inserted(const dims_t<R>& dims, std::size_t at, Dim d) {
  dims_t<R + 1> out{};
  for (std::size_t k = 0, j = 0; k <= R; ++k) out[k] = k == at ? d : dims[j++];
  return out;
}
/// dims with position `at` set to d.
template <std::size_t R>
constexpr dims_t<R> dims_replaced(dims_t<R> dims, std::size_t at, Dim d) {
  dims[at] = d;
  return dims;
}
/// R ones, with d at position `at`.
template <std::size_t R>
constexpr dims_t<R> unit_dims_but(std::size_t at, Dim d) {
  dims_t<R> out{};
  for (std::size_t k = 0; k < R; ++k) out[k] = k == at ? d : Dim{1};
  return out;
}

/// Whether an index of shape Small fits an input of shape Big along every axis but `skip`:
/// equal extents, or static ones with the index's no larger (torch's rule).
template <class Big, class Small>
constexpr bool fits_except(std::size_t skip) {
  if (Big::rank != Small::rank) return false;
  for (std::size_t k = 0; k < Big::rank; ++k) {
    if (k == skip || Big::dims[k] == Small::dims[k]) continue;
    if (!Big::dims[k].is_static() || !Small::dims[k].is_static() || Small::dims[k].offset > Big::dims[k].offset)
      return false;
  }
  return true;
}

/// x cut down to Target's extents on every axis but `skip` (a slice from 0 where they differ).
template <class Target, std::size_t Skip, std::size_t K = 0, expression X>
constexpr auto cut_to(X x) {
  if constexpr (K == Target::rank) {
    return x;
  } else if constexpr (K == Skip || shape_t<X>::dims[K] == Target::dims[K]) {
    return cut_to<Target, Skip, K + 1>(x);
  } else {
    return cut_to<Target, Skip, K + 1>(slice<int(K), 0, Target::dims[K].offset>(x));
  }
}

/// y padded with zeros up to Target's extents on every axis but `skip` (cut_to's adjoint).
template <class Target, std::size_t Skip, std::size_t K = 0, expression Y>
constexpr auto pad_to(Y y) {
  if constexpr (K == Target::rank) {
    return y;
  } else if constexpr (K == Skip || shape_t<Y>::dims[K] == Target::dims[K]) {
    return pad_to<Target, Skip, K + 1>(y);
  } else {
    constexpr long long extra = Target::dims[K].offset - shape_t<Y>::dims[K].offset;
    return pad_to<Target, Skip, K + 1>(pad<int(K), 0, extra>(y));
  }
}

/// The index itself, read through a gather from a table of L zeros: an index outside
/// [0, L) then makes run() throw run_error (as gather(table, ids) does) wherever the index
/// is read, in the forward pass or in a gradient, instead of picking nothing.
template <Dim L, expression Index>
constexpr auto checked_index(Index index) {
  return index + gather(expand(Const<i32, i32(0)>{}, Shape<L>{}), index);
}

/// For an index [..., J, ...] (J at axis A) over an axis of extent L: the bool tensor
/// [..., J, L, ...] that is true where index == l (l at axis A + 1).
template <std::size_t A, Dim L, expression Index>
constexpr auto one_hot_along(Index ids) {
  using Picks = shape_from<dims_inserted(shape_t<Index>::dims, A + 1, L)>;
  return equal(unsqueeze<int(A + 1)>(ids), iota<int(A + 1), i32>(Picks{}));
}

template <class X>
constexpr void require_integer_index() {
  if constexpr (!std::is_same_v<typename X::value_type, i32>)
    (void)error::index_must_be_integer<dtype_text<typename X::value_type>()>{};
}

}  // namespace detail

/// torch.gather(x, Axis, index): out[..., j, ...] = x[..., index[..., j, ...], ...], with
/// index i32 of the output's shape (its extents on the other axes no larger than x's). An
/// index outside [0, x.shape[Axis]) makes run() throw run_error. The gradient sends each
/// output's cotangent to the element it picked (summed where two picks coincide), as
/// torch's scatter_add. O(numel(out) * x.shape[Axis]) work: a one-hot comparison along
/// the axis summed in one fused reduction, both ways.
template <int Axis, expression X, expression Index>
constexpr auto gather(X x, Index index) {
  using In = shape_t<X>;
  using Idx = shape_t<Index>;
  constexpr std::size_t a = normalize_axis<In::rank>(Axis);
  detail::require_integer_index<Index>();
  if constexpr (a >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (!detail::fits_except<In, Idx>(a)) {
    (void)error::index_shape_does_not_fit_along_axis<In::text, Idx::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    constexpr Dim L = In::dims[a];
    auto picks = detail::one_hot_along<a, L>(detail::checked_index<L>(index));  // [.., J, L, ..]
    auto source = unsqueeze<int(a)>(detail::cut_to<Idx, a>(x));                  // [.., 1, L, ..]
    return sum<int(a + 1)>(where(picks, source, c<0>));
  }
}

/// torch.take_along_dim(x, index, Axis) for an index of x's rank (no broadcasting): gather<Axis>.
template <int Axis, expression X, expression Index>
constexpr auto take_along_dim(X x, Index index) {
  return gather<Axis>(x, index);
}

}  // namespace luminal
