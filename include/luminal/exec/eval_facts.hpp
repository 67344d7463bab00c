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
#include <boost/mp11/algorithm.hpp>
#include <type_traits>
#include <utility>

#include "flat.hpp"

namespace luminal::detail {

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

/// Whether, along a row of the loop nest (one coordinate of node Id advancing by one),
/// each pad's test is of a coordinate that moves monotonically: then the elements inside
/// every pad are one interval of the row. Views map coordinates affinely, except a
/// reshape (its unravel wraps around) and a gather's table (the row it reads comes from a
/// value), so no pad may lie below either.
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
    : std::conditional_t<op_traits<typename N::op>::reshapes, std::false_type,
                         pads_monotone<P, flat::detail::first_child<typename N::children>::value>> {};

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
