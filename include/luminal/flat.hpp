// The graph a kernel evaluates: a flat, numbered copy of a program's node types.
//
// Each node is
//     flat::node<kind, op, T, stored, static extents, child ids...>
// with children as numbers, so a kernel's type stays small however deep the graph: nvcc
// writes the full type of every kernel's template arguments into the host code it
// generates, and a node type names its children's types again (a 2-layer MLP's gradient
// was gigabytes of text). Every backend's kernels are templates over this one form.
//
//     using P = flat::program_of<Layout>;   // Layout: a program_layout (eval.hpp)
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <utility>

#include "graph.hpp"
#include "ops/reshape.hpp"

namespace luminal::flat {

/// The op of nodes that have none to evaluate (leaves, extents, gathers, exchanges).
struct no_op {};

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

template <std::size_t MaxRank, class... Nodes>
struct program {
  static constexpr std::size_t max_rank = MaxRank;
  using nodes = boost::mp11::mp_list<Nodes...>;
};

namespace detail {
template <class S, std::size_t... K>
auto static_extents(std::index_sequence<K...>)
    -> std::integer_sequence<index_t, (S::dims[K].is_static() ? index_t(S::dims[K].offset) : index_t(-1))...>;

template <class L, class... C>
auto child_ids(boost::mp11::mp_list<C...>) -> std::integer_sequence<int, L::template id<C>...>;

template <class N>
auto op_of() {
  if constexpr (N::kind == op_kind::constant) return std::type_identity<N>{};  // Const / Literal: its value
  else if constexpr (N::kind == op_kind::input || N::kind == op_kind::extent || N::kind == op_kind::gather ||
                     N::kind == op_kind::exchange)
    return std::type_identity<no_op>{};
  else if constexpr (N::kind == op_kind::view && requires { N::op::is_reshape; })
    return std::type_identity<
        typename N::op::template coordinate_map<typename boost::mp11::mp_first<typename N::children>::shape>>{};
  else return std::type_identity<typename N::op>{};
}

template <class L, std::size_t I, class N = boost::mp11::mp_at_c<typename L::nodes, I>>
using node_of = node<N::kind, typename decltype(op_of<N>())::type, typename N::value_type, L::plan.stored[I],
                     decltype(static_extents<typename N::shape>(std::make_index_sequence<N::shape::rank>{})),
                     decltype(child_ids<L>(typename N::children{}))>;

template <class L, std::size_t... I>
auto program_of(std::index_sequence<I...>) -> program<L::max_rank, node_of<L, I>...>;

template <int First, int... Rest>
constexpr int first(std::integer_sequence<int, First, Rest...>) { return First; }
template <int First, int Second, int... Rest>
constexpr int second(std::integer_sequence<int, First, Second, Rest...>) { return Second; }
}  // namespace detail

/// The flat copy of a program_layout's graph.
template <class Layout>
using program_of = decltype(detail::program_of<Layout>(std::make_index_sequence<Layout::node_count>{}));

}  // namespace luminal::flat
