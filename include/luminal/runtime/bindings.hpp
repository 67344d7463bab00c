// How a program checks what is bound to its inputs and fixes its symbols' values: a
// constexpr table of the inputs (name, element type, declared shape) and plain functions
// over it, shared by every program.
//
//     constexpr auto& inputs = detail::leaf_entries<list_name<leaves>, list_name<nodes>>;
//     std::size_t i = detail::find_input(inputs, "x");        // or throws naming the inputs
//     std::size_t count = detail::check_input(inputs[i], dtype_tag::f32, data, {32, 784});
//
// Functions over a table rather than a loop per input inside each program: a loop body
// per input is a function whose name spells the program's graph, and mangling those names
// was a large part of compiling a training step.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "../core/exceptions.hpp"
#include "../core/quant_format.hpp"
#include "../core/graph.hpp"

namespace luminal::detail {

/// One input (leaf) of a program: what bind() checks data against.
struct leaf_entry {
  std::string_view name;
  leaf_role role{};
  dtype_tag type{};
  std::size_t element_bytes = 0;
  int node = 0;                   // its node id
  std::size_t rank = 0;
  const Dim* dims = nullptr;      // its declared extents (the shape type's static array)
  std::string_view shape_text;    // "(Batch, 784)"
};

/// Data bound to one input.
struct input_binding {
  static constexpr std::size_t max_rank = 16;
  const void* data = nullptr;      // device-accessible: owned copy or the caller's memory
  void* owned = nullptr;
  std::size_t owned_bytes = 0;
  std::array<index_t, max_rank> dims{};
  bool bound = false;
};

// Over the leaf and its position, not the node list: see detail::position_in.
template <class L>
consteval leaf_entry leaf_entry_of(int node) {
  return {L::name.view(), L::role, dtype_of<typename L::value_type>(), sizeof(typename L::value_type), node,
          L::shape::rank, L::shape::dims.data(), L::shape::text.view()};
}
template <class Nodes, class... L>
consteval std::array<leaf_entry, sizeof...(L)> make_leaf_entries(boost::mp11::mp_list<L...>) {
  return {leaf_entry_of<L>(node_index<Nodes, L>::value)...};
}

/// The inputs of a graph, in the order of the list LeavesName names, the graph's nodes
/// being the list NodesName names (both list_name<...>: a table read at run time is named
/// at each use).
template <class LeavesName, class NodesName>
inline constexpr auto leaf_entries = make_leaf_entries<typename NodesName::type>(typename LeavesName::type{});

/// Extents as "(32, 784)": of data given to bind(), of a node for describe().
inline std::string extents_in_parentheses(std::span<const index_t> shape) {
  std::string s = "(";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + ")";
}

/// Whether one of `leaves` is named `name`.
inline bool holds_input(std::span<const leaf_entry> leaves, std::string_view name) {
  for (const leaf_entry& leaf : leaves)
    if (leaf.name == name) return true;
  return false;
}

/// The index of the input named `name`; throws input_error listing the inputs there are.
inline std::size_t find_input(std::span<const leaf_entry> leaves, std::string_view name) {
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].name == name) return i;
  std::string names;
  for (const leaf_entry& leaf : leaves) names += (names.empty() ? "" : ", ") + std::string(leaf.name);
  throw input_error("luminal: the program has no input named '" + std::string(name) + "'; its inputs are: " +
                    (names.empty() ? "(none)" : names));
}

/// Checks data for `leaf`: its element type, rank, static extents and pointer. Returns its
/// element count; throws input_error saying what does not match.
inline std::size_t check_input(const leaf_entry& leaf, dtype_tag type, const void* data,
                               std::span<const index_t> shape) {
  std::string who = "luminal: input '" + std::string(leaf.name) + "' ";
  if (type != leaf.type)
    throw input_error(who + "holds " + std::string(dtype_name(leaf.type)) + ", but the data given is " +
                      std::string(dtype_name(type)));
  if (shape.size() != leaf.rank)
    throw input_error(who + "has shape " + std::string(leaf.shape_text) + " of rank " + std::to_string(leaf.rank) +
                      ", but the data given has rank " + std::to_string(shape.size()) + ": " + extents_in_parentheses(shape));
  std::size_t count = 1;
  for (std::size_t k = 0; k < leaf.rank; ++k) {
    const Dim& d = leaf.dims[k];
    if (shape[k] < 0) throw input_error(who + "was given a negative extent");
    if (d.is_static() && shape[k] != d.offset)
      throw input_error(who + "has shape " + std::string(leaf.shape_text) + ": axis " + std::to_string(k) +
                        " must be " + std::to_string(d.offset) + ", but the data given has " +
                        std::to_string(shape[k]) + " " + extents_in_parentheses(shape));
    count *= std::size_t(shape[k]);
  }
  if (count > 0 && data == nullptr) throw input_error(who + "was given a null pointer");
  return count;
}

