// The topological order of a graph's node types: topo_nodes<Outputs...>, every node
// reachable from the outputs, children before parents, each once (core/graph.hpp builds
// its tables over it).
//
//     using nodes = topo_nodes<decltype(loss), decltype(dw)>;   // boost::mp11::mp_list<...>
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "node.hpp"

namespace luminal {

namespace detail {
/// Whether N is in the list: a fold of comparisons, without position_in's (graph.hpp)
/// call of first_true, whose argument (a list of as many bools) GCC keeps with its result.
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
// frames (a node and its children not yet looked at). The fold's operand is the state's
// nested class `handle`, whose member operator>> names the next state: argument-dependent
// lookup reaches a nested class's enclosing class, but not that class's template
// arguments (the nodes done), so looking the operator up costs the same at any size. (A friend
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
/// nodes a copy of the list costs less than the trie's upkeep, about ten small types per
/// node done, which programs of that size (most unit tests') would pay at every step.
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

}  // namespace luminal
