// The two programs of a training step (train.hpp): which gradients the update program
// reads from the gradient program and which it computes itself, and which parameters and
// optimizer states it may write over their current values.
//
//     using update = program<host, retention_policy::store_all, NewP, NewState>;
//     constexpr auto in_place = detail::slots_updated_in_place<update>(mp_list<P, State>{});
#pragma once
#include <array>
#include <boost/mp11/list.hpp>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../core/graph.hpp"
#include "../exec/kernel_groups.hpp"
#include "../plan/retention.hpp"

namespace luminal::detail {

/// Whether the update program reads gradient G from the gradient program rather than
/// computing it itself: it does unless G recomputes from the leaves the update reads
/// (plan/retention.hpp: leaves, constants, and what fuses over them). Such a gradient
/// costs a few operations per element, and a leaf could not be an output anyway.
template <class G>
using is_handed_over = std::bool_constant<!recomputes_from_leaves<G>::value>;

/// What the name of a gradient's input starts with: "grad.<parameter>".
inline constexpr fixed_string gradient_prefix("grad.");
/// The input through which the update program reads parameter P's gradient: "grad.<name>".
template <class P>
using gradient_input = Leaf<gradient_prefix + P::name, value_t<P>, shape_t<P>, leaf_role::input>;

/// For each gradient, the gradient program's output that holds it (the loss is output 0),
/// or -1 where the update recomputes it.
template <class... G>
consteval std::array<int, sizeof...(G)> gradient_outputs(boost::mp11::mp_list<G...>) {
  std::array<int, sizeof...(G)> out{};
  int next = 1;
  std::size_t i = 0;
  ((out[i++] = is_handed_over<G>::value ? next++ : -1), ...);
  return out;
}

/// For each node, whether a node above it (one that depends on it, itself excepted) reads
/// its children other than at the index it computes: one sweep from the outputs down.
template <std::size_t N>
constexpr std::array<bool, N> below_other_reads(const std::array<node_info, N>& table) {
  std::array<bool, N> below{};
  for (std::size_t id = N; id-- > 0;)  // parents come after children
    if (below[id] || child_reads_of(table[id].kind) != child_reads::same_place)
      for (int c = 0; c < table[id].child_count; ++c) below[std::size_t(table[id].children[std::size_t(c)])] = true;
  return below;
}
/// Whether the update program may write the new value of each slot L (output i for the
/// i-th slot) over the slot's current value:
///   - every node that depends on the slot is a map (elementwise over same-shape operands),
///     so every kernel reads the slot at the index it computes, never another element;
///   - no kernel reads the slot after the kernel that writes its new value, which reads it
///     before writing it (kernels run as one loop read each block before the next member
///     writes it), nor beside it, in another segment of its launch
///     (kernel_groups::may_overwrite).
/// Adam, AdamW and SGD update every slot in place; an update that reads a parameter
/// through a view or a reduction (a norm of it) falls back to the store's second buffer.
/// Slot i is the leaf at node id leaves[i]; its new value is output i. One evaluation
/// for all slots: a sweep of the graph per slot grew with slots times nodes.
template <class Program, std::size_t S>
constexpr std::array<bool, S> slots_updated_in_place_at(const std::array<int, S>& leaves) {
  const auto below = below_other_reads(Program::layout::table);
  std::array<bool, S> safe{};
  for (std::size_t i = 0; i < S; ++i) {
    const int leaf = leaves[i], output = Program::output_ids[i];
    safe[i] = output != leaf && !below[std::size_t(leaf)] &&
              kernel_groups<typename Program::layout>::may_overwrite(Program::plan.kernel_of[std::size_t(output)], leaf);
  }
  return safe;
}
template <class Program, class... L>
constexpr std::array<bool, sizeof...(L)> slots_updated_in_place(boost::mp11::mp_list<L...>) {
  return slots_updated_in_place_at<Program>(
      std::array<int, sizeof...(L)>{int(node_index<typename Program::nodes, L>::value)...});
}

}  // namespace luminal::detail
