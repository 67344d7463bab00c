// The planner, at compile time: which nodes get a buffer (materialized), which kernels
// run in which order, and what each kernel reads, so liveness is known before run time.
// Nodes that fuse (core/op_facts.hpp: maps, views, gathers...) are evaluated inside the
// kernel of whatever reads them; kernel boundaries (reductions, matmuls, opaque ops),
// outputs, the values retention.hpp keeps for the backward and expensive fan-out values
// get buffers.
#pragma once
#include <array>

#include "../core/graph.hpp"

namespace luminal {

/// A fan-out node whose inline recomputation costs more than this is stored instead.
inline constexpr int fanout_recompute_limit = 24;

template <std::size_t N, std::size_t NumOutputs>
struct plan_data {
  std::array<bool, N> stored{};        // has a buffer: inputs, kernel results
  std::array<bool, N> is_output{};
  std::array<int, N> reads{};          // evaluations per element: by each parent, an expand's many times
  std::array<int, N> inline_cost{};    // cost of evaluating it inline at one index
  // Kernels in run order: node ids of their roots. A node the backward recomputes
  // (retention.hpp) has a second kernel, its recompute entry, after the forward's.
  std::array<int, 2 * N> kernels{};
  std::array<bool, 2 * N> is_recompute{};
  int kernel_count = 0;
  std::array<int, N> kernel_of{};      // kernel index producing node i (the forward's), or -1
  std::array<int, N> gemm_base{};      // a matmul operand: the stored node whose memory it reads
  // A sum over a batch axis of a matmul that nothing else reads, run as one GEMM that
  // accumulates over that axis (summed_gemm_child): the matmul gets no buffer.
  std::array<bool, N> sums_gemm{};
  // Lifetimes (split_lifetimes). With recompute entries (retention.hpp) a run decides
  // which of them execute, and a recomputed value lives twice:
  int boundary = 0;                    // the first kernel of the backward
  std::array<int, N> recompute_entry{};     // node i's recompute kernel, or -1
  std::array<int, N> forward_last_use{};    // last forward kernel reading i, or -1
  std::array<int, N> backward_last_use{};   // last backward kernel (not a recompute) reading i, or -1
  std::array<std::array<int, 2>, 2 * N> recompute_reads{};  // (recompute kernel, stored node it reads)
  int recompute_read_count = 0;
};

namespace detail {
/// Strips views a GEMM can absorb (batch broadcast, last-two transpose, in either order:
/// a weight shared by every image of a batch is transposed in its gradient) from an operand.
template <std::size_t N>
constexpr int gemm_operand_base(const std::array<node_info, N>& table, int id) {
  if (table[id].is_batch_expand) id = table[id].children[0];
  if (table[id].is_last_two_transpose) id = table[id].children[0];
  if (table[id].is_batch_expand) id = table[id].children[0];
  return id;
}

/// The node whose memory a GEMM operand reads, for a plan that stores what `stored` says:
/// its base (gemm_operand_base), or, where that is a reshape not stored itself, the node
/// under the reshapes. A reshape keeps the row-major order, so the (batch*seq, width) view
/// of a stored (batch, seq, width) activation is the same memory: no copy kernel.
template <std::size_t N>
constexpr int gemm_operand_memory(const std::array<node_info, N>& table, const std::array<bool, N>& stored, int id) {
  id = gemm_operand_base(table, id);
  while (!stored[id] && table[id].is_reshape) id = table[id].children[0];
  return id;
}

/// The matmul that a sum over one of its batch axes reads, where that sum can be one GEMM
/// accumulating over the axis: nothing else reads the matmul, the caller does not want it
/// (an output, or kept for the backward) and the backend can (sums_gemm_batches). A
/// weight shared by every image of a batch gets such a sum as its gradient. Else -1.
template <std::size_t N>
constexpr int summed_gemm_child(const std::array<node_info, N>& table, const std::array<int, N>& parents,
                                const std::array<bool, N>& keep, int id) {
  if (table[id].summed_axis < 0) return -1;
  const int child = table[id].children[0];
  const bool batch_axis = table[id].summed_axis < table[child].rank - 2;
  return kernel_form_of(table[child].kind) == kernel_form::gemm && batch_axis && parents[child] == 1 && !keep[child]
             ? child
             : -1;
}

/// Calls f(id) once for each stored node that the kernel of `root` reads: its inline tree
/// walked down to stored nodes. A GEMM reads the memory of each operand
/// (plan.gemm_base) even when the operand's view is itself stored (retained): that memory
/// must stay live until it. A summed GEMM (plan.sums_gemm) reads its matmul's operands.
template <std::size_t N, std::size_t NumOutputs, class F>
constexpr void for_each_read(const std::array<node_info, N>& table, const plan_data<N, NumOutputs>& plan, int root,
                             F&& f) {
  // A node is marked when pushed, so the stack holds each node at most once: an op may
  // name one child twice (attention over a cache given the same keys as past and new).
  std::array<int, N> stack{};
  std::array<bool, N> queued{};
  int top = 0;
  auto push = [&](int id) {
    if (!queued[id]) {
      queued[id] = true;
      stack[top++] = id;
    }
  };
  const int gemm = plan.sums_gemm[root] ? table[root].children[0] : root;
  for (int c = 0; c < table[gemm].child_count; ++c) {
    int child = table[gemm].children[c];
    if (kernel_form_of(table[gemm].kind) == kernel_form::gemm) child = plan.gemm_base[child];
    push(child);
  }
  while (top > 0) {
    int id = stack[--top];
    if (plan.stored[id]) {
      f(id);
      continue;
    }
    for (int c = 0; c < table[id].child_count; ++c) push(table[id].children[c]);
  }
}

/// Nodes reachable from `root` (itself included).
template <std::size_t N>
constexpr std::array<bool, N> reachable_from(const std::array<node_info, N>& table, int root) {
  std::array<bool, N> reached{};
  reached[root] = true;
  for (int i = root; i >= 0; --i)  // parents come after children
    if (reached[i])
      for (int k = 0; k < table[i].child_count; ++k) reached[table[i].children[k]] = true;
  return reached;
}

/// Splits the plan's kernels after the forward's last one (a kernel of a node that output
/// 0, the forward value, reaches, not a recompute entry: a backward kernel that
/// hoist_into_groups moved into the forward's loops counts as forward) and records, for
/// every stored node, its last forward and backward readers and the recompute entries
/// that read it.
template <std::size_t N, std::size_t NumOutputs>
constexpr void split_lifetimes(const std::array<node_info, N>& table, const std::array<int, NumOutputs>& outputs,
                               plan_data<N, NumOutputs>& plan) {
  const auto forward = reachable_from(table, outputs[0]);
  plan.boundary = plan.kernel_count;
  if (NumOutputs > 1) {
    plan.boundary = 0;
    for (int k = 0; k < plan.kernel_count; ++k)
      if (!plan.is_recompute[k] && forward[plan.kernels[k]]) plan.boundary = k + 1;
  }
  for (std::size_t i = 0; i < N; ++i) {
    plan.kernel_of[i] = plan.recompute_entry[i] = -1;
    plan.forward_last_use[i] = plan.backward_last_use[i] = -1;
  }
  plan.recompute_read_count = 0;
  for (int k = 0; k < plan.kernel_count; ++k) {
    const int root = plan.kernels[k];
    (plan.is_recompute[k] ? plan.recompute_entry[root] : plan.kernel_of[root]) = k;
    for_each_read(table, plan, root, [&](int id) {  // kernels are walked in run order
      if (plan.is_recompute[k]) {
        if (is_leaf(table[id].kind)) return;
        if (plan.recompute_read_count == int(2 * N)) throw "luminal: too many reads by recompute kernels";
        plan.recompute_reads[plan.recompute_read_count++] = {k, id};
      } else {
        (k < plan.boundary ? plan.forward_last_use[id] : plan.backward_last_use[id]) = k;
      }
    });
  }
  for (int id : outputs) plan.backward_last_use[id] = plan.kernel_count;  // read by the caller
}

/// `sums_gemm_batches`: the backend runs a GEMM summed over a batch axis (a backend's
/// gemm_batch_sum, backend.hpp), so such sums need no buffer of per-batch products.
template <std::size_t N, std::size_t NumOutputs>
constexpr auto make_plan(const std::array<node_info, N>& table, const std::array<int, NumOutputs>& outputs,
                         const std::array<bool, N>& force_stored = {}, bool sums_gemm_batches = false) {
  plan_data<N, NumOutputs> plan;
  for (int id : outputs) plan.is_output[id] = true;
  for (std::size_t i = 0; i < N; ++i) {
    plan.stored[i] = plan.is_output[i] || force_stored[i] || !fuses(table[i].kind);  // leaves and boundaries
    plan.gemm_base[i] = -1;
  }
  if (sums_gemm_batches) {
    std::array<int, N> parents{};
    std::array<bool, N> keep{};
    for (std::size_t i = 0; i < N; ++i) {
      keep[i] = plan.is_output[i] || force_stored[i];
      for (int k = 0; k < table[i].child_count; ++k) ++parents[table[i].children[k]];
    }
    for (std::size_t i = 0; i < N; ++i) {
      const int gemm = summed_gemm_child(table, parents, keep, int(i));
      if (gemm < 0) continue;
      plan.sums_gemm[i] = true;
      plan.stored[gemm] = false;
    }
  }
  // GEMM reads memory: the memory of each operand chain must be stored.
  for (std::size_t i = 0; i < N; ++i) {
    if (kernel_form_of(table[i].kind) != kernel_form::gemm) continue;
    for (int k = 0; k < 2; ++k) {
      int memory = gemm_operand_memory(table, plan.stored, table[i].children[k]);
      plan.stored[memory] = true;
      plan.gemm_base[table[i].children[k]] = memory;
    }
  }
  // An op with a kernel of its own (an exchange, a quantized matmul) reads whole buffers.
  for (std::size_t i = 0; i < N; ++i)
    if (kernel_form_of(table[i].kind) == kernel_form::own)
      for (int k = 0; k < table[i].child_count; ++k) plan.stored[table[i].children[k]] = true;
  // Fan-out: children come first in the table, so one forward pass sees final costs.
  for (std::size_t i = 0; i < N; ++i)
    for (int k = 0; k < table[i].child_count; ++k) plan.reads[table[i].children[k]] += table[i].expansion;
  for (std::size_t i = 0; i < N; ++i) {
    int cost = table[i].cost;
    for (int k = 0; k < table[i].child_count; ++k) {
      int child = table[i].children[k];
      cost += plan.stored[child] ? 1 : plan.inline_cost[child];
    }
    plan.inline_cost[i] = cost;
    // Stored when evaluated more than once per element: by several parents, or by an
    // expand that shows each element many times (a max pool's gradient, spread back over
    // each window, would otherwise recompute the gradient that reaches the window).
    if (fuses(table[i].kind) && plan.reads[i] > 1 && cost > fanout_recompute_limit) {
      plan.stored[i] = true;
      plan.inline_cost[i] = 1;
    }
  }
  for (std::size_t i = 0; i < N; ++i)
    if (plan.stored[i] && !is_leaf(table[i].kind)) plan.kernels[plan.kernel_count++] = int(i);
  split_lifetimes(table, outputs, plan);  // kernel_of and the lifetimes
  return plan;
}

/// Moves elementwise kernels up, each to just after the kernels that compute what it
/// reads, where a run of elementwise kernels over as many elements ends: kernel_groups can
/// then run it in that run's loop, and the values they share stay in the cache
/// (fused_kernels). A GELU's gradient and the GELU value that the next weight gradient
/// recomputes from the same inputs become one loop. `counts` is each node's element count
/// (Dim{-1}: unknown). A backward kernel may so join the forward's loops, as the mask a
/// gradient keeps joins the loop of the value it masks: it then counts as the forward's
/// (split_lifetimes), and what it makes is kept. Unless `backward_stays_behind`: a
/// retention budget (retention.hpp) must be able to recompute every value the forward
/// keeps, and a backward value is no forward value it can recompute. The lifetimes are
/// split again when a kernel moved.
template <std::size_t N, std::size_t NumOutputs>
constexpr void hoist_into_groups(const std::array<node_info, N>& table, const std::array<int, NumOutputs>& outputs,
                                 const std::array<Dim, N>& counts, plan_data<N, NumOutputs>& plan,
                                 bool backward_stays_behind) {
  auto elementwise = [&](int id) { return fuses(table[id].kind) && table[id].rank > 0; };
  std::array<int, N> position{};
  for (auto& p : position) p = -1;
  for (int k = 0; k < plan.kernel_count; ++k) position[plan.kernels[k]] = k;
  const auto forward = reachable_from(table, outputs[0]);
  const int first_backward = plan.boundary;  // make_plan split the lifetimes
  bool moved = false;
  for (int k = 1; k < plan.kernel_count; ++k) {
    const int id = plan.kernels[k];
    if (!elementwise(id) || counts[id] == Dim{-1}) continue;
    int after = -1;  // the last kernel whose result this one reads
    for_each_read(table, plan, id, [&](int read) { after = position[read] > after ? position[read] : after; });
    if (after < 0 || !elementwise(plan.kernels[after]) || !(counts[plan.kernels[after]] == counts[id])) continue;
    int to = after + 1;  // past the rest of the run: a kernel put inside it could split it
    while (to < k && elementwise(plan.kernels[to]) && counts[plan.kernels[to]] == counts[id]) ++to;
    if (backward_stays_behind && !forward[id] && to < first_backward) continue;
    if (to >= k) continue;
    for (int m = k; m > to; --m) {
      plan.kernels[m] = plan.kernels[m - 1];
      position[plan.kernels[m]] = m;
    }
    plan.kernels[to] = id;
    position[id] = to;
    moved = true;
  }
  if (moved) split_lifetimes(table, outputs, plan);  // make_plan's still hold otherwise
}

}  // namespace detail
}  // namespace luminal
