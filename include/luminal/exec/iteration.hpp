// Where an elementwise kernel's loop nest runs (detail::iteration): over the root's
// coordinates, a permute's input, or the input of a reshape under it; and the shape facts
// of a nest that the kernels read (the row's axis and extent, the short-row limit).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "eval.hpp"
namespace luminal::detail {

/// The longest row run as a short row: unrolled inside the loop over rows (a pool's
/// window, the inner axis a reshape splits off, a small image's rows in im2col and col2im).
/// Longer rows are loops of their own: a loop's setup (a walk through the views per row)
/// and its scalar ends cost more than a short row's work.
inline constexpr index_t short_row_limit = 16;

/// The last axis before axis `end` whose extent is not statically 1, or `none` if there
/// is none.
template <index_t... E>
constexpr std::size_t last_axis_not_one(std::integer_sequence<index_t, E...>, std::size_t end, std::size_t none) {
  constexpr index_t extents[] = {E..., 0};
  std::size_t axis = none;
  for (std::size_t k = 0; k < end && k < sizeof...(E); ++k)
    if (extents[k] != 1) axis = k;
  return axis;
}
/// The last axis of a shape whose extent is not statically 1 (0 if there is none): the
/// loop nests' inner axis. Axes after it hold coordinate 0 only.
template <index_t... E>
constexpr std::size_t row_axis(std::integer_sequence<index_t, E...> s) {
  return last_axis_not_one(s, sizeof...(E), 0);
}
/// The static extent of axis k, or -1 where it is symbolic or past the rank.
template <index_t... E>
constexpr index_t static_extent(std::integer_sequence<index_t, E...>, std::size_t k) {
  constexpr index_t extents[] = {E..., -1};
  return k < sizeof...(E) && extents[k] >= 0 ? extents[k] : -1;
}
/// The static extent of the inner axis, or -1 where it is symbolic (or the rank is 0).
template <index_t... E>
constexpr index_t row_extent(std::integer_sequence<index_t, E...> s) {
  return sizeof...(E) == 0 ? -1 : static_extent(s, row_axis(s));
}

/// Whether a view's input can be walked in its place: computed here (not stored), with
/// axes of its own. False for every other node.
template <class P, int Id, class N = node_at<typename P::nodes, Id>,
          bool View = child_reads_of(N::kind) == child_reads::remapped>
struct peelable : std::false_type {};
template <class P, int Id, class N>
struct peelable<P, Id, N, true>
    : std::bool_constant<!first_child_node<P, N>::stored && first_child_node<P, N>::rank != 0> {};

/// The first reshape-free node from Id down: the reshapes at a kernel's root read the
/// same elements in the same order, so the kernel loops past them.
template <class P, int Id, class N = node_at<typename P::nodes, Id>,
          bool Peel = op_traits<typename N::op>::reshapes && peelable<P, Id>::value>
struct past_reshapes : std::integral_constant<int, Id> {};
template <class P, int Id, class N>
struct past_reshapes<P, Id, N, true> : past_reshapes<P, flat::detail::first_child<typename N::children>::value> {};

/// Whether rows of `inner` elements are shorter than rows of `outer` (both static).
constexpr bool rows_shorten(index_t inner, index_t outer) { return inner >= 0 && outer >= 0 && inner < outer; }

/// Permute node X, if the loop may run over its input instead (-1 otherwise): X is a
/// permute (it maps coordinates back from its child), computed here, and its input's
/// inner axis is not shorter than its own.
template <class P, int X, class N = node_at<typename P::nodes, X>,
          bool Permute = op_traits<typename N::op>::permutes && peelable<P, X>::value>
struct walkable_permute : std::integral_constant<int, -1> {};
template <class P, int X, class N>
struct walkable_permute<P, X, N, true>
    : std::integral_constant<int, rows_shorten(row_extent(typename first_child_node<P, N>::static_extents{}),
                                               row_extent(typename N::static_extents{}))
                                      ? -1
                                      : X> {};

/// A reshape under node N of a kernel that loops over node It, reached through maps, that
/// only splits axes and splits the inner one into a short last axis (a max pool's
/// gradient read in (.., 28) columns as (.., 14, 2) windows), or -1. The nest then runs
/// over the reshape's input, whose inner rows of at most short_row_limit run unrolled, and
/// no coordinate is divided: the reshape reads its input where the nest is, the other
/// reads merge coordinates back by multiply-adds.
template <class P, int It, int N, class X = node_at<typename P::nodes, N>,
          int Case = !(N == It || !X::stored)                               ? 0
                     : child_reads_of(X::kind) == child_reads::same_place ? 1
                     : op_traits<typename X::op>::reshapes                 ? 2
                                                                           : 0>
struct split_under : std::integral_constant<int, -1> {};
/// Whether reshape X only splits axes, and splits its inner axis off its input's rows of
/// `inner` elements, short enough to run unrolled.
template <class X>
constexpr bool splits_into_short_rows(index_t inner) {
  return op_traits<typename X::op>::only_splits && X::rank > 0 &&
         X::op::inputs_of(row_axis(typename X::static_extents{})) > 1 &&
         inner > 1 && inner <= short_row_limit;
}
/// Whether reshape X only merges axes, into its input's longer rows of `inner` elements.
template <class X>
constexpr bool merges_into_longer_rows(index_t inner) {
  constexpr index_t outer = row_extent(typename X::static_extents{});
  return op_traits<typename X::op>::only_merges && X::rank > 0 && outer > 0 && inner > outer;
}
/// The first of the values that is not -1, or -1.
constexpr int first_found(std::initializer_list<int> found) {
  for (int f : found)
    if (f >= 0) return f;
  return -1;
}
template <class P, int It, class Children>
struct split_under_children;
template <class P, int It, int... C>
struct split_under_children<P, It, std::integer_sequence<int, C...>>
    : std::integral_constant<int, first_found({split_under<P, It, C>::value...})> {};
template <class P, int It, int N, class X>
struct split_under<P, It, N, X, 1> : split_under_children<P, It, typename X::children> {};
template <class P, int It, int N, class X>
struct split_under<P, It, N, X, 2>
    : std::integral_constant<int, splits_into_short_rows<X>(row_extent(
                                      typename first_child_node<P, X>::static_extents{}))
                                      ? N
                                      : -1> {};

/// A reshape under node N of a kernel that loops over node It, reached through maps whose
/// other operands have one value everywhere, that only merges axes into longer rows of
/// its input (a convolution's (.., Ho Wo) GEMM output read as (.., Ho, Wo) by its bias
/// and ReLU), or -1. The nest then runs over the reshape's input, in rows of Ho Wo
/// instead of Wo.
template <class P, int It, int N, class X = node_at<typename P::nodes, N>,
          int Case = !(N == It || !X::stored)                               ? 0
                     : child_reads_of(X::kind) == child_reads::same_place ? 1
                     : op_traits<typename X::op>::reshapes                 ? 2
                                                                           : 0>
struct merge_under : std::integral_constant<int, -1> {};
template <class P, int It, class Children>
struct merge_under_children;
template <class P, int It, int... C>
struct merge_under_children<P, It, std::integer_sequence<int, C...>>
    : std::integral_constant<int, ((coordinate_free<P, C>::value ? 0 : 1) + ...) != 1
                                      ? -1
                                      : first_found({std::conditional_t<coordinate_free<P, C>::value,
                                                                        std::integral_constant<int, -1>,
                                                                        merge_under<P, It, C>>::value...})> {};
template <class P, int It, int N, class X>
struct merge_under<P, It, N, X, 1> : merge_under_children<P, It, typename X::children> {};
template <class P, int It, int N, class X>
struct merge_under<P, It, N, X, 2>
    : std::integral_constant<int, merges_into_longer_rows<X>(row_extent(
                                      typename first_child_node<P, X>::static_extents{}))
                                      ? N
                                      : -1> {};

/// The reshape under a kernel's map that loops over node It, if any (split_under, then
/// merge_under).
template <class P, int It>
struct split_or_merge
    : std::conditional_t<(split_under<P, It, It>::value >= 0), split_under<P, It, It>, merge_under<P, It, It>> {};
/// Whether reshape Split merges axes (merge_under) rather than splitting them; false for -1.
template <class P, int Split>
struct merges_at : std::bool_constant<!op_traits<typename node_at<typename P::nodes, Split>::op>::only_splits> {};
template <class P>
struct merges_at<P, -1> : std::false_type {};

/// Where a kernel rooted at Id loops: over the coordinates of node `it`, which is the root
/// or, past the reshapes at the root (same elements, same order), a permute's input, read
/// in its own order while the permuted writes go out at a stride. `permute` is that
/// permute, or -1. A permute whose input has a shorter inner axis than its own stays: the
/// loop would run over fewer elements per row (im2col's windows end in the window's 3
/// offsets, its rows in the image's 28 columns).
template <class P, int Id>
struct iteration {
  using nodes = typename P::nodes;
  static constexpr int permute = walkable_permute<P, past_reshapes<P, Id>::value>::value;
  static constexpr int it = permute >= 0 ? first_child_at<P, permute>::value : past_reshapes<P, Id>::value;
  /// A reshape under `it` whose input the nest runs over (split_under, merge_under), or -1.
  static constexpr int split =
      std::conditional_t<permute < 0 && child_reads_of(node_at<nodes, it>::kind) == child_reads::same_place &&
                             node_at<nodes, it>::rank != 0,
                         split_or_merge<P, it>, std::integral_constant<int, -1>>::value;
  /// Whether `split` is a reshape that merges axes (merge_under), not one that splits them.
  static constexpr bool merges = merges_at<P, split>::value;
  /// The node whose extents the loop nest runs over.
  static constexpr int loop = split >= 0 ? first_child_at<P, split>::value : it;
};

}  // namespace luminal::detail
