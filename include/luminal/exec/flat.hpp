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
// Under GCC and Clang, graph_of names the flat graph by a 128-bit hash of its type:
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

template <class L, std::size_t... I>
auto graph_of(std::index_sequence<I...>) -> graph<L::max_rank, flattened_node<L, I>...>;

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
using graph_type_of = decltype(detail::graph_of<Layout>(std::make_index_sequence<Layout::node_count>{}));

#if defined(__CUDACC__) || !(defined(__GNUC__) || defined(__clang__))
template <class Layout>
using graph_of = graph_type_of<Layout>;
#else
// In an unnamed namespace: a key and the kernels named by it are each translation unit's
// own. Two types that print alike but are not the same (types of one name in the unnamed
// namespaces of two files) then cannot share kernels through one key; within a file, two
// graphs with one key would be a compile error (keyed_type defined twice), not a silent
// mix-up.
namespace {
namespace key_detail {
/// A hash of the compiler's spelling of T: FNV-1a's steps from `basis` with multiplier
/// `prime` (two such hashes make the key).
template <class T>
constexpr std::uint64_t type_hash(std::uint64_t basis, std::uint64_t prime) {
  const std::string_view name = __PRETTY_FUNCTION__;
  std::uint64_t h = basis;
  // In blocks: one constexpr loop may run at most 262144 times (-fconstexpr-loop-limit),
  // and a large graph's spelling is longer.
  constexpr std::size_t block = 1 << 16;
  for (std::size_t start = 0; start < name.size(); start += block)
    for (std::size_t i = start; i < name.size() && i < start + block; ++i)
      h = (h ^ std::uint64_t(static_cast<unsigned char>(name[i]))) * prime;
  return h;
}
// A graph's key (H1, H2) names its type through a friend function that only the key's
// binding defines: key_tag declares it, key_binding<P, ...> gives its body, returning P.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning, and warns of the unknown group
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
template <std::uint64_t H1, std::uint64_t H2>
struct key_tag {
  friend constexpr auto keyed_type(key_tag);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
template <class P, std::uint64_t H1, std::uint64_t H2>
struct key_binding {
  friend constexpr auto keyed_type(key_tag<H1, H2>) { return std::type_identity<P>{}; }
};
}  // namespace key_detail

/// Flat graph P by its key: all of P's members, a short name.
template <std::uint64_t H1, std::uint64_t H2>
struct keyed : decltype(keyed_type(key_detail::key_tag<H1, H2>{}))::type {};

namespace key_detail {
template <class P, std::uint64_t H1 = type_hash<P>(0xcbf29ce484222325ull, 0x100000001b3ull),
          std::uint64_t H2 = type_hash<P>(0x6a09e667f3bcc909ull, 0x9e3779b97f4a7c15ull),
          std::size_t = sizeof(key_binding<P, H1, H2>)>
auto keyed_graph() -> keyed<H1, H2>;
}  // namespace key_detail
}  // namespace

template <class Layout>
using graph_of = decltype(key_detail::keyed_graph<graph_type_of<Layout>>());
#endif

}  // namespace luminal::flat
