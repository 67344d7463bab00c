// Walking the static graph: the topologically ordered, duplicate-free list of node types
// reachable from a set of outputs, and a flat constexpr table of it that the planner and
// the reverse pass read with ordinary loops instead of deep template recursion.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "node.hpp"
#include "op_facts.hpp"

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

/// Whether N is in the list: a fold of comparisons, without position_in's call of
/// first_true, whose argument (a list of as many bools) GCC keeps with its result.
template <class L, class N>
struct contains;
template <class... T, class N>
struct contains<boost::mp11::mp_list<T...>, N> : std::bool_constant<(__is_same(T, N) || ...)> {};

// The topological order is a depth-first walk, children in order, each node after its
// children: the walk a recursive template would do, but driven by an explicit stack, so
// that the compiler's instantiation depth does not grow with the graph's (a transformer's
// training step is thousands of nodes deep). A template's recursion nests one
// instantiation in the next; a fold expression over an overloaded operator,
// `(state >> ... >> tick)`, instead instantiates each step beside the previous one.
//
// Each step's state is the nodes done (Visited: dfs_visited, below) and the stack of
// frames (a node and its children not yet looked at). The fold's operand is the state's nested class
// `handle`, whose member operator>> names the next state: argument-dependent lookup
// reaches a nested class's enclosing class, but not that class's template arguments (the
// whole node list), so looking the operator up costs the same at any size. (A friend
// would be cheaper to write and dear to look up: GCC keeps every hidden friend in its
// namespace's overload list and walks past them all at each lookup of the name.) Each
// output is walked from an empty stack, so the walks of `topo_nodes<loss>` are the first
// steps of `topo_nodes<loss, gradients...>` and are instantiated once.
struct dfs_bottom;
template <class N, class Remaining, class Below>
struct dfs_frame;
struct dfs_tick {};

// The nodes done (dfs_visited): in order, in chunks, and for the test whether a node is
// done, in 64 buckets by its hash, held in a trie of two levels of 8. As one list, each
// step created a copy of it (a list type is created whole) and each test looked at every
// element: quadratic in the graph. A step now creates one bucket, two trie nodes of 8 and
// the last chunk of the order. A walk starts with one list (dfs_small, below) and moves
// to the trie past dfs_small_walk nodes. (Under nvcc, whose nodes are not named by
// hashes, one bucket holds them all.)
template <class... T>
struct dfs_trie;
using dfs_trie_leaf = dfs_trie<boost::mp11::mp_list<>, boost::mp11::mp_list<>, boost::mp11::mp_list<>,
                               boost::mp11::mp_list<>, boost::mp11::mp_list<>, boost::mp11::mp_list<>,
                               boost::mp11::mp_list<>, boost::mp11::mp_list<>>;
using dfs_trie_root = dfs_trie<dfs_trie_leaf, dfs_trie_leaf, dfs_trie_leaf, dfs_trie_leaf, dfs_trie_leaf,
                               dfs_trie_leaf, dfs_trie_leaf, dfs_trie_leaf>;
/// Child I of a trie node.
template <std::size_t I, class Trie>
struct dfs_pick;
#define LUMINAL_DFS_PICK(I, T)                                                               \
  template <class T0, class T1, class T2, class T3, class T4, class T5, class T6, class T7> \
  struct dfs_pick<I, dfs_trie<T0, T1, T2, T3, T4, T5, T6, T7>> {                           \
    using type = T;                                                                          \
  };
LUMINAL_DFS_PICK(0, T0)
LUMINAL_DFS_PICK(1, T1)
LUMINAL_DFS_PICK(2, T2)
LUMINAL_DFS_PICK(3, T3)
LUMINAL_DFS_PICK(4, T4)
LUMINAL_DFS_PICK(5, T5)
LUMINAL_DFS_PICK(6, T6)
LUMINAL_DFS_PICK(7, T7)
#undef LUMINAL_DFS_PICK
/// Trie node Trie with child I replaced by New.
template <bool Here>
struct dfs_slot {
  template <class Old, class New>
  using type = Old;
};
template <>
struct dfs_slot<true> {
  template <class Old, class New>
  using type = New;
};
template <std::size_t I, class Trie, class New, class = std::make_index_sequence<8>>
struct dfs_replace;
template <std::size_t I, class... T, class New, std::size_t... J>
struct dfs_replace<I, dfs_trie<T...>, New, std::index_sequence<J...>> {
  using type = dfs_trie<typename dfs_slot<J == I>::template type<T, New>...>;
};
template <class N>
constexpr std::size_t dfs_bucket_of =
#if LUMINAL_SHORT_NAMES
    std::size_t(naming::hash_of<N> % 64);
