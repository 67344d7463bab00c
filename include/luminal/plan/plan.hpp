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
  // Kernels in run order: node ids of their roots. A node the backward may recompute
  // (retention.hpp) has more kernels after the forward's, its recompute entries, one
  // before each point of the backward where it may first be needed; a run picks one.
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
  std::array<int, N> recompute_entry{};     // node i's first recompute entry, or -1
  std::array<int, N> forward_last_use{};    // last forward kernel reading i, or -1
  std::array<int, N> backward_first_use{};  // first backward kernel (not a recompute) reading i, or -1
  std::array<int, N> backward_last_use{};   // last backward kernel (not a recompute) reading i, or -1
  std::array<std::array<int, 2>, 2 * N> recompute_reads{};  // (recomputed node, stored node it reads), once each
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
/// every stored node, its last forward reader, its first and last backward readers, its
/// first recompute entry and the nodes whose recomputation reads it.
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
    plan.forward_last_use[i] = plan.backward_first_use[i] = plan.backward_last_use[i] = -1;
  }
  plan.recompute_read_count = 0;
  for (int k = 0; k < plan.kernel_count; ++k) {
    const int root = plan.kernels[k];
    if (plan.is_recompute[k]) {
      if (plan.recompute_entry[root] >= 0) continue;  // its other entries read the same
      plan.recompute_entry[root] = k;
    } else {
      plan.kernel_of[root] = k;
    }
    for_each_read(table, plan, root, [&](int id) {  // kernels are walked in run order
      if (plan.is_recompute[k]) {
        if (is_leaf(table[id].kind)) return;
        if (plan.recompute_read_count == int(2 * N)) throw "luminal: too many reads by recompute kernels";
        plan.recompute_reads[plan.recompute_read_count++] = {root, id};
      } else if (k < plan.boundary) {
        plan.forward_last_use[id] = k;
      } else {
        if (plan.backward_first_use[id] < 0) plan.backward_first_use[id] = k;
        plan.backward_last_use[id] = k;
      }
    });
  }
  for (int id : outputs) plan.backward_last_use[id] = plan.kernel_count;  // read by the caller
}

