// Compile-time facts about the nodes of a flat program (flat.hpp) that the evaluator and
// the loop nests branch on: which subtrees evaluate at a flat index, which have one value
// everywhere, which read through pads.
//
//     if constexpr (detail::evaluates_flat<P, Id>::value) ...   // P: flat::program_of<Layout>
//
// Each fact is a class template per node, recursing into its children's. A constexpr
// function per node, with a lambda to unpack the children, was four functions and a class
// per node and kernel; GCC keeps them all to the end of the translation unit, and they
// were a large share of a training program's compiler memory.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <type_traits>
#include <utility>

#include "flat.hpp"

namespace luminal::detail {

/// Node Id of flat program P.
template <class P, int Id>
using flat_node_t = node_at<typename P::nodes, Id>;

/// The node of P that is node N's first child (views, gathers; flat::detail::first_child
/// gives its id).
template <class P, class N>
using first_child_node = flat_node_t<P, flat::detail::first_child<typename N::children>::value>;

/// Whether every extent is statically 1 (true for rank 0).
template <class Extents>
struct all_extents_one;
template <index_t... E>
struct all_extents_one<std::integer_sequence<index_t, E...>> : std::bool_constant<((E == 1) && ...)> {};

/// Whether view node Id shows the one element of its child everywhere: its child has one
/// element whatever the extents bound (rank 0, or all extents 1), and it pads nothing.
template <class P, int Id, class N = flat_node_t<P, Id>>
struct broadcasts_one_element
    : std::bool_constant<all_extents_one<typename first_child_node<P, N>::static_extents>::value &&
                         !requires { N::op::pad_value; }> {};

/// Whether node Id evaluates at a flat index: a leaf, a stored value, a constant, or maps
/// and reshapes of such. With Root, its own buffer is the one being written, so its
/// children decide.
template <class P, int Id, bool Root = false, class N = flat_node_t<P, Id>,
          int Case = N::kind == op_kind::input || (!Root && N::stored) || N::kind == op_kind::constant ||
                             N::kind == op_kind::extent
                         ? 0
                     : N::kind == op_kind::map  ? 1
                     : N::kind == op_kind::view ? 2
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
                         std::conditional_t<requires { N::op::is_reshape; },
                                            evaluates_flat<P, flat::detail::first_child<typename N::children>::value>,
                                            std::false_type>> {};

/// Whether node Id has one value everywhere, read without coordinates: a constant, an
/// extent, a scalar, a broadcast of one element, or a map computed here of such values.
template <class P, int Id, class N = flat_node_t<P, Id>,
          int Case = N::rank == 0 || N::kind == op_kind::constant || N::kind == op_kind::extent ? 0
                     : N::kind == op_kind::view                                                 ? 1
                     : N::kind == op_kind::map && !N::stored                                    ? 2
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
template <class P, int Id, bool Root = false, class N = flat_node_t<P, Id>,
          int Case = N::kind == op_kind::input || (!Root && N::stored)         ? 0
                     : N::kind == op_kind::map || N::kind == op_kind::gather ? 1
                     : N::kind == op_kind::view                               ? 2
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
    : std::conditional_t<requires { N::op::pad_value; }, std::true_type,
                         reads_padding<P, flat::detail::first_child<typename N::children>::value>> {};

/// Whether, along a row of the loop nest (one coordinate of node Id advancing by one),
/// each pad's test is of a coordinate that moves monotonically: then the elements inside
/// every pad are one interval of the row. Views map coordinates affinely, except a
/// reshape (its unravel wraps around) and a gather's table (the row it reads comes from a
/// value), so no pad may lie below either.
template <class P, int Id, bool Root = false, class N = flat_node_t<P, Id>,
          int Case = !reads_padding<P, Id, Root>::value ? 0
                     : N::kind == op_kind::map          ? 1
                     : N::kind == op_kind::view         ? 2
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
    : std::conditional_t<requires { N::op::is_reshape; }, std::false_type,
                         pads_monotone<P, flat::detail::first_child<typename N::children>::value>> {};

/// Whether node Id leads to node Split through maps computed in the kernel.
template <class P, int Id, int Split, bool Root = false, class N = flat_node_t<P, Id>,
          int Case = Id == Split                                          ? 0
                     : N::kind != op_kind::map || (!Root && N::stored)   ? 1
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
