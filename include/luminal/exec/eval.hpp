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

/// Compile-time facts of one program: its nodes, their table and plan. NodesName: the
/// node list by its short name (list_name<Nodes>). SumsGemmBatches: the backend runs GEMMs
/// summed over a batch axis (make_plan).
template <class NodesName, auto OutputIds, retention_policy Policy = retention_policy::store_all,
          bool SumsGemmBatches = false>
struct program_layout {
  using nodes = typename NodesName::type;
  static constexpr std::size_t node_count = boost::mp11::mp_size<nodes>::value;
  static constexpr auto table = graph_table<nodes>;
  /// The forward values the backward reads (retention.hpp).
  static constexpr auto retained = detail::retention_set(table, OutputIds);
  /// Each node's element count (Dim{-1}: not one extent): kernels over as many elements
  /// can run as one loop (kernel_groups.hpp).
  static constexpr auto counts = detail::element_counts(nodes{});
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
  using extents = detail::node_extents<NodesName, max_rank>;
  /// The arena's buffers and the kernels that use each (retention.hpp).
  static constexpr auto buffers = detail::arena_buffers<detail::arena_buffer_count(table, plan)>(table, plan);
  /// Node N's position: `Layout::template id<N>::value` (a type: see node_index).
  template <class N>
  using id = node_index<nodes, N>;
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
  /// Node Id (detail::flat_node: a short name in the signatures below).
  template <int Id>
  using node = typename detail::flat_node<P, Id>::type;
  template <int Id>
  using value_type = typename node<Id>::value_type;
  /// What node Id's value is computed in: f32 for bf16 and f16, whose values are loaded
  /// widened, and rounded at each op's output (as_element), as PyTorch's eager ops round
  /// theirs. A node's value is then the same bits wherever a plan computes it, fused into
  /// another kernel, recomputed by the backward or stored: no fusion and no retention
  /// budget changes a result (keeping f32 between fused ops, as torch.compile does, would).
  template <int Id>
  using arithmetic = arithmetic_t<value_type<Id>>;
  template <int Id>
  using coords = extents<node<Id>::rank>;

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
  /// Pads (detail::pads_checked and the others of eval_facts.hpp) says how pads are read:
  /// each element tested, or decided for a part of a row where pad_intervals() finds each
  /// pad wholly inside or wholly outside.
  template <int Id, bool Root = false, std::uint64_t Pads = detail::pads_checked>
  LUMINAL_ALWAYS_INLINE static arithmetic<Id> at(const kernel_context& ctx, const coords<Id>& c) {
    using N = node_at<nodes, Id>;
    using T = value_type<Id>;
    if constexpr (N::kind == op_kind::input || (!Root && N::stored)) {
      return static_cast<arithmetic<Id>>(static_cast<const T*>(ctx.buffers[Id])[detail::ravel(c, dims<Id>(ctx))]);
    } else if constexpr (N::kind == op_kind::constant) {
      return as_element<T>(N::op::value);
    } else if constexpr (N::kind == op_kind::extent) {
      return as_element<T>(ctx.dims[index_t(Id) * index_t(P::max_rank)]);
    } else if constexpr (N::kind == op_kind::map) {
      return apply_map<Id, Pads>(ctx, c, typename N::children{});
    } else if constexpr (N::kind == op_kind::view) {
      constexpr int C = flat::detail::first_child<typename N::children>::value;
      if constexpr (detail::broadcasts_one_element<P, Id>::value) {
        return at<C>(ctx, {});
      } else if constexpr (op_traits<typename N::op>::reshapes && detail::evaluates_flat<P, C>::value) {
        return at_flat<C>(ctx, detail::ravel(c, dims<Id>(ctx)));  // no unravel: same flat order
      } else {
        auto child_dims = dims<C>(ctx);
        coords<C> cc = N::op::to_child(c, dims<Id>(ctx), child_dims);
        if constexpr (!op_traits<typename N::op>::pads) {
          return at<C, false, detail::child_pads(Pads, 0, detail::top_pads<P, C>::value)>(ctx, cc);
        } else if constexpr (Pads == detail::pads_checked) {
          if (!N::op::inside(cc, child_dims)) return as_element<T>(N::op::pad_value);
          return at<C>(ctx, cc);
        } else if constexpr (Pads == detail::pads_inside || (Pads & 1) != 0) {
          return at<C, false, detail::child_pads(detail::pads_inside, 0, detail::top_pads<P, C>::value)>(ctx, cc);
        } else {
          return as_element<T>(N::op::pad_value);  // this part of the row is in the padding
        }
      }
    } else if constexpr (N::kind == op_kind::gather) {
      constexpr int Table = flat::detail::first_child<typename N::children>::value;
      constexpr int Index = flat::detail::second_child<typename N::children>::value;
      constexpr std::size_t index_rank = node_at<nodes, Index>::rank, table_rank = node_at<nodes, Table>::rank;
      coords<Index> ic{};
      for (std::size_t k = 0; k < index_rank; ++k) ic[k] = c[k];
      index_t row = index_t(at<Index, false, detail::child_pads(Pads, 0, detail::top_pads<P, Index>::value)>(ctx, ic));
      auto table_dims = dims<Table>(ctx);
      if (row < 0 || row >= table_dims[0]) {
        *ctx.error_flag = 1;
        return arithmetic<Id>(0);
      }
      coords<Table> tc{};
      tc[0] = row;
      for (std::size_t k = 1; k < table_rank; ++k) tc[k] = c[index_rank + k - 1];
      return at<Table>(ctx, tc);
    } else if constexpr (N::kind == op_kind::iota) {
      return as_element<T>(c[N::op::axis]);
    } else {
      static_assert(N::kind == op_kind::input, "luminal: internal error: a reduce or matmul was not stored");
      return arithmetic<Id>{};
    }
  }

