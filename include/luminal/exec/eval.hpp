// Evaluating a fused kernel: a node's value at given coordinates, recursing through the
// nodes the plan fuses and loading from buffers where the plan stored a value. Views map
// coordinates (ops/view.hpp); a stored read is one multiply-add per axis, which a loop
// nest turns into one increment per element. Subtrees that only combine same-shape values
// (maps, reshapes, stored reads) are "flat" and also evaluate at a flat index. The same
// code runs in host threads, Kokkos and CUDA kernels, over the numbered graph of flat.hpp.
// at and apply_map, which walk a fused tree at coordinates, are always inlined: a kernel's
// loop vectorizes only when it sees the whole tree, and GCC's inliner stops at its size
// limits for a large one (col2im's nine shifted reads would stay calls, one per read and
// element).
#pragma once
#include <boost/mp11/algorithm.hpp>

#include "eval_facts.hpp"
#include "flat.hpp"
#include "../core/node_extents.hpp"
#include "../ops/view.hpp"
#include "../plan/retention.hpp"

namespace luminal {

/// What a kernel sees: buffers and runtime extents, indexed by node id. Device-accessible.
struct kernel_context {
  void* const* buffers = nullptr;
  const index_t* dims = nullptr;   // node_count rows of max_rank extents
  int* error_flag = nullptr;       // set to 1 by a gather whose index is out of range
};

namespace detail {
/// Each node's element count (Dim{-1} where it cannot be written as one extent).
template <class... N>
constexpr std::array<Dim, sizeof...(N)> element_counts(boost::mp11::mp_list<N...>) {
  auto count = [](const auto& dims, std::size_t rank) {
    Dim n;
    return dims_product(dims, 0, rank, n) ? n : Dim{-1};
  };
  return {count(N::shape::dims, N::shape::rank)...};
}
}  // namespace detail

/// Compile-time facts of one program: its nodes, their table and plan. SumsGemmBatches:
/// the backend runs GEMMs summed over a batch axis (make_plan).
template <class Nodes, auto OutputIds, retention_policy Policy = retention_policy::store_all,
          bool SumsGemmBatches = false>
struct program_layout {
  using nodes = Nodes;
  static constexpr std::size_t node_count = boost::mp11::mp_size<Nodes>::value;
  static constexpr auto table = graph_table<Nodes>;
  /// The forward values the backward reads (retention.hpp).
  static constexpr auto retained = detail::retention_set(table, OutputIds);
  /// Each node's element count (Dim{-1}: not one extent): kernels over as many elements
  /// can run as one loop (kernel_groups.hpp).
  static constexpr auto counts = detail::element_counts(Nodes{});
  static constexpr auto plan = detail::plan_with_retention<Policy>(table, OutputIds, retained, counts, SumsGemmBatches);
  static constexpr retention_policy policy = Policy;
  /// Whether some kernels run only when the backward recomputes their value.
  static constexpr bool has_recompute_entries = Policy.kind == retention_policy::mode::budget;
  static constexpr std::size_t max_rank = [] {
    std::size_t r = 1;
    for (const auto& info : table) r = std::size_t(info.rank) > r ? std::size_t(info.rank) : r;
    return r;
  }();
  /// Every node's extents from the symbol values (node_extents.hpp).
  using extents = detail::node_extents<Nodes, max_rank>;
  /// The arena's buffers and the kernels that use each (retention.hpp).
  static constexpr auto buffers = detail::arena_buffers<detail::arena_buffer_count(table, plan)>(table, plan);
  /// Node N's position: `Layout::template id<N>::value` (a type: see node_index).
  template <class N>
  using id = node_index<Nodes, N>;
};

namespace detail {
/// Row-major flat index of coordinates c: Horner's rule, no division.
template <std::size_t R>
LUMINAL_INLINE index_t ravel(const extents<R>& c, const extents<R>& dims) {
  index_t flat = 0;
  for (std::size_t k = 0; k < R; ++k) flat = flat * dims[k] + c[k];
  return flat;
}
}  // namespace detail

/// The evaluator of flat program P (flat.hpp).
template <class P>
struct evaluator {
  using nodes = typename P::nodes;
  template <int Id>
  using value_type = typename node_at<nodes, Id>::value_type;
  template <int Id>
  using coords = extents<node_at<nodes, Id>::rank>;

