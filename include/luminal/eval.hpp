// Evaluating a fused kernel: a node's value at one flat index, recursing through the
// nodes the plan fuses and loading from buffers where the plan stored a value. The same
// code runs in host threads, Kokkos and CUDA kernels.
#pragma once
#include <boost/mp11/algorithm.hpp>

#include "graph.hpp"
#include "ops/view.hpp"
#include "plan.hpp"

namespace luminal {

/// What a kernel sees: buffers and runtime extents, indexed by node id. Device-accessible.
struct kernel_context {
  void* const* buffers = nullptr;
  const index_t* dims = nullptr;   // node_count rows of max_rank extents
  int* error_flag = nullptr;       // set to 1 by a gather whose index is out of range
};

/// Compile-time facts of one program: its nodes, their table and plan.
template <class Nodes, auto OutputIds, retention_policy Policy = retention_policy::store_all>
struct program_layout {
  using nodes = Nodes;
  static constexpr std::size_t node_count = boost::mp11::mp_size<Nodes>::value;
  static constexpr auto table = graph_table<Nodes>;
  static constexpr auto retained = detail::retention_set(table, OutputIds);
  static constexpr auto plan =
      detail::make_plan(table, OutputIds, Policy == retention_policy::store_all ? retained : std::array<bool, node_count>{});
  static constexpr std::size_t max_rank = [] {
    std::size_t r = 1;
    for (const auto& info : table) r = std::size_t(info.rank) > r ? std::size_t(info.rank) : r;
    return r;
  }();
  template <class N>
  static constexpr int id = node_id<Nodes, N>;
};

template <class Layout>
struct evaluator {
  /// Runtime extents of node N; static extents are compile-time constants.
  template <class N>
  LUMINAL_HD static extents<N::shape::rank> dims(const kernel_context& ctx) {
    return dims_impl<N>(ctx, std::make_index_sequence<N::shape::rank>{});
  }
  template <class N, std::size_t... I>
  LUMINAL_HD static extents<sizeof...(I)> dims_impl(const kernel_context& ctx, std::index_sequence<I...>) {
    [[maybe_unused]] constexpr auto d = N::shape::dims;  // unused for rank-0 nodes
    constexpr index_t row = index_t(Layout::template id<N>) * index_t(Layout::max_rank);
    return {(d[I].is_static() ? index_t(d[I].offset) : ctx.dims[row + index_t(I)])...};
  }

  /// The value of node N at flat index i. With Root, a stored node is computed rather
  /// than loaded: it is the value the running kernel produces.
  template <class N, bool Root = false>
  LUMINAL_HD static typename N::value_type at(const kernel_context& ctx, index_t i) {
    using T = typename N::value_type;
    constexpr int id = Layout::template id<N>;
    if constexpr (N::kind == op_kind::input || (!Root && Layout::plan.stored[id])) {
      return static_cast<const T*>(ctx.buffers[id])[i];
    } else if constexpr (N::kind == op_kind::constant) {
      return static_cast<T>(N::value);
    } else if constexpr (N::kind == op_kind::extent) {
      return static_cast<T>(ctx.dims[index_t(id) * index_t(Layout::max_rank)]);
    } else if constexpr (N::kind == op_kind::map) {
      return apply_map<N>(ctx, i, typename N::children{});
    } else if constexpr (N::kind == op_kind::view) {
      using C = boost::mp11::mp_first<typename N::children>;
      index_t j = N::op::source(i, dims<N>(ctx), dims<C>(ctx));
      if constexpr (requires { N::op::pad_value; }) {
        if (j < 0) return static_cast<T>(N::op::pad_value);
      }
      return at<C>(ctx, j);
    } else if constexpr (N::kind == op_kind::gather) {
      using Table = boost::mp11::mp_first<typename N::children>;
      using Index = boost::mp11::mp_second<typename N::children>;
      auto table_dims = dims<Table>(ctx);
      index_t inner = detail::inner_size(table_dims, 0);
      index_t row = at<Index>(ctx, i / inner);
      if (row < 0 || row >= table_dims[0]) {
        *ctx.error_flag = 1;
        return T(0);
      }
      return at<Table>(ctx, row * inner + i % inner);
    } else if constexpr (N::kind == op_kind::iota) {
      // One division where the axis is the first or the last (a causal mask's two iotas).
      constexpr std::size_t axis = N::op::axis, rank = N::shape::rank;
      auto d = dims<N>(ctx);
      if constexpr (axis + 1 == rank) return static_cast<T>(i % d[axis]);
      else if constexpr (axis == 0) return static_cast<T>(i / detail::inner_size(d, 0));
      else return static_cast<T>((i / detail::inner_size(d, axis)) % d[axis]);
    } else {
      static_assert(N::kind == op_kind::input, "luminal: internal error: a reduce or matmul was not stored");
      return T{};
    }
  }

  template <class N, class... C>
  LUMINAL_HD static typename N::value_type apply_map(const kernel_context& ctx, index_t i, boost::mp11::mp_list<C...>) {
    return N::op::functor::apply(at<C>(ctx, i)...);
  }
};

}  // namespace luminal
