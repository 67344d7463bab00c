// The kernel bodies the CUDA backend launches: the planner's bodies (kernels.hpp) rewritten
// over a flat, numbered copy of the program's graph.
//
// Why: nvcc writes the full type of every kernel's template arguments into the host code it
// generates. A planner body names its node through the graph's types, in which every child
// is spelled out again: text that grows exponentially with depth (a 2-layer MLP's gradient
// was gigabytes, and g++ ran out of memory compiling it). Here each node is
//     flat::node<kind, op, T, stored, static extents, child ids...>
// and children are numbers, so the spelled type grows linearly with the node count. The
// evaluation is eval.hpp's, line for line, on these nodes.
//
//     using P = flat::program_of<Layout>;            // Layout: a program_layout
//     flat::elementwise<P, id>{ctx, out}(begin, end);  // as elementwise_body<evaluator<Layout>, N>
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <utility>

#include <luminal/kernels.hpp>

namespace luminal::flat {

/// The op of nodes that have none to evaluate (leaves, extents, gathers).
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
  else if constexpr (N::kind == op_kind::input || N::kind == op_kind::extent || N::kind == op_kind::gather)
    return std::type_identity<no_op>{};
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

/// eval.hpp's evaluator over flat nodes.
template <class P>
struct evaluator {
  template <int Id>
  using node_t = boost::mp11::mp_at_c<typename P::nodes, Id>;
  template <int Id>
  using value_type = typename node_t<Id>::value_type;

  template <int Id>
  LUMINAL_HD static extents<node_t<Id>::static_extents::size()> dims(const kernel_context& ctx) {
    return dims_impl<Id>(ctx, typename node_t<Id>::static_extents{},
                         std::make_index_sequence<node_t<Id>::static_extents::size()>{});
  }
  template <int Id, index_t... E, std::size_t... K>
  LUMINAL_HD static extents<sizeof...(K)> dims_impl(const kernel_context& ctx, std::integer_sequence<index_t, E...>,
                                                    std::index_sequence<K...>) {
    [[maybe_unused]] constexpr index_t row = index_t(Id) * index_t(P::max_rank);
    return {(E >= 0 ? E : ctx.dims[row + index_t(K)])...};
  }

  template <int Id, bool Root = false>
  LUMINAL_HD static value_type<Id> at(const kernel_context& ctx, index_t i) {
    using N = node_t<Id>;
    using T = value_type<Id>;
    if constexpr (N::kind == op_kind::input || (!Root && N::stored)) {
      return static_cast<const T*>(ctx.buffers[Id])[i];
    } else if constexpr (N::kind == op_kind::constant) {
      return static_cast<T>(N::op::value);
    } else if constexpr (N::kind == op_kind::extent) {
      return static_cast<T>(ctx.dims[index_t(Id) * index_t(P::max_rank)]);
    } else if constexpr (N::kind == op_kind::map) {
      return apply_map<Id>(ctx, i, typename N::children{});
    } else if constexpr (N::kind == op_kind::view) {
      constexpr int C = detail::first(typename N::children{});
      index_t j = N::op::source(i, dims<Id>(ctx), dims<C>(ctx));
      if constexpr (requires { N::op::pad_value; }) {
        if (j < 0) return static_cast<T>(N::op::pad_value);
      }
      return at<C>(ctx, j);
    } else if constexpr (N::kind == op_kind::gather) {
      constexpr int Table = detail::first(typename N::children{});
      constexpr int Index = detail::second(typename N::children{});
      auto table_dims = dims<Table>(ctx);
      index_t inner = luminal::detail::inner_size(table_dims, 0);
      index_t row = at<Index>(ctx, i / inner);
      if (row < 0 || row >= table_dims[0]) {
        *ctx.error_flag = 1;
        return T(0);
      }
      return at<Table>(ctx, row * inner + i % inner);
    } else if constexpr (N::kind == op_kind::iota) {
      constexpr std::size_t axis = N::op::axis, rank = N::static_extents::size();
      auto d = dims<Id>(ctx);
      if constexpr (axis + 1 == rank) return static_cast<T>(i % d[axis]);
      else if constexpr (axis == 0) return static_cast<T>(i / luminal::detail::inner_size(d, 0));
      else return static_cast<T>((i / luminal::detail::inner_size(d, axis)) % d[axis]);
    } else {
      static_assert(N::kind == op_kind::input, "luminal: internal error: a reduce or matmul was not stored");
      return T{};
    }
  }

  template <int Id, int... C>
  LUMINAL_HD static value_type<Id> apply_map(const kernel_context& ctx, index_t i, std::integer_sequence<int, C...>) {
    return node_t<Id>::op::functor::apply(at<C>(ctx, i)...);
  }
};

/// elementwise_body over flat nodes.
template <class P, int Id>
struct elementwise {
  using T = typename evaluator<P>::template value_type<Id>;
  kernel_context ctx;
  T* out;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = evaluator<P>::template at<Id, true>(ctx, i);
  }
};

/// reduce_body over flat nodes (F: the reduction's functor).
template <class P, int Id, class F>
struct reduce {
  using T = typename evaluator<P>::template value_type<Id>;
  using value_type = T;
  static constexpr int child = detail::first(typename evaluator<P>::template node_t<Id>::children{});
  kernel_context ctx;
  T* out;
  index_t extent, inner;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t o = begin; o < end; ++o) {
      T acc = identity();
      for (index_t k = 0; k < extent; ++k) acc = combine(acc, element(o, k));
      out[o] = acc;
    }
  }
  LUMINAL_HD static T identity() { return F::template identity<T>(); }
  LUMINAL_HD static T combine(T acc, T x) { return F::combine(acc, x); }
  LUMINAL_HD T element(index_t o, index_t k) const {
    return evaluator<P>::template at<child>(ctx, (o / inner) * extent * inner + o % inner + k * inner);
  }
  LUMINAL_HD void store(index_t o, T value) const { out[o] = value; }
};

/// The body to launch for a planner body: its flat twin, or the body itself when it is
/// not a planner body (small functors such as fill_zero_body).
template <class Body>
struct flatten {
  static const Body& convert(const Body& body) { return body; }
};
// convert() names its result type as a template-id, never through a member typedef: nvcc
// spells a kernel argument's type as the typedef it was deduced through, Body included.
template <class Layout, class N>
struct flatten<elementwise_body<luminal::evaluator<Layout>, N>> {
  static elementwise<program_of<Layout>, Layout::template id<N>> convert(
      const elementwise_body<luminal::evaluator<Layout>, N>& body) {
    return {body.ctx, body.out};
  }
};
template <class Layout, class N>
struct flatten<reduce_body<luminal::evaluator<Layout>, N>> {
  static reduce<program_of<Layout>, Layout::template id<N>, typename N::op::functor> convert(
      const reduce_body<luminal::evaluator<Layout>, N>& body) {
    return {body.ctx, body.out, body.extent, body.inner};
  }
};

}  // namespace luminal::flat