/// The bytes of quantized weights of `count` elements in `shape` stored in `format`: whole
/// rows of the last extent, each a run of the format's blocks. Throws input_error naming
/// the input when the format is not one luminal reads or a row is not whole blocks.
inline std::size_t quantized_bytes(const leaf_entry& leaf, quant_format format, std::size_t count,
                                   std::span<const index_t> shape) {
  const quant_format_info info = format_info(format);
  std::string who = "luminal: quantized weight '" + std::string(leaf.name) + "' ";
  if (info.block_elements == 0)
    throw input_error(who + "was given an unknown format (ggml type " + std::to_string(unsigned(format)) + ")");
  if (shape.empty()) throw input_error(who + "needs at least one axis: its rows");
  const std::size_t row = std::size_t(shape.back());
  if (row % info.block_elements != 0)
    throw input_error(who + "has rows of " + std::to_string(row) + " elements, which is not a whole number of " +
                      std::string(info.name) + " blocks of " + std::to_string(info.block_elements));
  return row == 0 ? 0 : count / row * row_bytes(format, row);
}

/// Solves symbols that appear only in products (`Heads` in an axis of `Heads*HeadDim`) from
/// a bound extent whose other factors are known, until nothing more is learned. Throws
/// input_error when the extent is not a multiple of the known factors.
inline void solve_products(std::span<const leaf_entry> leaves, std::span<const input_binding> bindings,
                           symbol_values& symbols) {
  for (bool learned = true; learned;) {
    learned = false;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      for (std::size_t k = 0; k < leaves[i].rank; ++k) {
        const Dim& d = leaves[i].dims[k];
        if (d.is_static()) continue;
        std::string_view unknown;
        int unknowns = 0;
        std::int64_t known = d.scale;
        std::string_view rest = d.symbol_text();
        while (!rest.empty()) {
          auto star = rest.find('*');
          std::string_view name = rest.substr(0, star);
          rest = star == std::string_view::npos ? std::string_view{} : rest.substr(star + 1);
          if (const index_t* value = symbols.find(name)) known *= *value;
          else { ++unknowns; unknown = name; }
        }
        if (unknowns != 1) continue;
        const std::int64_t extent = bindings[i].dims[k] - d.offset;
        if (known <= 0 || extent < 0 || extent % known != 0)
          throw input_error("luminal: input '" + std::string(leaves[i].name) + "' axis " + std::to_string(k) + " is " +
                            std::string(shape_text(std::array<Dim, 1>{d}).view()) + " = " +
                            std::to_string(bindings[i].dims[k]) + ", which gives no whole value of " +
                            std::string(unknown));
        symbols.set(unknown, extent / known);
        learned = true;
      }
    }
  }
}

/// Fixes each symbol from the first input that has it as an axis, then symbols that only
/// products hold (solve_products); later inputs, and compound extents (Batch*Seq, Seq+2),
/// must agree. Throws input_error for an unbound
/// input or a disagreement, naming both inputs.
inline void resolve_symbols(std::span<const leaf_entry> leaves, std::span<const input_binding> bindings,
                            symbol_values& symbols) {
  symbols.count = 0;
  std::array<std::string_view, symbol_values::capacity> set_by{};
  auto index_of = [&](std::string_view symbol) {
    for (std::size_t i = 0; i < symbols.count; ++i)
      if (symbols.names[i] == symbol) return i;
    return std::size_t(0);
  };
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const leaf_entry& leaf = leaves[i];
    const input_binding& b = bindings[i];
    if (!b.bound)
      throw input_error("luminal: input '" + std::string(leaf.name) + "' was not bound before run(); bind() it");
    for (std::size_t k = 0; k < leaf.rank; ++k) {
      const Dim& d = leaf.dims[k];
      if (d.is_static() || d.scale != 1 || d.offset != 0 || d.symbol_text().find('*') != std::string_view::npos)
        continue;
      if (const index_t* known = symbols.find(d.symbol_text())) {
        if (*known != b.dims[k])
          throw input_error("luminal: input '" + std::string(leaf.name) + "' axis " + std::to_string(k) + " is " +
                            std::string(d.symbol_text()) + " = " + std::to_string(b.dims[k]) + ", but input '" +
                            std::string(set_by[index_of(d.symbol_text())]) + "' set " +
                            std::string(d.symbol_text()) + " = " + std::to_string(*known));
      } else {
        set_by[symbols.count] = leaf.name;
        symbols.set(d.symbol_text(), b.dims[k]);
      }
    }
  }
  solve_products(leaves, bindings, symbols);
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const leaf_entry& leaf = leaves[i];
    for (std::size_t k = 0; k < leaf.rank; ++k) {
      const Dim& d = leaf.dims[k];
      if (d.is_static()) continue;
      index_t expected = resolve(d, symbols);
      if (expected != bindings[i].dims[k])
        throw input_error("luminal: input '" + std::string(leaf.name) + "' axis " + std::to_string(k) + " must be " +
                          std::string(shape_text(std::array<Dim, 1>{d}).view()) + " = " + std::to_string(expected) +
                          ", but the data given has " + std::to_string(bindings[i].dims[k]));
    }
  }
}

}  // namespace luminal::detail
