// to_dot(outputs...): the graph as Graphviz DOT, one box per node with its op, element
// type and shape; leaves are ellipses, outputs are drawn bold.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <sstream>
#include <string>

#include "graph.hpp"

namespace luminal {

namespace detail {
/// "op axis k" and "dtype (shape)", joined by `separator` (DOT's "\\n" by default).
template <class N>
std::string node_label(const char* separator = "\\n") {
  std::ostringstream label;
  if constexpr (N::kind == op_kind::input) {
    label << (N::role == leaf_role::parameter ? "param " : N::role == leaf_role::state ? "state " : "input ")
          << N::name.view();
  } else if constexpr (N::kind == op_kind::constant) {
    label << "const " << N::value;
  } else if constexpr (N::kind == op_kind::extent) {
    label << "extent " << std::string(shape_text(std::array<Dim, 1>{N::dim}).view());
  } else {
    label << N::op::name;
    if constexpr (requires { N::op::axis; }) label << " axis " << N::op::axis;
  }
  label << separator << dtype_name<typename N::value_type>() << " " << shape_t<N>::text.view();
  return label.str();
}
}  // namespace detail

/// Graphviz DOT text for the graph of `outputs`: `std::ofstream("g.dot") << to_dot(loss);`
template <expression... Outputs>
std::string to_dot(Outputs...) {
  using nodes = topo_nodes<std::remove_cvref_t<Outputs>...>;
  constexpr auto table = graph_table<nodes>;
  constexpr std::array<int, sizeof...(Outputs)> outputs{node_id<nodes, std::remove_cvref_t<Outputs>>...};
  std::ostringstream dot;
  dot << "digraph luminal {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n";
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<table.size()>>([&](auto I) {
    using N = boost::mp11::mp_at_c<nodes, I>;
    bool is_output = false;
    for (int id : outputs) is_output = is_output || id == int(I);
    dot << "  n" << I << " [label=\"" << detail::node_label<N>() << "\"";
    if (N::kind == op_kind::input) dot << ", shape=ellipse";
    if (is_output) dot << ", style=bold";
    dot << "];\n";
    for (int k = 0; k < table[I].child_count; ++k) dot << "  n" << table[I].children[k] << " -> n" << I << ";\n";
  });
  dot << "}\n";
  return dot.str();
}

}  // namespace luminal
