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

template <class Rows, class... N>
constexpr std::array<int, sizeof...(N)> extents_row_indices(boost::mp11::mp_list<N...>) {
  return {int(boost::mp11::mp_find<Rows, extents_row_t<N>>::value)...};
}

template <std::size_t MaxRank>
struct extents_row_dims {
  std::array<Dim, MaxRank> dims{};
  int rank = 0;
};
template <std::size_t MaxRank, class... S>
constexpr std::array<extents_row_dims<MaxRank>, sizeof...(S)> extents_rows(boost::mp11::mp_list<S...>) {
  std::array<extents_row_dims<MaxRank>, sizeof...(S)> rows{};
  std::size_t r = 0;
  auto add = [&](const auto& dims) {
    for (std::size_t k = 0; k < dims.size(); ++k) rows[r].dims[k] = dims[k];
    rows[r++].rank = int(dims.size());
  };
  (add(S::dims), ...);
  return rows;
}

#ifdef __CUDACC__
// nvcc: EDG keeps extents_row_t<N> as the spelling of the shape it yields and walks N's
// whole type tree when comparing rows (README, "Compile time under nvcc"): a training
// step's cicc grew from 4 GB to 24 GB. nvcc keeps code per node instead.
template <class Nodes, std::size_t MaxRank>
struct node_extents {
  static void resolve_all(const symbol_values& symbols, index_t* dims) {
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<Nodes>::value>>([&](auto I) {
      using N = boost::mp11::mp_at_c<Nodes, I>;
      index_t* row = dims + I * MaxRank;
      for (std::size_t k = 0; k < N::shape::rank; ++k) row[k] = resolve(N::shape::dims[k], symbols);
      if constexpr (N::kind == op_kind::extent) row[0] = resolve(N::dim, symbols);
    });
  }
};
#else
template <class Nodes, std::size_t MaxRank>
struct node_extents {
  using rows = boost::mp11::mp_unique<boost::mp11::mp_transform<extents_row_t, Nodes>>;
  static constexpr std::size_t row_count = boost::mp11::mp_size<rows>::value;
  static constexpr auto row_of = extents_row_indices<rows>(Nodes{});
  static constexpr auto row_dims = extents_rows<MaxRank>(rows{});

  /// Writes node i's extents for the symbol values to dims[i * MaxRank ...]; throws
  /// std::invalid_argument naming a symbol that has no value.
  static void resolve_all(const symbol_values& symbols, index_t* dims) {
    std::array<index_t, row_count * MaxRank> values{};
    for (std::size_t r = 0; r < row_count; ++r)
      for (int k = 0; k < row_dims[r].rank; ++k) values[r * MaxRank + std::size_t(k)] = resolve(row_dims[r].dims[std::size_t(k)], symbols);
    for (std::size_t i = 0; i < row_of.size(); ++i) {
      const std::size_t r = std::size_t(row_of[i]);
      for (int k = 0; k < row_dims[r].rank; ++k) dims[i * MaxRank + std::size_t(k)] = values[r * MaxRank + std::size_t(k)];
    }
  }
};

#endif

}  // namespace luminal::detail
