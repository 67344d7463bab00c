// to_dot(outputs...): the graph as Graphviz DOT, one box per node with its op, element
// type and shape; leaves are ellipses, outputs are drawn bold.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <sstream>
#include <string>

#include "../core/graph.hpp"
#include "../core/node_labels.hpp"

namespace luminal {

/// Graphviz DOT text for the graph of `outputs`: `std::ofstream("g.dot") << to_dot(loss);`
template <expression... Outputs>
std::string to_dot(Outputs...) {
  using nodes = topo_nodes<std::remove_cvref_t<Outputs>...>;
  constexpr auto table = graph_table<nodes>;
  constexpr auto& labels = detail::node_labels<nodes>;
  constexpr std::array<int, sizeof...(Outputs)> outputs{node_index<nodes, std::remove_cvref_t<Outputs>>::value...};
  std::ostringstream dot;
  dot << "digraph luminal {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < table.size(); ++i) {
    bool is_output = false;
    for (int id : outputs) is_output = is_output || id == int(i);
    dot << "  n" << i << " [label=\"" << detail::format_label(labels[i], "\\n") << "\"";
    if (is_leaf(table[i].kind)) dot << ", shape=ellipse";
    if (is_output) dot << ", style=bold";
    dot << "];\n";
    for (int k = 0; k < table[i].child_count; ++k) dot << "  n" << table[i].children[k] << " -> n" << i << ";\n";
  }
  dot << "}\n";
  return dot.str();
}

}  // namespace luminal