/// Reorders the backward's kernels (those after plan.boundary, before any recompute entry
/// is added) so that the work of one gradient alone runs as soon as the values it needs
/// from the rest of the backward exist, and work on forward values alone as late as its
/// readers allow. In graph order a weight's gradient runs after the whole cotangent chain
/// below it, and every activation it reads and every cotangent stays live through the
/// backward; run right after its cotangent, it frees both there.
///  - A kernel serves the outputs it reaches (through the kernels reading it). One that
///    serves several (a cotangent that every earlier layer's gradients need) is shared:
///    shared kernels keep the graph order among themselves.
///  - A kernel that serves one output (a weight's gradient, a bias's sum, a convolution's
///    unfolded input that only that gradient's GEMM reads) is private: it runs right
///    after the last shared kernel its output needs (the release), or, a private kernel
///    read by later ones, just before the first of them, so an intermediate of a
///    gradient is made where it is read, not where its inputs first exist.
///  - A shared kernel that reads no backward value (a max pool's argmax over a kept
///    activation) is deferred: it runs just before its first reader. Its result is not
///    live before it is needed, nor, under a budget, the recomputed values it reads.
/// Among the kernels placed at one point the graph order stays, so the result is a
/// topological order: a private kernel depends on shared ones at or before its point and
/// on private or deferred ones placed no later; a shared kernel reads deferred ones placed
/// before it and never a private one. The cost is three walks over the backward's
/// kernels and their reads (for_each_read); the lifetimes are split again.
template <std::size_t N, std::size_t NumOutputs>
constexpr void order_backward_for_memory(const std::array<node_info, N>& table,
                                         const std::array<int, NumOutputs>& outputs, plan_data<N, NumOutputs>& plan) {
  const int first = plan.boundary, count = plan.kernel_count;
  if (NumOutputs < 3 || count - first < 3) return;  // one gradient: its kernels are all private
  constexpr int none = -1, several = -2, unplaced = 1 << 30;
  std::array<bool, N> backward{};
  for (int k = first; k < count; ++k) backward[std::size_t(plan.kernels[k])] = true;
  // The output a node serves: its index in `outputs`, `several`, or `none`; and whether
  // a backward kernel reads another backward kernel's value.
  std::array<int, N> serves{};
  for (auto& s : serves) s = none;
  auto join = [&](int node, int output) {
    int& s = serves[std::size_t(node)];
    s = s == none ? output : (output == none || s == output) ? s : several;
  };
  for (std::size_t o = 0; o < NumOutputs; ++o) join(outputs[o], int(o));
  std::array<bool, N> reads_backward{};
  for (int k = count - 1; k >= first; --k) {  // readers come after what they read
    const int root = plan.kernels[k];
    for_each_read(table, plan, root, [&](int id) {
      if (!backward[std::size_t(id)]) return;
      join(id, serves[std::size_t(root)]);
      reads_backward[std::size_t(root)] = true;
    });
  }
  // `none` cannot occur (every kernel serves an output); such a kernel would stay shared.
  auto shared = [&](int id) { return serves[std::size_t(id)] < 0; };
  auto deferred = [&](int id) {
    return shared(id) && !reads_backward[std::size_t(id)] && !plan.is_output[std::size_t(id)];
  };
  // The kept shared kernels numbered in graph order; each private kernel's release: the
  // number of the last of them it needs, directly or through private ones (-1: none).
  std::array<int, N> number{};
  int kept_count = 0;
  for (int k = first; k < count; ++k) {
    const int root = plan.kernels[k];
    if (deferred(root)) {
      number[std::size_t(root)] = -1;
    } else if (shared(root)) {
      number[std::size_t(root)] = kept_count++;
    } else {
      int release = -1;
      for_each_read(table, plan, root, [&](int id) {
        if (backward[std::size_t(id)] && number[std::size_t(id)] > release) release = number[std::size_t(id)];
      });
      number[std::size_t(root)] = release;
    }
  }
  // Slots: private and deferred kernels placed before kept shared kernel i go to slot
  // 2 i (after those of point i - 1), kept shared kernel i to slot 2 i + 1. A private
  // kernel's slot: after its release if it computes an output, else that of the first
  // private or deferred kernel reading it (never before its release); a deferred
  // kernel's: just before its first reader.
  std::array<int, N> slot{};
  for (auto& p : slot) p = unplaced;
  for (int k = count - 1; k >= first; --k) {
    const auto root = std::size_t(plan.kernels[k]);
    int mine = slot[root];
    if (deferred(int(root))) {
      if (mine == unplaced) mine = 0;
    } else if (shared(int(root))) {
      mine = 2 * number[root] + 1;
    } else {
      const int earliest = 2 * number[root] + 2;
      if (plan.is_output[root] || mine == unplaced || mine < earliest) mine = earliest;
    }
    slot[root] = mine;
    const int before = shared(int(root)) && !deferred(int(root)) ? mine - 1 : mine;  // what it reads goes there
    for_each_read(table, plan, int(root), [&](int id) {
      if (backward[std::size_t(id)] && (deferred(id) || !shared(id)) && before < slot[std::size_t(id)])
        slot[std::size_t(id)] = before;
    });
  }
  // A stable counting sort by slot keeps the graph order within a slot.
  std::array<int, 2 * N + 2> starts{};
  for (int k = first; k < count; ++k) ++starts[std::size_t(slot[std::size_t(plan.kernels[k])]) + 1];
  for (std::size_t s = 1; s < starts.size(); ++s) starts[s] += starts[s - 1];
  std::array<int, 2 * N> ordered{};
  for (int k = first; k < count; ++k)
    ordered[std::size_t(starts[std::size_t(slot[std::size_t(plan.kernels[k])])]++)] = plan.kernels[k];
  for (int k = first; k < count; ++k) plan.kernels[k] = ordered[std::size_t(k - first)];
  split_lifetimes(table, outputs, plan);
}

/// Where a node's recompute entries go: before backward kernels (positions of the plan
/// before any entry is added), at most `most_entries` of them, ascending.
template <std::size_t N>
struct entry_points {
  static constexpr int most_entries = 8;
  std::array<std::array<int, most_entries>, N> at{};
  std::array<int, N> count{};

  /// Adds positions `more` (ascending) that are at most `limit` (-1: no limit). Past
  /// most_entries it keeps the earliest (a run may need the value that soon) and the
  /// latest others.
  constexpr void add(int node, const int* more, int more_count, int limit) {
    std::array<int, 2 * most_entries> merged{};
    int n = 0, a = 0, b = 0;
    const auto& mine = at[std::size_t(node)];
    const int mine_count = count[std::size_t(node)];
    while (a < mine_count || b < more_count) {
      int next;
      if (b >= more_count || (a < mine_count && mine[std::size_t(a)] <= more[b])) next = mine[std::size_t(a++)];
      else next = more[b++];
      if (limit >= 0 && next > limit) continue;
      if (n == 0 || merged[std::size_t(n - 1)] != next) merged[std::size_t(n++)] = next;
    }
    const int skip = n > most_entries ? n - most_entries : 0;  // dropped after the earliest
    auto& out = at[std::size_t(node)];
    int m = 0;
    for (int k = 0; k < n; ++k)
      if (k == 0 || k > skip) out[std::size_t(m++)] = merged[std::size_t(k)];
    count[std::size_t(node)] = m;
  }
};

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
