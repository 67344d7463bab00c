// Each node's label ("mul f32 (Batch, 512)", "param fc1.weight f32 (784, 512)"), as a
// constexpr table of a graph's nodes and one function that formats an entry.
//
//     constexpr auto& labels = detail::node_labels<nodes>;    // one entry per node id
//     std::string text = detail::format_label(labels[id], " ");
//
// A table rather than a function template per node: a program's describe(), profile()
// and retained_nodes() then run one loop over node ids, and the compiler makes no
// function per node whose name spells the graph (each name costs the mangler the square
// of its length).
#pragma once
#include <array>
#include <boost/mp11/list.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "graph.hpp"

namespace luminal::detail {

/// What a node's label says: the op (or leaf role and name, or constant value), its axis
/// where it has one, and its element type and shape.
struct label_info {
  op_kind kind{};
  std::string_view op;          // op name, or "input" / "param" / "state" for a leaf
  std::string_view leaf_name;   // a leaf's name
  double value = 0;             // a constant's value
  bool integral = false;        // ... printed as an integer
  Dim extent{};                 // an Extent node's axis
  bool has_axis = false;
  int axis = 0;                 // the op's axis (reductions, views along one axis)
  std::string_view dtype;
  std::string_view shape;       // "(Batch, 784)"
};

template <class N>
consteval label_info label_of() {
  label_info info;
  info.kind = N::kind;
  if constexpr (N::kind == op_kind::input) {
    info.op = N::role == leaf_role::parameter ? "param"
              : N::role == leaf_role::state   ? "state"
              : N::role == leaf_role::buffer  ? "buffer"
                                              : "input";
    info.leaf_name = N::name.view();
  } else if constexpr (N::kind == op_kind::constant) {
    info.value = static_cast<double>(N::value);
    info.integral = std::is_integral_v<std::remove_cv_t<decltype(N::value)>>;
  } else if constexpr (N::kind == op_kind::extent) {
    info.extent = N::dim;
  } else {
    info.op = N::op::name;
    info.axis = op_traits<typename N::op>::axis;
    info.has_axis = info.axis >= 0;
  }
  info.dtype = dtype_name<typename N::value_type>();
  info.shape = N::shape::text.view();
  return info;
}

/// What label_of reads of a node: a computed node's signature (graph.hpp), which does
/// not name its children, so that label_of is instantiated with a short name; a leaf, a
/// constant or an extent is a short type already.
template <class N>
struct label_subject {
  using type = N;
};
template <computed_node N>
struct label_subject<N> {
  using type = signature_of<N>;
};

template <class... N>
consteval std::array<label_info, sizeof...(N)> make_labels(boost::mp11::mp_list<N...>) {
  return {label_of<typename label_subject<N>::type>()...};
}

/// The labels of a graph's nodes (a topo_nodes list), indexed by node id.
template <class Nodes>
inline constexpr auto node_labels = make_labels(Nodes{});

/// "op axis k" and "dtype (shape)", joined by `separator` (DOT's "\\n", one space in
/// program listings).
inline std::string format_label(const label_info& info, const char* separator) {
  std::ostringstream label;
  if (info.kind == op_kind::input) {
    label << info.op << ' ' << info.leaf_name;
  } else if (info.kind == op_kind::constant) {
    label << "const ";
    if (info.integral) label << static_cast<long long>(info.value);
    else label << info.value;
  } else if (info.kind == op_kind::extent) {
    label << "extent " << std::string(shape_text(std::array<Dim, 1>{info.extent}).view());
  } else {
    label << info.op;
    if (info.has_axis) label << " axis " << info.axis;
  }
  label << separator << info.dtype << " " << info.shape;
  return label.str();
}

}  // namespace luminal::detail
