// Every node's extents as data. Each node names a row of a table of the program's distinct
// shapes, so that resolving the extents for a run is one loop over a few rows and one
// copy per node, the same code for every program, instead of code generated per node.
//
//     using extents = detail::node_extents<nodes, max_rank>;
//     extents::resolve_all(symbols, dims.data());  // node i's extents at dims[i * max_rank]
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstddef>

#include "node.hpp"
#include "shape.hpp"

namespace luminal::detail {

/// The extents row of node N: its shape, or for an Extent node the one symbolic extent
/// whose value it holds.
template <class N>
struct extents_row {
  using type = typename N::shape;
};
template <class N>
  requires(N::kind == op_kind::extent)
struct extents_row<N> {
  using type = Shape<N::dim>;
};
template <class N>
using extents_row_t = typename extents_row<N>::type;

template <std::size_t MaxRank>
struct extents_row_dims {
  std::array<Dim, MaxRank> dims{};
  int rank = 0;
};
/// The program's distinct extents rows, and each node's row. Rows are compared as data
/// (not as shape types through mp_unique, which instantiates several class templates per
/// node and row on GCC).
template <std::size_t MaxRank, std::size_t Nodes>
struct extents_table {
  std::array<extents_row_dims<MaxRank>, Nodes> rows{};
  std::array<int, Nodes> row_of{};
  std::size_t row_count = 0;
};
template <std::size_t MaxRank, class... N>
constexpr extents_table<MaxRank, sizeof...(N)> make_extents_table(boost::mp11::mp_list<N...>) {
  extents_table<MaxRank, sizeof...(N)> table{};
  std::size_t node = 0;
  auto add = [&](const auto& dims) {
    std::size_t r = 0;
    for (; r < table.row_count; ++r) {
      const extents_row_dims<MaxRank>& row = table.rows[r];
      bool same = row.rank == int(dims.size());
      // The numbers first: most rows differ there, and a Dim's == compares its 40-byte name
      // too (GCC bounds a constant evaluation's operations, and rows times nodes add up).
      for (std::size_t k = 0; same && k < dims.size(); ++k)
        same = row.dims[k].offset == dims[k].offset && row.dims[k].scale == dims[k].scale && row.dims[k] == dims[k];
      if (same) break;
    }
    if (r == table.row_count) {
      for (std::size_t k = 0; k < dims.size(); ++k) table.rows[r].dims[k] = dims[k];
      table.rows[r].rank = int(dims.size());
      ++table.row_count;
    }
    table.row_of[node++] = int(r);
  };
  (add(extents_row_t<N>::dims), ...);
  return table;
}

#ifdef __CUDACC__
// nvcc: EDG keeps extents_row_t<N> as the spelling of the shape it yields and walks N's
// whole type tree, exponential in the graph's depth, when comparing rows
// (docs/compile-time.md, "Under nvcc"). nvcc keeps code per node instead.
template <class NodesName, std::size_t MaxRank>
struct node_extents {
  using Nodes = typename NodesName::type;
  static void resolve_all(const symbol_values& symbols, index_t* dims) {
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<Nodes>::value>>([&](auto I) {
      using N = node_at<Nodes, I>;
      index_t* row = dims + I * MaxRank;
      for (std::size_t k = 0; k < N::shape::rank; ++k) row[k] = resolve(N::shape::dims[k], symbols);
      if constexpr (N::kind == op_kind::extent) row[0] = resolve(N::dim, symbols);
    });
  }
};
#else
template <class NodesName, std::size_t MaxRank>
struct node_extents {
  static constexpr auto table = make_extents_table<MaxRank>(typename NodesName::type{});
  static constexpr std::size_t row_count = table.row_count;

  /// Writes node i's extents for the symbol values to dims[i * MaxRank ...]; throws
  /// std::invalid_argument naming a symbol that has no value.
  static void resolve_all(const symbol_values& symbols, index_t* dims) {
    std::array<index_t, row_count * MaxRank> values{};
    for (std::size_t r = 0; r < row_count; ++r)
      for (int k = 0; k < table.rows[r].rank; ++k)
        values[r * MaxRank + std::size_t(k)] = resolve(table.rows[r].dims[std::size_t(k)], symbols);
    for (std::size_t i = 0; i < table.row_of.size(); ++i) {
      const std::size_t r = std::size_t(table.row_of[i]);
      for (int k = 0; k < table.rows[r].rank; ++k)
        dims[i * MaxRank + std::size_t(k)] = values[r * MaxRank + std::size_t(k)];
    }
  }
};

#endif

}  // namespace luminal::detail
