// Compile-time facts about the nodes of a flat program (flat.hpp) that the evaluator and
// the loop nests branch on: which subtrees evaluate at a flat index, which have one value
// everywhere, which read through pads.
//
//     if constexpr (detail::evaluates_flat<P, Id>::value) ...   // P: flat::graph_of<Layout>
//
// Each fact is a class template per node, recursing into its children's: a constexpr
// function per node, with a lambda to unpack the children, would be four functions and a
// class per node and kernel, which GCC keeps to the end of the translation unit.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "flat.hpp"
#include "../ops/slice.hpp"

namespace luminal::detail {

/// Node Id of flat graph P, through a class over P: in a function's signature it is
/// mangled as P's key and Id, where node_at<typename P::nodes, Id> would spell every node
/// of P (a kernel's evaluator functions name their nodes' types in their return types).
template <class P, int Id>
struct flat_node {
  using type = node_at<typename P::nodes, Id>;
};

/// The node of flat graph P that is node N's first child (views, gathers;
/// flat::detail::first_child gives its id).
template <class P, class N>
using first_child_node = node_at<typename P::nodes, flat::detail::first_child<typename N::children>::value>;

/// Node Id's first child, or -1 for Id = -1.
template <class P, int Id>
struct first_child_at : flat::detail::first_child<typename node_at<typename P::nodes, Id>::children> {};
template <class P>
struct first_child_at<P, -1> : std::integral_constant<int, -1> {};

/// Whether every extent is statically 1 (true for rank 0).
template <class Extents>
struct all_extents_one;
template <index_t... E>
struct all_extents_one<std::integer_sequence<index_t, E...>> : std::bool_constant<((E == 1) && ...)> {};

/// Whether view node Id shows the one element of its child everywhere: its child has one
/// element whatever the extents bound (rank 0, or all extents 1), and it pads nothing.
template <class P, int Id, class N = node_at<typename P::nodes, Id>>
struct broadcasts_one_element
    : std::bool_constant<all_extents_one<typename first_child_node<P, N>::static_extents>::value &&
                         !op_traits<typename N::op>::pads> {};

/// Whether node Id evaluates at a flat index: a leaf, a stored value, a constant, or maps
/// and reshapes of such. With Root, its own buffer is the one being written, so its
/// children decide.
template <class P, int Id, bool Root = false, class N = node_at<typename P::nodes, Id>,
          int Case = is_leaf(N::kind) || (!Root && N::stored) || same_everywhere(N::kind) ? 0
                     : child_reads_of(N::kind) == child_reads::same_place                     ? 1
                     : child_reads_of(N::kind) == child_reads::remapped                       ? 2
                                                                                              : 3>
struct evaluates_flat : std::bool_constant<Case == 0> {};
template <class P, class Children>
struct all_evaluate_flat;
template <class P, int... C>
struct all_evaluate_flat<P, std::integer_sequence<int, C...>>
    : std::bool_constant<(evaluates_flat<P, C>::value && ...)> {};
template <class P, int Id, bool Root, class N>
struct evaluates_flat<P, Id, Root, N, 1> : all_evaluate_flat<P, typename N::children> {};
template <class P, int Id, bool Root, class N>
struct evaluates_flat<P, Id, Root, N, 2>
    : std::conditional_t<broadcasts_one_element<P, Id>::value, std::true_type,
                         std::conditional_t<op_traits<typename N::op>::reshapes,
                                            evaluates_flat<P, flat::detail::first_child<typename N::children>::value>,
                                            std::false_type>> {};

/// Whether node Id has one value everywhere, read without coordinates: a constant, an
/// extent, a scalar, a broadcast of one element, or a map computed here of such values.
template <class P, int Id, class N = node_at<typename P::nodes, Id>,
          int Case = N::rank == 0 || same_everywhere(N::kind)                           ? 0
                     : child_reads_of(N::kind) == child_reads::remapped                    ? 1
                     : child_reads_of(N::kind) == child_reads::same_place && !N::stored    ? 2
                                                                                           : 3>
struct coordinate_free : std::bool_constant<Case == 0> {};
template <class P, class Children>
struct all_coordinate_free;
template <class P, int... C>
struct all_coordinate_free<P, std::integer_sequence<int, C...>>
    : std::bool_constant<(coordinate_free<P, C>::value && ...)> {};
template <class P, int Id, class N>
struct coordinate_free<P, Id, N, 1> : broadcasts_one_element<P, Id> {};
template <class P, int Id, class N>
struct coordinate_free<P, Id, N, 2> : all_coordinate_free<P, typename N::children> {};

/// Whether the kernel's expression at node Id reads through a pad view.
template <class P, int Id, bool Root = false, class N = node_at<typename P::nodes, Id>,
          int Case = is_leaf(N::kind) || (!Root && N::stored)                                 ? 0
                     : child_reads_of(N::kind) == child_reads::same_place ||
                               child_reads_of(N::kind) == child_reads::by_index                 ? 1
                     : child_reads_of(N::kind) == child_reads::remapped                          ? 2
                                                                                                 : 0>
struct reads_padding : std::false_type {};
template <class P, class Children>
struct any_reads_padding;
template <class P, int... C>
struct any_reads_padding<P, std::integer_sequence<int, C...>>
    : std::bool_constant<(reads_padding<P, C>::value || ...)> {};
template <class P, int Id, bool Root, class N>
struct reads_padding<P, Id, Root, N, 1> : any_reads_padding<P, typename N::children> {};
template <class P, int Id, bool Root, class N>
struct reads_padding<P, Id, Root, N, 2>
    : std::conditional_t<op_traits<typename N::op>::pads, std::true_type,
                         reads_padding<P, flat::detail::first_child<typename N::children>::value>> {};

/// The axis a padding view tests (pad_axis), or -1 for a padding view of another kind.
template <class Op>
struct pad_axis : std::integral_constant<int, -1> {};
template <int Axis, long long Before, long long After, std::uint64_t ValueBits>
struct pad_axis<Pad<Axis, Before, After, ValueBits>> : std::integral_constant<int, Axis> {};
template <int Axis, Dim Before, Dim After>
struct pad_axis<PadExtents<Axis, Before, After>> : std::integral_constant<int, Axis> {};

/// Whether view op Op maps coordinates affinely: every view but a reshape whose unravel
/// wraps around (one that merges axes of its input; one that only splits them is a
/// multiply-add per axis, as a convolution's GEMM output read as (.., Ho, Wo) by col2im)
/// and a padding view whose tested axis is unknown.
template <class Op>
constexpr bool maps_affinely() {
  if constexpr (op_traits<Op>::pads) return pad_axis<Op>::value >= 0;
  else return !op_traits<Op>::reshapes || op_traits<Op>::only_merges;
}

/// Whether, along a row of the loop nest (one coordinate of node Id advancing by one),
/// each pad's test is of a coordinate that moves monotonically: then the elements inside
/// each pad are one interval of the row. Views map coordinates affinely (maps_affinely),
/// except a reshape that merges axes (its unravel wraps around) and a gather's table (the
/// row it reads comes from a value), so no pad may lie below either.
template <class P, int Id, bool Root = false, class N = node_at<typename P::nodes, Id>,
          int Case = !reads_padding<P, Id, Root>::value                      ? 0
                     : child_reads_of(N::kind) == child_reads::same_place ? 1
                     : child_reads_of(N::kind) == child_reads::remapped   ? 2
                                                                          : 3>
struct pads_monotone : std::bool_constant<Case == 0> {};
template <class P, class Children>
struct all_pads_monotone;
template <class P, int... C>
struct all_pads_monotone<P, std::integer_sequence<int, C...>>
    : std::bool_constant<(pads_monotone<P, C>::value && ...)> {};
template <class P, int Id, bool Root, class N>
struct pads_monotone<P, Id, Root, N, 1> : all_pads_monotone<P, typename N::children> {};
template <class P, int Id, bool Root, class N>
struct pads_monotone<P, Id, Root, N, 2>
    : std::conditional_t<!maps_affinely<typename N::op>(), std::false_type,
                         pads_monotone<P, flat::detail::first_child<typename N::children>::value>> {};

/// How many pads a kernel's walk from node Id reads through that lie below no other pad
/// on the way: a sum of pads (a concat, col2im's shifted windows) has one per operand.
/// A pad read twice (x * x of a padded x) counts twice: each read is tested at its own
/// coordinates. Counts mirror evaluator::at, which numbers them in walk order; views
/// broadcasting one element and gathers' tables are read as tested, not counted.
template <class P, int Id, bool Root = false, class N = node_at<typename P::nodes, Id>,
          int Case = !reads_padding<P, Id, Root>::value                    ? 0
                     : child_reads_of(N::kind) == child_reads::same_place ? 1
                     : child_reads_of(N::kind) == child_reads::by_index   ? 2
                     : op_traits<typename N::op>::pads                     ? 3
                                                                           : 4>
struct top_pads : std::integral_constant<int, 0> {};
/// A sum of counts, at most 1 << 20: reads shared down a deep graph multiply their paths.
constexpr int saturating_sum(std::initializer_list<int> counts) {
  long long n = 0;
  for (int c : counts) n = n + c < (1 << 20) ? n + c : (1 << 20);
  return int(n);
}
template <class P, class Children>
struct top_pads_of_children;
template <class P, int... C>
struct top_pads_of_children<P, std::integer_sequence<int, C...>>
    : std::integral_constant<int, saturating_sum({0, top_pads<P, C>::value...})> {};
template <class P, int Id, bool Root, class N>
struct top_pads<P, Id, Root, N, 1> : top_pads_of_children<P, typename N::children> {};
template <class P, int Id, bool Root, class N>
struct top_pads<P, Id, Root, N, 2> : top_pads<P, flat::detail::second_child<typename N::children>::value> {};
template <class P, int Id, bool Root, class N>
struct top_pads<P, Id, Root, N, 3> : std::integral_constant<int, 1> {};
template <class P, int Id, bool Root, class N>
struct top_pads<P, Id, Root, N, 4>
    : std::conditional_t<broadcasts_one_element<P, Id>::value, std::integral_constant<int, 0>,
                         top_pads<P, flat::detail::first_child<typename N::children>::value>> {};

/// How a walk reads the pads below a node (evaluator::at's Pads): pads_checked tests each
/// element; pads_inside reads every pad as inside; a mask with pads_decided set says, for
/// each pad below the node that lies below no other (top_pads, bit 0 first in walk order),
/// whether the element is inside it (1: read unchecked, and every pad below it too) or in
/// its padding (0: its pad value, the expression under it not evaluated).
inline constexpr std::uint64_t pads_checked = 0, pads_inside = ~std::uint64_t(0),
                                pads_decided = std::uint64_t(1) << 63;
/// The number of pads the first k children of a map read (top_pads of each in `counts`).
template <std::size_t N>
constexpr int count_before(const std::array<int, N>& counts, std::size_t k) {
  int n = 0;
  for (std::size_t j = 0; j < k; ++j) n += counts[j];
  return n;
}

/// Elements [lo, hi) of a row; an empty part is {0, 0}.
struct row_part {
  index_t lo = 0, hi = 0;
};
LUMINAL_HD constexpr row_part intersect(row_part a, row_part b) {
  const index_t lo = a.lo > b.lo ? a.lo : b.lo, hi = a.hi < b.hi ? a.hi : b.hi;
  return lo < hi ? row_part{lo, hi} : row_part{};
}
/// The elements j of a row of n where 0 <= b + a j < e: a pad's test of a coordinate that
/// moves by a per element (a = 0: the pad is on another axis than the row's).
LUMINAL_HD constexpr row_part pad_part(index_t b, index_t a, index_t e, index_t n) {
  index_t lo = 0, hi = 0;
  if (a == 0) {
    hi = 0 <= b && b < e ? n : 0;
  } else if (a == 1) {  // the common case (the row's own axis), with no division
    lo = -b;
    hi = e - b;
  } else if (a > 0) {  // from the first j with b + a j >= 0 to the last with b + a j <= e - 1
    lo = b >= 0 ? 0 : (a - 1 - b) / a;
    hi = e - 1 - b < 0 ? 0 : (e - 1 - b) / a + 1;
  } else {  // from the first j with b + a j <= e - 1 to the last with b + a j >= 0
    lo = b - e < 0 ? 0 : (b - e) / -a + 1;
    hi = b < 0 ? 0 : b / -a + 1;
  }
  return intersect(row_part{lo, hi}, row_part{0, n});
}

/// Pads for the child of a node read with `pads`, whose pads before that child's number
/// `skipped` and which reads `count` of them: the child's bits, and one form for each
/// meaning (no pads: checked; every bit set: pads_inside), so equal walks share code.
constexpr std::uint64_t child_pads(std::uint64_t pads, int skipped, int count) {
  if (pads == pads_checked || pads == pads_inside || count == 0) return count == 0 ? pads_checked : pads;
  const std::uint64_t all = (std::uint64_t(1) << count) - 1, bits = (pads >> skipped) & all;
  return bits == all ? pads_inside : pads_decided | bits;
}

/// Whether node Id leads to node Split through maps computed in the kernel.
template <class P, int Id, int Split, bool Root = false, class N = node_at<typename P::nodes, Id>,
          int Case = Id == Split                                                                  ? 0
                     : child_reads_of(N::kind) != child_reads::same_place || (!Root && N::stored) ? 1
                                                                                                  : 2>
struct leads_to : std::bool_constant<Case == 0> {};
template <class P, int Split, class Children>
struct any_leads_to;
template <class P, int Split, int... C>
struct any_leads_to<P, Split, std::integer_sequence<int, C...>>
    : std::bool_constant<(leads_to<P, C, Split>::value || ...)> {};
template <class P, int Id, int Split, bool Root, class N>
struct leads_to<P, Id, Split, Root, N, 2> : any_leads_to<P, Split, typename N::children> {};

}  // namespace luminal::detail