  /// Runtime extents of node Id; static extents are compile-time constants.
  template <int Id>
  LUMINAL_HD static coords<Id> dims(const kernel_context& ctx) {
    using N = node_at<nodes, Id>;
    return dims_impl<Id>(ctx, typename N::static_extents{}, std::make_index_sequence<N::rank>{});
  }
  template <int Id, index_t... E, std::size_t... K>
  LUMINAL_HD static extents<sizeof...(K)> dims_impl(const kernel_context& ctx, std::integer_sequence<index_t, E...>,
                                                    std::index_sequence<K...>) {
    [[maybe_unused]] const index_t* row = ctx.dims + index_t(Id) * index_t(P::max_rank);
    return {(E >= 0 ? E : row[K])...};
  }

  /// The value of node Id at coordinates c. With Root, a stored node is computed rather
  /// than loaded: it is the value the running kernel produces.
  /// With Unchecked, pads are read as if every coordinate were inside them: the loop nest
  /// asks for it on the part of a row that inside_pads() says is inside every pad.
  template <int Id, bool Root = false, bool Unchecked = false>
  LUMINAL_ALWAYS_INLINE static value_type<Id> at(const kernel_context& ctx, const coords<Id>& c) {
    using N = node_at<nodes, Id>;
    using T = value_type<Id>;
    if constexpr (N::kind == op_kind::input || (!Root && N::stored)) {
      return static_cast<const T*>(ctx.buffers[Id])[detail::ravel(c, dims<Id>(ctx))];
    } else if constexpr (N::kind == op_kind::constant) {
      return static_cast<T>(N::op::value);
    } else if constexpr (N::kind == op_kind::extent) {
      return static_cast<T>(ctx.dims[index_t(Id) * index_t(P::max_rank)]);
    } else if constexpr (N::kind == op_kind::map) {
      return apply_map<Id, Unchecked>(ctx, c, typename N::children{});
    } else if constexpr (N::kind == op_kind::view) {
      constexpr int C = flat::detail::first_child<typename N::children>::value;
      if constexpr (detail::broadcasts_one_element<P, Id>::value) {
        return at<C>(ctx, {});
      } else if constexpr (op_traits<typename N::op>::reshapes && detail::evaluates_flat<P, C>::value) {
        return at_flat<C>(ctx, detail::ravel(c, dims<Id>(ctx)));  // no unravel: same flat order
      } else {
        auto child_dims = dims<C>(ctx);
        coords<C> cc = N::op::to_child(c, dims<Id>(ctx), child_dims);
        if constexpr (op_traits<typename N::op>::pads && !Unchecked) {
          if (!N::op::inside(cc, child_dims)) return static_cast<T>(N::op::pad_value);
        }
        return at<C, false, Unchecked>(ctx, cc);
      }
    } else if constexpr (N::kind == op_kind::gather) {
      constexpr int Table = flat::detail::first_child<typename N::children>::value;
      constexpr int Index = flat::detail::second_child<typename N::children>::value;
      constexpr std::size_t index_rank = node_at<nodes, Index>::rank, table_rank = node_at<nodes, Table>::rank;
      coords<Index> ic{};
      for (std::size_t k = 0; k < index_rank; ++k) ic[k] = c[k];
      index_t row = index_t(at<Index, false, Unchecked>(ctx, ic));
      auto table_dims = dims<Table>(ctx);
      if (row < 0 || row >= table_dims[0]) {
        *ctx.error_flag = 1;
        return T(0);
      }
      coords<Table> tc{};
      tc[0] = row;
      for (std::size_t k = 1; k < table_rank; ++k) tc[k] = c[index_rank + k - 1];
      return at<Table>(ctx, tc);
    } else if constexpr (N::kind == op_kind::iota) {
      return static_cast<T>(c[N::op::axis]);
    } else {
      static_assert(N::kind == op_kind::input, "luminal: internal error: a reduce or matmul was not stored");
      return T{};
    }
  }

  /// The value of a flat node (detail::evaluates_flat) at flat index i.
  template <int Id, bool Root = false>
  LUMINAL_HD static value_type<Id> at_flat(const kernel_context& ctx, index_t i) {
    using N = node_at<nodes, Id>;
    using T = value_type<Id>;
    if constexpr (N::kind == op_kind::input || (!Root && N::stored)) {
      return static_cast<const T*>(ctx.buffers[Id])[i];
    } else if constexpr (N::kind == op_kind::map) {
      return apply_map_flat<Id>(ctx, i, typename N::children{});
    } else if constexpr (N::kind == op_kind::view) {
      constexpr int C = flat::detail::first_child<typename N::children>::value;
      if constexpr (detail::broadcasts_one_element<P, Id>::value) return at<C>(ctx, {});  // a broadcast scalar
      else return at_flat<C>(ctx, i);                             // a reshape
    } else {
      return at<Id, Root>(ctx, {});  // constants and extents: rank 0
    }
  }