  /// The value of a flat node (detail::evaluates_flat) at flat index i.
  template <int Id, bool Root = false>
  LUMINAL_HD static arithmetic<Id> at_flat(const kernel_context& ctx, index_t i) {
    using N = node_at<nodes, Id>;
    using T = value_type<Id>;
    if constexpr (N::kind == op_kind::input || (!Root && N::stored)) {
      return static_cast<arithmetic<Id>>(static_cast<const T*>(ctx.buffers[Id])[i]);
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

  template <int Id, std::uint64_t Pads, int... C>
  LUMINAL_ALWAYS_INLINE static arithmetic<Id> apply_map(const kernel_context& ctx, const coords<Id>& c,
                                                        std::integer_sequence<int, C...>) {
    if constexpr (Pads == detail::pads_checked) {
      return as_element<value_type<Id>>(node_at<nodes, Id>::op::functor::apply(at<C>(ctx, c)...));
    } else {
      // Child k's pads are numbered after those of the children before it.
      constexpr std::array<int, sizeof...(C)> counts{detail::top_pads<P, C>::value...};
      return apply_map_pads<Id, Pads, counts, C...>(ctx, c, std::make_index_sequence<sizeof...(C)>{});
    }
  }
  template <int Id, std::uint64_t Pads, auto Counts, int... C, std::size_t... K>
  LUMINAL_ALWAYS_INLINE static arithmetic<Id> apply_map_pads(const kernel_context& ctx, const coords<Id>& c,
                                                             std::index_sequence<K...>) {
    return as_element<value_type<Id>>(node_at<nodes, Id>::op::functor::apply(
        at<C, false, detail::child_pads(Pads, detail::count_before(Counts, K), Counts[K])>(ctx, c)...));
  }

  /// The value of node Id at coordinates `fine` of the input of reshape Split, which only
  /// splits Id's axes further, or only merges them where every other read has one value
  /// everywhere (detail::iteration::split): maps pass `fine` down towards Split, Split
  /// reads its input there, and every other read merges `fine` back into Id's coordinates
  /// by multiply-adds, or needs none. No coordinate is divided.
  template <int Id, bool Root, int Split>
  LUMINAL_HD static arithmetic<Id> at_split(const kernel_context& ctx,
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
  LUMINAL_HD static arithmetic<Id> apply_map_split(const kernel_context& ctx, const F& fine,
                                                   std::integer_sequence<int, C...>) {
    return as_element<value_type<Id>>(node_at<nodes, Id>::op::functor::apply(split_child<C, Split>(ctx, fine)...));
  }
  template <int C, int Split, class F>
  LUMINAL_HD static arithmetic<C> split_child(const kernel_context& ctx, const F& fine) {
    constexpr int Fine = detail::first_child_at<P, Split>::value;
    using Reshape = typename node_at<nodes, Split>::op;
    if constexpr (detail::leads_to<P, C, Split>::value) return at_split<C, false, Split>(ctx, fine);
    else if constexpr (detail::coordinate_free<P, C>::value) return at<C>(ctx, {});
    else return at<C>(ctx, Reshape::template from_child<node_at<nodes, C>::rank>(fine, dims<Fine>(ctx)));
  }
  /// The parts of a row of n elements inside the pads below node Id (pads_monotone: maps
  /// and affine views only), c0 and c1 the row's coordinates at its elements 0 and 1. For
  /// the k-th pad below no other (top_pads, numbered from `first`): inside[k], where it is
  /// inside, and all_inside[k], where it and every pad below it are. Views map coordinates
  /// affinely, so a pad's tested coordinate is b + a j at element j: b and a come from c0
  /// and c1, and its part of the row from two divisions (none where a is 0 or 1).
  /// `within`: the all_inside part of the pad above, or null. A pad under the pad above
  /// through views alone, with the same pad value (a slice's gradient padded again, as a
  /// scan's carry cotangent is), narrows inside[k] too: outside it the value is that pad
  /// value, as outside the pad above, so the part needs no test per element.
  template <int Id, bool Root = false>
  LUMINAL_HD static void pad_intervals(const kernel_context& ctx, const coords<Id>& c0, const coords<Id>& c1,
                                       index_t n, detail::row_part* inside, detail::row_part* all_inside, int first,
                                       detail::row_part* within, bool views_only = false, double top_value = 0.0) {
    using N = node_at<nodes, Id>;
    if constexpr (detail::top_pads<P, Id, Root>::value == 0) {
      return;
    } else if constexpr (N::kind == op_kind::map) {
      pad_intervals_children<Id>(ctx, c0, c1, n, inside, all_inside, first, within, typename N::children{});
    } else {
      static_assert(N::kind == op_kind::view, "luminal: internal error: pads below a gather in a padded row");
      constexpr int C = flat::detail::first_child<typename N::children>::value;
      auto child_dims = dims<C>(ctx);
      coords<C> cc0 = N::op::to_child(c0, dims<Id>(ctx), child_dims);
      coords<C> cc1 = N::op::to_child(c1, dims<Id>(ctx), child_dims);
      if constexpr (op_traits<typename N::op>::pads) {
        constexpr int axis = detail::pad_axis<typename N::op>::value;
        const detail::row_part part = detail::pad_part(cc0[axis], cc1[axis] - cc0[axis], child_dims[axis], n);
        if (within) {
          *within = detail::intersect(*within, part);
          if (views_only && N::op::pad_value == top_value) inside[first] = detail::intersect(inside[first], part);
          else views_only = false;
        } else {
          inside[first] = all_inside[first] = part;
          within = &all_inside[first];
          views_only = true;
          top_value = N::op::pad_value;
        }
      }
      pad_intervals<C>(ctx, cc0, cc1, n, inside, all_inside, first, within, views_only, top_value);
    }
  }
  template <int Id, int... C>
  LUMINAL_HD static void pad_intervals_children(const kernel_context& ctx, const coords<Id>& c0, const coords<Id>& c1,
                                                index_t n, detail::row_part* inside, detail::row_part* all_inside,
                                                int first, detail::row_part* within, std::integer_sequence<int, C...>) {
    ((pad_intervals<C>(ctx, c0, c1, n, inside, all_inside, first, within), first += detail::top_pads<P, C>::value),
     ...);
  }
  template <int Id, int... C>
  LUMINAL_HD static arithmetic<Id> apply_map_flat(const kernel_context& ctx, index_t i,
                                                  std::integer_sequence<int, C...>) {
    return as_element<value_type<Id>>(node_at<nodes, Id>::op::functor::apply(at_flat<C>(ctx, i)...));
  }
};

}  // namespace luminal
