// The graph a kernel evaluates: a flat, numbered copy of a program's node types.
//
// Each node is
//     flat::node<kind, op, T, stored, static extents, child ids...>
// with children as numbers, so a kernel's type stays small however deep the graph: nvcc
// writes the full type of every kernel's template arguments into the host code it
// generates, and a node type names its children's types again, a text that grows with
// the graph's depth. Every backend's kernels are templates over this one form.
//
//     using P = flat::graph_of<Layout>;   // Layout: a program_layout (eval.hpp)
//
// Under GCC and Clang, graph_of names the flat graph by two hashes of its nodes:
// flat::keyed<H1, H2> derives from it, so kernels see the same members, but every kernel
// and evaluator function is mangled with two numbers instead of the whole graph. The
// compiler's mangler looks each part of a name up among the parts before it, so a name
// that spells a graph of n nodes costs n squared, and a training step has thousands of
// such names. (nvcc keeps the plain type: its front end and the host compiler would hash
// different spellings.)
#pragma once
#include <bit>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../core/graph.hpp"
#include "../ops/reshape.hpp"

namespace luminal::flat {

/// The op of nodes that have none for a kernel to call (leaves, extents, gathers, opaque
/// ops: an opaque op runs from its node in the program's own graph).
struct no_op {};

/// A constant (Const or Literal) as the bits of its value as a double. nvcc writes
/// floating-point template arguments into the host code it generates with 6 significant
/// digits: a kernel type holding Const<float, 1.44269502f> would be registered as
/// Const<float, 1.4427f>, and its launch would fail with "invalid device function".
template <std::uint64_t Bits>
struct constant {
  static constexpr double value = std::bit_cast<double>(Bits);
};

/// One node: what evaluating it needs, with children as node ids. Static holds each
/// extent, -1 where it is known only at run time.
template <op_kind Kind, class Op, class T, bool Stored, class Static, class Children>
struct node {
  static constexpr op_kind kind = Kind;
  using op = Op;
  using value_type = T;
  static constexpr bool stored = Stored;
  using static_extents = Static;  // std::integer_sequence<index_t, ...>
  using children = Children;      // std::integer_sequence<int, ...>
  static constexpr std::size_t rank = Static::size();
};

/// A flat graph: the nodes of one program, numbered as in its table (graph.hpp).
template <std::size_t MaxRank, class... Nodes>
struct graph {
  static constexpr std::size_t max_rank = MaxRank;
  using nodes = boost::mp11::mp_list<Nodes...>;
};

namespace detail {
template <class S, std::size_t... K>
auto static_extents(std::index_sequence<K...>)
    -> std::integer_sequence<index_t, (S::dims[K].is_static() ? index_t(S::dims[K].offset) : index_t(-1))...>;

template <class L, class... C>
auto child_ids(boost::mp11::mp_list<C...>) -> std::integer_sequence<int, L::template id<C>::value...>;

template <class N>
auto op_of() {
  // Const / Literal: its value, as a double's bits (every element type is exact in a double).
  if constexpr (N::kind == op_kind::constant)
    return std::type_identity<constant<std::bit_cast<std::uint64_t>(double(N::value))>>{};
  else if constexpr (!computed_node<N> || kernel_form_of(N::kind) == kernel_form::own ||
                     child_reads_of(N::kind) == child_reads::by_index)
    return std::type_identity<no_op>{};
  else if constexpr (op_traits<typename N::op>::reshapes)
    return std::type_identity<
        typename N::op::template coordinate_map<typename boost::mp11::mp_first<typename N::children>::shape>>{};
  else return std::type_identity<typename N::op>{};
}

/// Node I of program_layout L in flat form.
template <class L, std::size_t I, class N = node_at<typename L::nodes, I>>
using flattened_node =
    node<N::kind, typename decltype(op_of<N>())::type, typename N::value_type, L::plan.stored[I],
         decltype(static_extents<typename N::shape>(std::make_index_sequence<N::shape::rank>{})),
         decltype(child_ids<L>(typename N::children{}))>;

/// The flat graph of layout L, a class so that it is worked out once per layout: an alias
/// of `decltype(f(...))` is substituted again at each use, and GCC then deduces f's
/// parameter pack (one element per node) again each time.
template <class L, class Indices = std::make_index_sequence<L::node_count>>
struct flat_graph;
template <class L, std::size_t... I>
struct flat_graph<L, std::index_sequence<I...>> {
  using type = graph<L::max_rank, flattened_node<L, I>...>;
};

/// The first and the second of a flat node's child ids.
template <class Children>
struct first_child;
template <int First, int... Rest>
struct first_child<std::integer_sequence<int, First, Rest...>> : std::integral_constant<int, First> {};
template <class Children>
struct second_child;
template <int First, int Second, int... Rest>
struct second_child<std::integer_sequence<int, First, Second, Rest...>> : std::integral_constant<int, Second> {};
}  // namespace detail

/// The flat copy of a program_layout's graph, spelled out.
template <class Layout>
using graph_type_of = typename detail::flat_graph<Layout>::type;

#if !LUMINAL_SHORT_NAMES
template <class Layout>
using graph_of = graph_type_of<Layout>;
#else
// A key and the kernels named by it are each translation unit's own, as node names are
// (core/node_name.hpp, whose hash and binding these are).
namespace {
/// Flat graph P by its key: all of P's members, a short name.
template <std::uint64_t H1, std::uint64_t H2>
struct keyed : naming::named_type_t<H1, H2> {};

namespace key_detail {
/// The hash of an integer sequence's values (a node's static extents, its child ids).
template <class Seq>
struct sequence_hash;
template <class I, I... V>
struct sequence_hash<std::integer_sequence<I, V...>> {
  static constexpr std::uint64_t values[] = {std::uint64_t(V)..., 0};
  static constexpr std::uint64_t value = naming::fold_hashes(values, sizeof...(V), sizeof...(V), 0);
};
/// A flat node's hash: each of its parameters, the op and element type by their
/// spellings (a few distinct types, each hashed once).
template <class N>
struct node_hash {
  static constexpr std::uint64_t parts[] = {std::uint64_t(N::kind), naming::hash_of<typename N::op>,
                                            naming::hash_of<typename N::value_type>, std::uint64_t(N::stored),
                                            sequence_hash<typename N::static_extents>::value,
                                            sequence_hash<typename N::children>::value};
  static constexpr std::uint64_t value = naming::fold_hashes(parts, 6, 0, 0);
};
/// A flat graph's two hashes, from its nodes': hashing its spelling instead is a constexpr
/// loop over every character of every node, which GCC evaluates slowly.
template <class P>
struct graph_hashes;
template <std::size_t MaxRank, class... N>
struct graph_hashes<graph<MaxRank, N...>> {
  static constexpr std::uint64_t nodes[] = {node_hash<N>::value..., 0};
  static constexpr std::uint64_t first = naming::fold_hashes(nodes, sizeof...(N), naming::mix(MaxRank), 0);
  static constexpr std::uint64_t second =
      naming::fold_hashes(nodes, sizeof...(N), naming::mix(MaxRank + 0x6a09e667f3bcc909ull), 0x9e3779b97f4a7c15ull);
};
template <class P, std::uint64_t H1 = graph_hashes<P>::first, std::uint64_t H2 = graph_hashes<P>::second,
          std::size_t = sizeof(naming::name_binding<P, H1, H2>)>
auto keyed_graph() -> keyed<H1, H2>;
/// A class, so that the key is worked out once per layout (see flat_graph).
template <class Layout>
struct keyed_of {
  using type = decltype(keyed_graph<graph_type_of<Layout>>());
};
}  // namespace key_detail
}  // namespace

template <class Layout>
using graph_of = typename key_detail::keyed_of<Layout>::type;
#endif

}  // namespace luminal::flat
