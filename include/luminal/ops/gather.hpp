// gather: rows of a table picked by an integer index tensor (embedding lookup).
#pragma once
#include "../core/errors.hpp"
#include "view.hpp"

namespace luminal {

struct Gather {
  static constexpr op_kind kind = op_kind::gather;
  static constexpr std::string_view name = "gather";
  template <class T, class I>
  using value_type = T;
  template <class Table, class Index>
  static constexpr auto gathered_dims() {
    dims_t<Index::rank + Table::rank - 1> dims{};
    for (std::size_t k = 0; k < Index::rank; ++k) dims[k] = Index::dims[k];
    for (std::size_t k = 1; k < Table::rank; ++k) dims[Index::rank + k - 1] = Table::dims[k];
    return dims;
  }
  template <class Table, class Index>
  using shape = shape_from<gathered_dims<Table, Index>()>;
};

/// `gather(table, ids)`: for table [V, D...] and i32 ids [I...] gives [I..., D...] with
/// out[i..., d...] = table[ids[i...], d...]. An index outside [0, V) makes run() throw.
template <expression Table, expression Index>
constexpr auto gather(Table, Index) {
  static_assert(rank_v<Table> >= 1, "luminal: gather needs a table of rank >= 1");
  if constexpr (!std::is_same_v<typename Index::value_type, i32>)
    (void)error::index_must_be_integer<dtype_text<typename Index::value_type>()>{};
  return typename node_of<Gather, std::remove_cvref_t<Table>, std::remove_cvref_t<Index>>::type{};
}

}  // namespace luminal