  template <int Id, bool Unchecked, int... C>
  LUMINAL_ALWAYS_INLINE static value_type<Id> apply_map(const kernel_context& ctx, const coords<Id>& c,
                                                        std::integer_sequence<int, C...>) {
    return node_at<nodes, Id>::op::functor::apply(at<C, false, Unchecked>(ctx, c)...);
  }

  /// The value of node Id at coordinates `fine` of the input of reshape Split, which only
  /// splits Id's axes further, or only merges them where every other read has one value
  /// everywhere (detail::iteration::split): maps pass `fine` down towards Split, Split
  /// reads its input there, and every other read merges `fine` back into Id's coordinates
  /// by multiply-adds, or needs none. No coordinate is divided.
  template <int Id, bool Root, int Split>
  LUMINAL_HD static value_type<Id> at_split(const kernel_context& ctx,
                                            const coords<detail::first_child_at<P, Split>::value>& fine) {
    using N = node_at<nodes, Id>;
    constexpr int Fine = detail::first_child_at<P, Split>::value;
    if constexpr (Id == Split) {
      return at<Fine>(ctx, fine);
    } else if constexpr (N::kind == op_kind::map && detail::leads_to<P, Id, Split, Root>::value) {
      return apply_map_split<Id, Split>(ctx, fine, typename N::children{});
    } else {
      return at<Id, Root>(ctx, node_at<nodes, Split>::op::template from_child<N::rank>(fine, dims<Fine>(ctx)));
    }
  }
  template <int Id, int Split, class F, int... C>
  LUMINAL_HD static value_type<Id> apply_map_split(const kernel_context& ctx, const F& fine,
                                                   std::integer_sequence<int, C...>) {
    return node_at<nodes, Id>::op::functor::apply(split_child<C, Split>(ctx, fine)...);
  }
  template <int C, int Split, class F>
  LUMINAL_HD static value_type<C> split_child(const kernel_context& ctx, const F& fine) {
    constexpr int Fine = detail::first_child_at<P, Split>::value;
    using Reshape = typename node_at<nodes, Split>::op;
    if constexpr (detail::leads_to<P, C, Split>::value) return at_split<C, false, Split>(ctx, fine);
    else if constexpr (detail::coordinate_free<P, C>::value) return at<C>(ctx, {});
    else return at<C>(ctx, Reshape::template from_child<node_at<nodes, C>::rank>(fine, dims<Fine>(ctx)));
  }
  /// Whether coordinates c of node Id are inside every pad the expression reads through
  /// there (pads_monotone: maps and affine views only).
  template <int Id, bool Root = false>
  LUMINAL_HD static bool inside_pads(const kernel_context& ctx, const coords<Id>& c) {
    using N = node_at<nodes, Id>;
    if constexpr (!detail::reads_padding<P, Id, Root>::value) {
      return true;
    } else if constexpr (N::kind == op_kind::map) {
      return inside_children<Id>(ctx, c, typename N::children{});
    } else {
      constexpr int C = flat::detail::first_child<typename N::children>::value;
      auto child_dims = dims<C>(ctx);
      coords<C> cc = N::op::to_child(c, dims<Id>(ctx), child_dims);
      if constexpr (op_traits<typename N::op>::pads) {
        if (!N::op::inside(cc, child_dims)) return false;
      }
      return inside_pads<C>(ctx, cc);
    }
  }
  template <int Id, int... C>
  LUMINAL_HD static bool inside_children(const kernel_context& ctx, const coords<Id>& c,
                                         std::integer_sequence<int, C...>) {
    return (inside_pads<C>(ctx, c) && ...);
  }
  template <int Id, int... C>
  LUMINAL_HD static value_type<Id> apply_map_flat(const kernel_context& ctx, index_t i,
                                                  std::integer_sequence<int, C...>) {
    return node_at<nodes, Id>::op::functor::apply(at_flat<C>(ctx, i)...);
  }
};

}  // namespace luminal
