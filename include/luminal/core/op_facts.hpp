// What the passes need to know of an op, stated once. Per op kind: which kernel computes a
// node of it, and so whether the node fuses into the kernel of whatever reads it or is a
// kernel boundary, and whether the backward may compute it again. Per op type: whether a
// view pads, keeps the flat order (a reshape), reorders axes or broadcasts, whether a
// reduction sums, the axis an op works along, what a map costs inline, and what an opaque
// op asks of the program. The planner, the evaluator, the loop nests, the retention rules
// and the descriptions ask here: none of them compares op names or tests an op for members.
//
//     static_assert(fuses(op_kind::gather) && kernel_form_of(op_kind::matmul) == kernel_form::gemm);
//     if constexpr (op_traits<typename N::op>::pads) ...    // N: a node; a leaf's op is void
#pragma once
#include <type_traits>

#include "node.hpp"

namespace luminal {

/// The kernel that computes a node of a kind, where the plan gives the node a buffer.
enum class kernel_form {
  none,         // a leaf: bound by the caller, never computed
  elementwise,  // a loop nest over the node's coordinates, evaluating inline what it fuses
  reduction,    // a loop over the reduced axis with the reduced expression fused into it
  gemm,         // a batched matrix product, its operands read from memory through views
  own,          // the op's own kernel (Op::execute) over whole stored children
};

/// Which kernel computes a node of this kind. Constants, extents, maps, views, gathers
/// and iotas have a value at every coordinate that costs a few operations, so whatever
/// reads them evaluates them inline; reductions, matmuls and opaque ops do not.
constexpr kernel_form kernel_form_of(op_kind kind) {
  switch (kind) {
    case op_kind::input: return kernel_form::none;
    case op_kind::reduce: return kernel_form::reduction;
    case op_kind::matmul: return kernel_form::gemm;
    case op_kind::opaque: return kernel_form::own;
    case op_kind::constant:
    case op_kind::extent:
    case op_kind::map:
    case op_kind::view:
    case op_kind::gather:
    case op_kind::iota: return kernel_form::elementwise;
  }
  return kernel_form::none;
}

/// A leaf (an input, a parameter, optimizer state): it has a buffer the caller binds.
constexpr bool is_leaf(op_kind kind) { return kernel_form_of(kind) == kernel_form::none; }

/// Whether a node of this kind fuses: the kernel of whatever reads it evaluates it at the
/// coordinates it needs, unless the plan stores it (an output, a value kept for the
/// backward, a value read many times).
constexpr bool fuses(op_kind kind) { return kernel_form_of(kind) == kernel_form::elementwise; }

/// Whether a node of this kind is a kernel boundary: it always gets a buffer and a kernel
/// of its own, and whatever reads it loads it.
constexpr bool is_boundary(op_kind kind) { return !is_leaf(kind) && !fuses(kind); }

/// Whether the backward may run the kernel of a stored node of this kind again instead of
/// keeping its value (retention_policy::budget): every computed kind but an opaque op,
/// whose kernel may do more than compute its value (an exchange sends it to other ranks).
constexpr bool recomputable(op_kind kind) { return !is_leaf(kind) && kernel_form_of(kind) != kernel_form::own; }

/// Whether computing a node of this kind again costs what loading it would: a leaf is
/// bound wherever it is read, and a fusing node is a few operations per element over
/// what it reads. A block's backward and a training step's update recompute such nodes
/// (plan/retention.hpp).
constexpr bool cheap_to_recompute(op_kind kind) { return is_leaf(kind) || fuses(kind); }

/// Where a fusing node of a kind reads its children for its value at coordinates c: what
/// the evaluator walks and the loop nests reason about.
enum class child_reads {
  none,       // no children: a constant, an extent (one value everywhere), an iota (its coordinate)
  same_place, // a map: every child at c, so a fused tree of maps reads each input where it writes
  remapped,   // a view: its one child at the coordinates its op maps c to (a layout)
  by_index,   // a gather: its index at c's leading axes, its table at the row the index holds
};
constexpr child_reads child_reads_of(op_kind kind) {
  switch (kind) {
    case op_kind::map: return child_reads::same_place;
    case op_kind::view: return child_reads::remapped;
    case op_kind::gather: return child_reads::by_index;
    default: return child_reads::none;
  }
}

/// Whether a node of this kind has one value at every coordinate (a constant, an extent):
/// it is read without coordinates.
constexpr bool same_everywhere(op_kind kind) { return kind == op_kind::constant || kind == op_kind::extent; }

/// Whether a node of this kind, evaluating its op at `cost` per element (op_traits::cost),
/// shows its one child's values without computing new ones: a view (it only moves them)
/// or an identity map (cost 0: stop_gradient, a custom rule's node). Whoever keeps such a
/// node keeps the value under it instead.
constexpr bool shows_child(op_kind kind, int cost) {
  const child_reads reads = child_reads_of(kind);
  return reads == child_reads::remapped || (reads == child_reads::same_place && cost == 0);
}

template <shape_type Target>
struct Expand;
template <class F, int Axis>
struct Reduce;
namespace fn {
struct SumReduce;
}

namespace detail {
template <class Op>
struct is_expand : std::false_type {};
template <shape_type Target>
struct is_expand<Expand<Target>> : std::true_type {};
template <class Op>
struct summed_axis_of : std::integral_constant<int, -1> {};
template <int Axis>
struct summed_axis_of<Reduce<fn::SumReduce, Axis>> : std::integral_constant<int, Axis> {};

template <class Op>
consteval int inline_cost_of() {
  if constexpr (requires { Op::functor::cost; }) return int(Op::functor::cost);
  else return 1;
}
template <class Op>
consteval int axis_of() {
  if constexpr (requires { Op::axis; }) return int(Op::axis);
  else return -1;
}
template <class Op>
consteval bool only_splits_of() {
  if constexpr (requires { Op::only_splits; }) return bool(Op::only_splits);
  else return false;
}
template <class Op>
consteval bool only_merges_of() {
  if constexpr (requires { Op::only_merges; }) return bool(Op::only_merges);
  else return false;
}
template <class N>
consteval bool has_parameter_role() {
  if constexpr (requires { N::role; }) return N::role == leaf_role::parameter;
  else return false;
}
}  // namespace detail

/// The traits of an op type that the passes read (void, a leaf's op: none of them). The
/// ops declare them as members (ops/): this is the one place that looks for them.
template <class Op>
struct op_traits {
  /// A view that shows a constant (`pad_value`) outside its child: its reads test bounds.
  static constexpr bool pads = requires { Op::pad_value; };
  /// A view that keeps its child's row-major order (a reshape, or, in a flat graph, a
  /// reshape's coordinate map): the same elements at the same flat indices.
  static constexpr bool reshapes = requires { Op::is_reshape; };
  /// A reshape's coordinate map (exec/flat.hpp) whose every output axis is one group of
  /// input axes: output coordinates follow from input ones by multiply-adds alone.
  static constexpr bool only_splits = detail::only_splits_of<Op>();
  /// A reshape's coordinate map whose every input axis is one group of output axes.
  static constexpr bool only_merges = detail::only_merges_of<Op>();
  /// A view that reorders axes (`order`): it maps coordinates back from its child
  /// (`from_child`), so a loop may run over the child and write at a stride.
  static constexpr bool permutes = requires { Op::order; };
  /// A broadcast (expand): stretches extents of 1 and prepends axes.
  static constexpr bool expands = detail::is_expand<Op>::value;
  /// A sum over one axis: that axis; -1 for every other op.
  static constexpr int summed_axis = detail::summed_axis_of<Op>::value;
  /// The axis the op works along (a reduction, an iota, an unfold), or -1.
  static constexpr int axis = detail::axis_of<Op>();
  /// Scalar operations to evaluate the op at one index: its functor's cost for a map, 1
  /// for the rest (a view's address, a load).
  static constexpr int cost = detail::inline_cost_of<Op>();
  /// An opaque op that sums over ranks (an exchange): its program needs a communicator.
  static constexpr bool needs_communicator = requires { Op::needs_communicator; };
  /// An opaque op that reports indices out of range in the program's error flag.
  static constexpr bool reports_bad_indices = requires { Op::reports_bad_indices; };
};

/// The traits of a map's scalar functor that the gradient rules read.
template <class F>
struct functor_traits {
  /// Piecewise constant (floor, ceil, round, trunc): no gradient.
  static constexpr bool rounds = requires { F::rounds; };
  /// A cast to `F::cast_target`.
  static constexpr bool casts = requires { typename F::cast_target; };
};

/// Whether node N is a trained parameter (not an input, optimizer state, or computed
/// node). A class, not a variable template: GCC names every variable it instantiates, and
/// a node type's name spells its whole subgraph.
template <class N>
struct is_parameter_leaf : std::bool_constant<detail::has_parameter_role<N>()> {};

}  // namespace luminal
