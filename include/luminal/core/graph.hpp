// Walking the static graph: the topologically ordered, duplicate-free list of node types
// reachable from a set of outputs (topo_nodes.hpp), and a flat constexpr table of it that
// the planner and the reverse pass read with ordinary loops instead of deep template
// recursion.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "node.hpp"
#include "op_facts.hpp"
#include "topo_nodes.hpp"

namespace luminal {

namespace detail {
// Membership and position in a node list are folds over the compiler's type-identity
// builtin: one instantiation per query. mp11's mp_contains / mp_find instantiate
// std::is_same once per list element and query, which the compiler keeps: the graph's
// size times the number of queries.
//
// Facts about a graph are types (integral constants, integer sequences), never variables
// or functions whose template arguments name the node list: GCC mangles the name of every
// variable and function a program instantiates, even one used only at compile time, and a
// name that spells a list of n nodes costs about n squared to mangle (its mangler looks up
// each part among the parts before it). position_in<L, N> is a class whose value is
// std::integral_constant<int, i>::value, a short name.

/// The index of the first true in `same`, or its size if none is.
consteval int first_true(std::initializer_list<bool> same) {
  int i = 0;
  for (bool b : same) {
    if (b) return i;
    ++i;
  }
  return i;
}

template <class L, class N>
struct position_in;
template <class... T, class N>
struct position_in<boost::mp11::mp_list<T...>, N> : std::integral_constant<int, first_true({__is_same(T, N)...})> {};

// mp_filter asks its predicate through mp_invoke_q, several class templates per element;
// a node list's filter picks each element's one-or-none list by an alias instead.
template <bool Keep>
struct kept_if {
  template <class T>
  using list = boost::mp11::mp_list<>;
};
template <>
struct kept_if<true> {
  template <class T>
  using list = boost::mp11::mp_list<T>;
};
template <template <class> class P, class L>
struct filtered;
template <template <class> class P, class... T>
struct filtered<P, boost::mp11::mp_list<T...>> {
  using type = boost::mp11::mp_append<boost::mp11::mp_list<>, typename kept_if<bool(P<T>::value)>::template list<T>...>;
};
}  // namespace detail

/// The nodes N of list L for which P<N>::value holds, in L's order: mp_filter for node lists.
template <template <class> class P, class L>
using filter_nodes = typename detail::filtered<P, L>::type;

namespace detail {
// node_index looks a node up in a list it was given whole (a program's nodes), so the
// list is indexed once: index_of<L> derives from one index_entry per node, and a lookup
// is overload resolution among their `at` functions, which GCC does in scratch memory it
// frees at once. position_in's fold allocates a comparison per element and query and
// keeps it to the end of the translation unit.
// The same table answers the converse, the node at a position (node_at), by overload
// resolution too: mp_at_c on GCC, which lacks __type_pack_element, instantiates a few
// class templates per list and position, and a program asks for thousands of them.
// Each answer is kept in a class (node_at_c, node_index_c): an alias of the call alone is
// substituted again at every use, and each use is an overload resolution among all of a
// list's entries.
template <class N, int I>
struct index_entry {
  static std::integral_constant<int, I> at(std::type_identity<N>*);
  static std::type_identity<N> node(std::integral_constant<int, I>*);
};
template <class L, class Indices>
struct index_table;
template <class... T, int... I>
struct index_table<boost::mp11::mp_list<T...>, std::integer_sequence<int, I...>> : index_entry<T, I>... {
  using index_entry<T, I>::at...;
  using index_entry<T, I>::node...;
  static std::integral_constant<int, int(sizeof...(T))> at(...);
};
template <class L>
using index_of = index_table<L, std::make_integer_sequence<int, int(boost::mp11::mp_size<L>::value)>>;
}  // namespace detail

/// Position of node type N in the list L of distinct nodes, or L's size if N is not in it,
/// as `node_index<L, N>::value` (a type, not a variable template: see position_in).
namespace detail {
template <class L, class N>
struct node_index_c {
  using type = decltype(index_of<L>::at(static_cast<std::type_identity<N>*>(nullptr)));
};
}  // namespace detail
template <class L, class N>
using node_index = typename detail::node_index_c<L, N>::type;

/// Node type at position I of the list L of distinct nodes: mp_at_c for a program's nodes.
namespace detail {
template <class L, std::size_t I>
struct node_at_c {
  using type = typename decltype(index_of<L>::node(static_cast<std::integral_constant<int, int(I)>*>(nullptr)))::type;
};
}  // namespace detail
template <class L, std::size_t I>
using node_at = typename detail::node_at_c<L, I>::type;

/// One row of the flat graph table.
struct node_info {
  op_kind kind{};
  int child_count = 0;
  std::array<int, 5> children{-1, -1, -1, -1, -1};  // at most 5: attention over a cache has q, k and v twice
  int cost = 1;               // scalar work to recompute this node inline, before fusion
  int rank = 0;
  int element_bytes = 0;      // sizeof its element type
  bool is_last_two_transpose = false;  // a Permute that swaps only the last two axes
  bool is_batch_expand = false;        // an Expand that leaves the last two axes alone
  int expansion = 1;                   // an Expand: how many times it reads each element
  bool is_reshape = false;             // a view that keeps the flat (row-major) order
  int summed_axis = -1;                // a sum over one axis: that axis
};

namespace detail {
/// What the table and a node's label (node_labels.hpp) need of a node, without its
/// children's types: the helpers that read it are instantiated per distinct signature,
/// and their names stay short (see position_in).
template <op_kind Kind, class Op, class T, class Shape, class ChildShape>
struct node_signature {
  static constexpr op_kind kind = Kind;
  using op = Op;
  using value_type = T;
  using shape = Shape;
  using child_shape = ChildShape;
  static constexpr int element_bytes = int(sizeof(T));
};
template <class N>
struct op_or_void {
  using type = void;
};
template <computed_node N>
struct op_or_void<N> {
  using type = typename N::op;
};
template <class Children>
struct first_shape {
  using type = void;
};
template <class First, class... Rest>
struct first_shape<boost::mp11::mp_list<First, Rest...>> {
  using type = typename First::shape;
};
template <class N>
using signature_of = node_signature<N::kind, typename op_or_void<N>::type, typename N::value_type, typename N::shape,
                                    typename first_shape<typename N::children>::type>;
template <class L, class Children>
struct child_ids;
template <class L, class... C>
struct child_ids<L, boost::mp11::mp_list<C...>> {
  using type = std::integer_sequence<int, node_index<L, C>::value...>;
};

/// What the table records of a view, read off its op's traits and shapes.
template <class S>
constexpr bool last_two_transpose() {
  if constexpr (op_traits<typename S::op>::permutes) {
    constexpr auto order = S::op::order;
    constexpr std::size_t R = order.size();
    if (R < 2) return false;
    for (std::size_t k = 0; k + 2 < R; ++k)
      if (order[k] != int(k)) return false;
    return order[R - 2] == int(R - 1) && order[R - 1] == int(R - 2);
  }
  return false;
}
template <class S>
constexpr bool batch_expand() {
  if constexpr (op_traits<typename S::op>::expands) {
    using In = typename S::child_shape;
    using Out = typename S::shape;
    if constexpr (In::rank >= 2) {
      return In::dims[In::rank - 1] == Out::dims[Out::rank - 1] && In::dims[In::rank - 2] == Out::dims[Out::rank - 2];
    }
  }
  return false;
}
/// How many output elements of view S show each element of its child: the product of the
/// extents an expand stretches from 1 (a symbolic one counts as 16), else 1.
template <class S>
constexpr int expansion() {
  if constexpr (op_traits<typename S::op>::expands) {
    using In = typename S::child_shape;
    using Out = typename S::shape;
    long long times = 1;
    for (std::size_t k = 0; k < In::rank; ++k) {
      const Dim& out = Out::dims[k + (Out::rank - In::rank)];
      if (In::dims[k] == Dim{1} && !(out == Dim{1})) times *= out.is_static() ? out.offset : 16;
    }
    for (std::size_t k = 0; k < Out::rank - In::rank; ++k)
      times *= Out::dims[k].is_static() ? Out::dims[k].offset : 16;
    return times > (1 << 20) ? (1 << 20) : int(times);
  } else {
    return 1;
  }
}
/// A view costs what a load's address costs: the loop nest composes a chain of views over
/// a stored buffer into one strided layout (loop_kernels.hpp), so a view adds a stride, a
/// pad a bounds check, and no division per axis. col2im, a sum of shifted views of one
/// product, is then cheap enough to evaluate inline where several views read it (plan.hpp's
/// fan-out rule), and runs as one loop.
template <class S, int... Children>
constexpr node_info make_info(std::integer_sequence<int, Children...>) {
  using traits = op_traits<typename S::op>;
  node_info info;
  info.kind = S::kind;
  info.cost = traits::cost;
  info.rank = int(S::shape::rank);
  info.element_bytes = S::element_bytes;
  info.is_last_two_transpose = last_two_transpose<S>();
  info.is_batch_expand = batch_expand<S>();
  info.expansion = expansion<S>();
  info.is_reshape = traits::reshapes;
  info.summed_axis = traits::summed_axis;
  static_assert(sizeof...(Children) <= std::tuple_size_v<decltype(info.children)>,
                "luminal: a node has more children than node_info::children holds");
  ((info.children[info.child_count++] = Children), ...);
  return info;
}
template <class L, class... N>
constexpr auto make_table(boost::mp11::mp_list<N...>) {
  return std::array<node_info, sizeof...(N)>{
      make_info<signature_of<N>>(typename child_ids<L, typename N::children>::type{})...};
}
/// Whether a node of L is an opaque op that sums over ranks (an exchange, ops/exchange.hpp):
/// a program holding one needs a communicator.
template <class L>
struct any_needs_communicator;
template <class... N>
struct any_needs_communicator<boost::mp11::mp_list<N...>>
    : std::bool_constant<(op_traits<typename op_or_void<N>::type>::needs_communicator || ...)> {};
template <class L>
inline constexpr bool needs_communicator = any_needs_communicator<L>::value;
/// Whether a node of L is an opaque op that reports indices out of range in the program's
/// error flag (a gather from a quantized table): run() then reads the flag back.
template <class L>
struct any_reports_bad_indices;
template <class... N>
struct any_reports_bad_indices<boost::mp11::mp_list<N...>>
    : std::bool_constant<(op_traits<typename op_or_void<N>::type>::reports_bad_indices || ...)> {};

/// Whether a node table holds a node of this kind.
template <std::size_t N>
constexpr bool holds_kind(const std::array<node_info, N>& table, op_kind kind) {
  for (const node_info& info : table)
    if (info.kind == kind) return true;
  return false;
}
}  // namespace detail

/// The graph of nodes L as a constexpr array of node_info.
template <class L>
inline constexpr auto graph_table = detail::make_table<L>(L{});

}  // namespace luminal