#else
    0;
#endif
/// Chunks: a list of full chunks of the order (64 nodes each); Partial: the last, not
/// full; Trie: the buckets.
template <class Chunks, class Partial, class Trie>
struct dfs_visited;
/// The first dfs_small_walk nodes done are one list (dfs_small): for a graph of a hundred
/// nodes a copy of the list costs less than the trie's types, whose upkeep made the unit
/// tests' many small programs a fifth slower to compile.
constexpr std::size_t dfs_small_walk = 128;
template <class List>
struct dfs_small;
using dfs_nothing_visited = dfs_small<boost::mp11::mp_list<>>;
template <class V, class N>
struct visited_contains;
template <class List, class N>
struct visited_contains<dfs_small<List>, N> : contains<List, N> {};
template <class Chunks, class Partial, class Trie, class N>
struct visited_contains<dfs_visited<Chunks, Partial, Trie>, N>
    : contains<typename dfs_pick<dfs_bucket_of<N> % 8, typename dfs_pick<dfs_bucket_of<N> / 8, Trie>::type>::type, N> {};
template <bool Room>
struct dfs_order_push {  // a full chunk: it joins the chunks, N starts the next
  template <class Chunks, class Partial, class N>
  using chunks = boost::mp11::mp_push_back<Chunks, Partial>;
  template <class Chunks, class Partial, class N>
  using partial = boost::mp11::mp_list<N>;
};
template <>
struct dfs_order_push<true> {
  template <class Chunks, class Partial, class N>
  using chunks = Chunks;
  template <class Chunks, class Partial, class N>
  using partial = boost::mp11::mp_push_back<Partial, N>;
};
template <class V, class N>
struct visited_add;
/// Trie with N added to its bucket.
template <class Trie, class N>
struct dfs_trie_insert {
  static constexpr std::size_t upper = dfs_bucket_of<N> / 8, lower = dfs_bucket_of<N> % 8;
  using node = typename dfs_pick<upper, Trie>::type;
  using bucket = boost::mp11::mp_push_back<typename dfs_pick<lower, node>::type, N>;
  using type = typename dfs_replace<upper, Trie, typename dfs_replace<lower, node, bucket>::type>::type;
};
template <class Chunks, class Partial, class Trie, class N>
struct visited_add<dfs_visited<Chunks, Partial, Trie>, N> {
  using push = dfs_order_push<(boost::mp11::mp_size<Partial>::value < 64)>;
  using type = dfs_visited<typename push::template chunks<Chunks, Partial, N>,
                           typename push::template partial<Chunks, Partial, N>,
                           typename dfs_trie_insert<Trie, N>::type>;
};
/// The trie of a list's nodes: each inserted in turn, by a fold over the list (at most
/// dfs_small_walk operands: Clang limits a fold to 256).
template <class Trie>
struct dfs_trie_builder {
  using type = Trie;
  template <class N>
  dfs_trie_builder<typename dfs_trie_insert<Trie, N>::type> operator<<(std::type_identity<N>) const;
};
template <class List>
struct dfs_trie_of;
template <class... T>
struct dfs_trie_of<boost::mp11::mp_list<T...>> {
  using type = typename decltype((dfs_trie_builder<dfs_trie_root>{} << ... << std::type_identity<T>{}))::type;
};
template <bool Small>
struct dfs_small_add {  // the list is long enough: it becomes the first chunk of a trie's walk
  template <class List>
  using type = dfs_visited<boost::mp11::mp_list<List>, boost::mp11::mp_list<>, typename dfs_trie_of<List>::type>;
};
template <>
struct dfs_small_add<true> {
  template <class List>
  using type = dfs_small<List>;
};
template <class List, class N>
struct visited_add<dfs_small<List>, N> {
  using type = typename dfs_small_add<(boost::mp11::mp_size<List>::value < dfs_small_walk)>::template type<
      boost::mp11::mp_push_back<List, N>>;
};

/// The nodes done, in order.
template <class V>
struct visited_list;
template <class List>
struct visited_list<dfs_small<List>> {
  using type = List;
};
template <class... Chunk, class Partial, class Trie>
struct visited_list<dfs_visited<boost::mp11::mp_list<Chunk...>, Partial, Trie>> {
  using type = boost::mp11::mp_append<boost::mp11::mp_list<>, Chunk..., Partial>;
};

/// A state's handle: `handle >> dfs_tick{}` is the state after one step, the top frame's
/// next child pushed (unless it is done) or the top frame finished.
template <class Visited, class Stack>
struct dfs_state;
template <class Visited>
struct dfs_state<Visited, dfs_bottom> {
  struct handle {
    using visited = Visited;
    handle operator>>(dfs_tick) const;
  };
};
template <class Visited, class N, class Below>
struct dfs_state<Visited, dfs_frame<N, boost::mp11::mp_list<>, Below>> {
  struct handle {
    typename dfs_state<typename visited_add<Visited, N>::type, Below>::handle operator>>(dfs_tick) const;
  };
};
template <bool Done>
struct dfs_push {
  template <class C, class Rest>
  using type = dfs_frame<C, typename C::children, Rest>;
};
template <>
struct dfs_push<true> {
  template <class C, class Rest>
  using type = Rest;
};
template <class Visited, class N, class C, class... Rest, class Below>
struct dfs_state<Visited, dfs_frame<N, boost::mp11::mp_list<C, Rest...>, Below>> {
  struct handle {
    typename dfs_state<Visited, typename dfs_push<visited_contains<Visited, C>::value>::template type<
                                    C, dfs_frame<N, boost::mp11::mp_list<Rest...>, Below>>>::handle
    operator>>(dfs_tick) const;
  };
};

/// Handle H after Steps steps (a power of two): a fold of at most 128 steps, or of at most
/// 128 chunks of steps, each again such a fold. Clang limits a fold to 256 operands
/// (-fbracket-depth), and GCC's walks of an expression recurse as deep as it is.
template <std::size_t Steps>
constexpr std::size_t dfs_operands = Steps <= 128 ? Steps : Steps <= 128 * 128 ? Steps / 128 : 128;
template <class H, class = void>
struct dfs_done : std::false_type {};
template <class H>
struct dfs_done<H, std::void_t<typename H::visited>> : std::true_type {};
template <class H, std::size_t Steps, bool Done = dfs_done<H>::value, bool Ticks = (Steps <= 128),
          class = std::make_index_sequence<Done ? 0 : dfs_operands<Steps>>>
struct dfs_advance {
  using type = H;  // the walk is done: the steps left change nothing
};
template <std::size_t Steps>
struct dfs_chunk {};
template <class O>
struct dfs_output {};
template <bool Done, class H, class O>
struct dfs_walk;
// Chunks and outputs are applied to a box around the handle, whose member templates are
// then the only candidates. A function template deduced from a handle (a namespace-scope
// operator>> taking it, std::declval<H>) costs a copy of the handle's list of nodes done,
// thousands of them, at every step: the folds start from prvalues, H{}, for that reason.
template <class H>
struct dfs_box {
  using handle = H;
  template <std::size_t Steps>
  dfs_box<typename dfs_advance<H, Steps>::type> operator>>(dfs_chunk<Steps>) const;
  template <class O, class Done = H>  // Done: H, named so that only a finished walk is asked for its nodes
  dfs_box<typename dfs_walk<visited_contains<typename Done::visited, O>::value, Done, O>::type> operator>>(dfs_output<O>) const;
};
template <class H, std::size_t Steps, std::size_t... I>
struct dfs_advance<H, Steps, false, true, std::index_sequence<I...>> {
  using type = decltype((H{} >> ... >> (void(I), dfs_tick{})));
};
template <class H, std::size_t Steps, std::size_t... I>
struct dfs_advance<H, Steps, false, false, std::index_sequence<I...>> {
  using type = typename decltype((dfs_box<H>{} >> ... >> (void(I), dfs_chunk<Steps / dfs_operands<Steps>>{})))::handle;
};
/// Steps until the stack is empty, twice as many each round.
template <class H, std::size_t Steps, bool Done = dfs_done<H>::value>
struct dfs_run {
  using type = H;
};
template <class H, std::size_t Steps>
struct dfs_run<H, Steps, false> {
  using type = typename dfs_run<typename dfs_advance<H, Steps>::type, 2 * Steps>::type;
};

/// The walk from output O, after the nodes done in H: a fold over the outputs.
template <bool Done, class H, class O>
struct dfs_walk {
  using type = H;
};
template <class H, class O>
struct dfs_walk<false, H, O> {
  using type = typename dfs_run<
      typename dfs_state<typename H::visited, dfs_frame<O, typename O::children, dfs_bottom>>::handle, 16>::type;
};
template <class... Outputs>
struct dfs_nodes {
  using start = dfs_box<typename dfs_state<dfs_nothing_visited, dfs_bottom>::handle>;
  using walked = decltype((start{} >> ... >> dfs_output<Outputs>{}));  // start if no outputs
  using type = typename visited_list<typename walked::handle::visited>::type;
};
}  // namespace detail

/// All nodes reachable from Outputs, children before parents, each once.
template <class... Outputs>
using topo_nodes = typename detail::dfs_nodes<Outputs...>::type;

namespace detail {
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
