// What the backward keeps: one owner for every program that has a backward. The forward
// values a backward reads are kept (retention_set), or, under a retention policy, computed
// again: the fusing ones inside the backward's kernels (recompute_elementwise), or, under
// a budget, any the forward computed, by a conditional kernel (a recompute entry) that a
// run picks once per set of extents (choose_recomputation), placed where the backward
// reaches the value (pick_entries), the arena giving a recomputed buffer two lifetimes at
// one address (arena.hpp). A block (tape/block.hpp)
// keeps the values its backward program cannot compute from leaves by fusing
// (cut_points), and a training step's update computes the gradients it can so compute
// itself (recomputes_from_leaves): both by the rule of op_facts.hpp that the plan fuses by.
//
//     constexpr auto retained = detail::retention_set(table, outputs);
//     constexpr auto plan =
//         detail::plan_with_retention<retention_policy::budget{1 << 20}>(table, outputs, retained, counts, false);
//     using kept = detail::cut_points<forward_nodes, gradients>::type;   // a block's saved values
#pragma once
#include <algorithm>
#include <boost/mp11/algorithm.hpp>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arena.hpp"
#include "../core/exceptions.hpp"
#include "plan.hpp"

namespace luminal {

/// How the values the backward needs from the forward are kept.
///  - store_all: every value the backward reads gets a buffer (the default; least work);
///  - recompute_elementwise: retained values that fuse are recomputed inside the
///    backward's kernels from stored ones (matmul and reduction results);
///  - budget{bytes}: for each set of extents, the forward's buffers that stay live into
///    the backward take at most `bytes`; the backward runs the forward's kernels again
///    (GEMMs included) for the others, choosing the set that recomputes the fewest FLOPs.
///
///     auto step = compile_train_step<host, retention_policy::budget{16 << 20}>(loss, adam{});
///     step.run();
///     step.gradient_program().retained_bytes();    // at most the budget
///     step.gradient_program().recomputed_flops();  // the price
struct retention_policy {
  enum class mode { store_all, recompute_elementwise, budget };
  mode kind = mode::store_all;
  std::size_t budget_bytes = 0;

  /// retention_policy::budget{bytes}: see above.
  struct budget {
    std::size_t bytes = 0;
    constexpr operator retention_policy() const { return {mode::budget, bytes}; }  // NOLINT: a policy
  };
  static const retention_policy store_all, recompute_elementwise;
  friend constexpr bool operator==(const retention_policy&, const retention_policy&) = default;
};
inline constexpr retention_policy retention_policy::store_all{retention_policy::mode::store_all, 0};
inline constexpr retention_policy retention_policy::recompute_elementwise{retention_policy::mode::recompute_elementwise, 0};

namespace detail {

/// The retention set of a program whose first output is the forward value and whose
/// other outputs (gradients) form the backward: forward nodes that a backward-only node
/// reads directly, or, for a view it reads, the value under the view. Leaves are never
/// retained (they are bound), nor values computed from constants, extents and iota alone.
template <std::size_t N, std::size_t NumOutputs>
constexpr std::array<bool, N> retention_set(const std::array<node_info, N>& table,
                                            const std::array<int, NumOutputs>& outputs) {
  std::array<bool, N> retained{};
  if (NumOutputs < 2) return retained;
  // A value that no input reaches (a broadcast zero, a mask of iotas) is as cheap to
  // recompute as the constants it is made of: never worth a buffer.
  std::array<bool, N> from_input{};
  for (std::size_t i = 0; i < N; ++i) {
    from_input[i] = is_leaf(table[i].kind);
    for (int k = 0; k < table[i].child_count; ++k) from_input[i] = from_input[i] || from_input[table[i].children[k]];
  }
  auto forward = reachable_from(table, outputs[0]);
  // What some gradient reaches and the forward does not: one sweep from all the gradients
  // at once (parents come after children), not one per gradient, which grows with the
  // square of the depth.
  std::array<bool, N> backward{};
  for (std::size_t o = 1; o < NumOutputs; ++o) backward[std::size_t(outputs[o])] = true;
  for (std::size_t i = N; i-- > 0;)
    if (backward[i])
      for (int k = 0; k < table[i].child_count; ++k) backward[std::size_t(table[i].children[k])] = true;
  for (std::size_t i = 0; i < N; ++i) backward[i] = backward[i] && !forward[i];
  for (std::size_t j = 0; j < N; ++j)
    if (backward[j])
      for (int k = 0; k < table[j].child_count; ++k) {
        int i = table[j].children[k];
        if (!forward[i]) continue;
        // A view is kept as the value it shows: the backward reads that value through the
        // view's index map, and the forward writes it in its own loop order (a pool's
        // input is kept as the activation, not copied out window by window). So is an
        // identity map (a custom rule's node, stop_gradient: cost 0), not copied out.
        while (table[i].child_count == 1 && shows_child(table[i].kind, table[i].cost)) i = table[i].children[0];
        if (from_input[i] && !is_leaf(table[i].kind)) retained[i] = true;
      }
  return retained;
}

/// Whether node N is computed again from leaves alone as cheaply as it would be loaded:
/// a leaf, or a node that fuses (op_facts.hpp) over such nodes (a transposed weight, a
/// causal mask, rows of an embedding table picked by token ids). A block's backward
/// recomputes such values rather than keeping them, and a training step's update computes
/// such a gradient itself rather than reading it from the gradient program.
///
/// A class per node whose children's answers the compiler keeps: every gradient shares
/// the nodes of the forward pass and most of the backward. std::conjunction stops at the
/// first node that does not fuse: a fold of `&&` would instantiate every child's answer,
/// a recursion as deep as the graph (past GCC's 900 levels at 8 transformer layers).
template <class N>
struct recomputes_from_leaves;
template <class Children>
struct all_recompute_from_leaves;
template <class... C>
struct all_recompute_from_leaves<boost::mp11::mp_list<C...>> : std::conjunction<recomputes_from_leaves<C>...> {};
template <class N>
struct recomputes_from_leaves : std::conjunction<std::bool_constant<cheap_to_recompute(N::kind)>,
                                                 all_recompute_from_leaves<typename N::children>> {};

/// The values a backward computes node N from, besides leaves, where it recomputes what
/// fuses: nothing when N recomputes from leaves, N itself when it does not fuse (a
/// reduction, a matmul, an opaque op), and otherwise those of its children.
template <class N>
struct recomputed_from;
template <class N>
using recomputed_from_t = typename recomputed_from<N>::type;
template <class N>
struct recomputed_from {
  static constexpr auto pick() {
    if constexpr (recomputes_from_leaves<N>::value)
      return boost::mp11::mp_list<>{};
    else if constexpr (fuses(N::kind))
      return boost::mp11::mp_unique<boost::mp11::mp_apply<
          boost::mp11::mp_append,
          boost::mp11::mp_push_front<boost::mp11::mp_transform<recomputed_from_t, typename N::children>,
                                     boost::mp11::mp_list<>>>>{};
    else
      return boost::mp11::mp_list<N>{};
  }
  using type = decltype(pick());
};

/// A block's cut: the forward nodes (Forward, a topo_nodes list) that its backward
/// program, the gradient expressions Grads, loads rather than recomputes. For each forward
/// node the backward reads (a child of a backward-only node, or a gradient itself), the
/// values it is recomputed from (recomputed_from): what the plan fuses, the backward
/// recomputes; what it keeps apart in a kernel of its own, the block keeps. Forward order,
/// each once.
template <class Forward, class Grads>
struct cut_points {
  using backward_nodes = boost::mp11::mp_apply<topo_nodes, Grads>;
  template <class M>
  using read_by_backward = boost::mp11::mp_eval_if_c<contains<Forward, M>::value, boost::mp11::mp_list<>,
                                                     boost::mp11::mp_identity_t, typename M::children>;
  using readers = boost::mp11::mp_apply<
      boost::mp11::mp_append, boost::mp11::mp_push_front<boost::mp11::mp_transform<read_by_backward, backward_nodes>, Grads>>;
  template <class M>
  using sources_of = boost::mp11::mp_eval_if_c<!contains<Forward, M>::value, boost::mp11::mp_list<>, recomputed_from_t, M>;
  using sources = boost::mp11::mp_apply<
      boost::mp11::mp_append,
      boost::mp11::mp_push_front<boost::mp11::mp_transform<sources_of, readers>, boost::mp11::mp_list<>>>;
  template <class N>
  using is_cut = std::bool_constant<contains<sources, N>::value>;
  using type = boost::mp11::mp_filter<is_cut, Forward>;
};

/// Whether node i's buffer is the forward's to keep or recompute: a forward kernel makes
/// it and it is not an output (outputs are the caller's).
template <std::size_t N, std::size_t NumOutputs>
constexpr bool is_forward_buffer(const plan_data<N, NumOutputs>& plan, int i) {
  return !plan.is_output[i] && plan.kernel_of[i] >= 0 && plan.kernel_of[i] < plan.boundary;
}

/// The plan with recompute entries for every forward buffer the backward reads, and for
/// every forward buffer such a recomputation reads in turn. A value is needed first by
/// its first backward reader, or, where it is recomputed to recompute another, by that
/// one's entry: which, a run decides (retention_for), by what it keeps. So each node gets
/// an entry before each point where it may be needed first: just before its first
/// backward reader, and before each point of the nodes whose recomputation reads it (at
/// most entry_points::most_entries, the earliest always). A run starts each recomputed
/// value at the last of its entries that is early enough: a segment of values recomputed
/// from a kept one is recomputed where the backward reaches the segment, not at the
/// backward's start, and lives from there to its last reader.
template <std::size_t N, std::size_t NumOutputs>
constexpr plan_data<N, NumOutputs> add_recompute_entries(const std::array<node_info, N>& table,
                                                         const std::array<int, NumOutputs>& outputs,
                                                         const plan_data<N, NumOutputs>& plan) {
  if (NumOutputs < 2) return plan;
  const auto forward = reachable_from(table, outputs[0]);
  auto can_recompute = [&](int id) {
    return forward[id] && plan.stored[id] && recomputable(table[id].kind) && !plan.is_output[id];
  };
  // Readers come after what they read: each node's points are complete when it is reached.
  entry_points<N> points{};
  std::array<bool, N> candidate{};
  for (int i = int(N) - 1; i >= 0; --i) {
    if (!candidate[i] && !(plan.backward_last_use[i] >= 0 && can_recompute(i))) continue;
    candidate[i] = true;
    const int first_use = plan.backward_first_use[i];
    if (first_use >= 0) points.add(i, &first_use, 1, -1);
    for_each_read(table, plan, i, [&](int id) {
      if (!can_recompute(id)) return;
      candidate[id] = true;
      points.add(id, points.at[std::size_t(i)].data(), points.count[std::size_t(i)], plan.backward_first_use[id]);
    });
  }
  // Too many entries for the plan's arrays: the earliest of each node only.
  int entries = 0;
  for (std::size_t i = 0; i < N; ++i) entries += candidate[i] ? points.count[i] : 0;
  const bool earliest_only = plan.kernel_count + entries > int(2 * N);
  // The entries by point (a counting sort; ascending node ids within a point, so a value
  // comes before the recomputations that read it), each point's before its kernel.
  const int first = plan.boundary, span = plan.kernel_count - first + 1;
  std::array<int, N + 2> starts{};
  for (std::size_t i = 0; i < N; ++i)
    for (int e = 0; candidate[i] && e < (earliest_only ? 1 : points.count[i]); ++e)
      ++starts[std::size_t(points.at[i][std::size_t(e)] - first + 1)];
  for (int p = 1; p <= span; ++p) starts[std::size_t(p)] += starts[std::size_t(p - 1)];
  std::array<int, 2 * N> by_point{};
  auto next = starts;
  for (std::size_t i = 0; i < N; ++i)
    for (int e = 0; candidate[i] && e < (earliest_only ? 1 : points.count[i]); ++e)
      by_point[std::size_t(next[std::size_t(points.at[i][std::size_t(e)] - first)]++)] = int(i);
  plan_data<N, NumOutputs> out = plan;
  out.kernel_count = 0;
  for (int k = 0; k < plan.kernel_count; ++k) {
    if (k >= first)
      for (int e = starts[std::size_t(k - first)]; e < starts[std::size_t(k - first + 1)]; ++e) {
        out.is_recompute[std::size_t(out.kernel_count)] = true;
        out.kernels[std::size_t(out.kernel_count++)] = by_point[std::size_t(e)];
      }
    out.is_recompute[std::size_t(out.kernel_count)] = false;
    out.kernels[std::size_t(out.kernel_count++)] = plan.kernels[std::size_t(k)];
  }
  split_lifetimes(table, outputs, out);
  return out;
}

/// The plan of a program whose first output is the forward value and whose other outputs
/// (gradients) form the backward, its kernels in the order that frees memory soonest
/// (order_backward_for_memory), with what the backward keeps decided by Policy:
/// store_all stores the retention set `retained` (retention_set), recompute_elementwise
/// only what does not fuse, and a budget stores the retention set but keeps every
/// backward kernel behind the forward and adds the recompute entries a run picks from.
/// `counts`: each node's element count (hoist_into_groups); `sums_gemm_batches`: see
/// make_plan.
template <retention_policy Policy, std::size_t N, std::size_t NumOutputs>
constexpr plan_data<N, NumOutputs> plan_with_retention(const std::array<node_info, N>& table,
                                                       const std::array<int, NumOutputs>& outputs,
                                                       const std::array<bool, N>& retained,
                                                       const std::array<Dim, N>& counts, bool sums_gemm_batches) {
  constexpr bool budget = Policy.kind == retention_policy::mode::budget;
  auto planned = make_plan(
      table, outputs, Policy.kind == retention_policy::mode::recompute_elementwise ? std::array<bool, N>{} : retained,
      sums_gemm_batches);
  bool has_backward = false;  // an update program, or a forward, keeps its graph order
  for (bool r : retained) has_backward = has_backward || r;
  if (has_backward) order_backward_for_memory(table, outputs, planned);
  hoist_into_groups(table, outputs, counts, planned, budget);
  if constexpr (budget) return add_recompute_entries(table, outputs, planned);
  else return planned;
}

/// The FLOPs of the kernel computing node `id` for the given extents: 2 m n k per GEMM,
/// otherwise the node's inline cost (the scalar work of its fused tree) per element it
/// evaluates (for a reduction, per element of its input).
template <std::size_t N, std::size_t NumOutputs>
double kernel_flops(const std::array<node_info, N>& table, const plan_data<N, NumOutputs>& plan, const index_t* dims,
                    std::size_t max_rank, int id) {
  auto elements = [&](int node) {
    double n = 1;
    for (int k = 0; k < table[node].rank; ++k) n *= double(dims[std::size_t(node) * max_rank + std::size_t(k)]);
    return n;
  };
  const int gemm = plan.sums_gemm[id] ? table[id].children[0] : id;  // a GEMM summed over a batch axis
  const node_info& info = table[gemm];
  if (kernel_form_of(info.kind) == kernel_form::gemm) {
    int a = info.children[0];
    return 2 * elements(gemm) * double(dims[std::size_t(a) * max_rank + std::size_t(table[a].rank - 1)]);
  }
  if (kernel_form_of(info.kind) == kernel_form::reduction) return elements(info.children[0]) * plan.inline_cost[id];
  return elements(id) * plan.inline_cost[id];
}

/// What a run keeps and recomputes for one set of extents.
struct recompute_choice {
  std::vector<bool> recompute;     // by node id: its recompute entry runs
  std::size_t retained_bytes = 0;  // forward buffers live into the backward
  double recomputed_flops = 0;
  bool exact = true;               // false: the search stopped at its limit (best found kept)
  std::vector<int> last_recompute_read;  // by node id: the last running recompute entry reading it, or -1
  std::vector<int> entry;                // by node id: the recompute entry that runs, or -1

  /// Whether kernel k, a recompute entry of node `id`, runs.
  bool runs(int k, int id) const { return entry[std::size_t(id)] == k; }
};

/// Bytes of the forward's buffers that stay live into the backward when the nodes marked
/// in `recompute` are recomputed there: the buffers a backward kernel or a running
/// recompute entry reads, less the recomputed ones (outputs, the caller's, not counted).
template <std::size_t N, std::size_t NumOutputs>
std::size_t kept_bytes(const plan_data<N, NumOutputs>& plan, const std::vector<double>& bytes,
                       const std::vector<bool>& recompute) {
  std::vector<bool> needed(N);
  for (std::size_t i = 0; i < N; ++i) needed[i] = plan.backward_last_use[i] >= 0;
  for (int r = 0; r < plan.recompute_read_count; ++r)
    if (recompute[std::size_t(plan.recompute_reads[r][0])]) needed[std::size_t(plan.recompute_reads[r][1])] = true;
  double total = 0;
  for (std::size_t i = 0; i < N; ++i)
    if (needed[i] && !recompute[i] && is_forward_buffer(plan, int(i))) total += bytes[i];
  return std::size_t(total);
}

/// The recompute entries to run under a budget of `budget` bytes: the set with the fewest
/// recomputed FLOPs whose kept bytes fit, by branch and bound over the candidates from the
/// last forward kernel back (a buffer a recomputation reads is decided after it). The
/// bounds: kept bytes and recomputed FLOPs only grow along a branch. The search stops
/// after `step_limit` branches with the best set found (exact = false); throws
/// input_error when nothing fits.
template <std::size_t N, std::size_t NumOutputs>
recompute_choice choose_recomputation(const plan_data<N, NumOutputs>& plan, const std::vector<double>& bytes,
                                      const std::vector<double>& flops, std::size_t budget,
                                      long step_limit = 1L << 22) {
  std::vector<int> candidates;
  for (int i = int(N) - 1; i >= 0; --i)
    if (plan.recompute_entry[i] >= 0) candidates.push_back(i);
  std::vector<std::vector<int>> reads(N);
  for (int r = 0; r < plan.recompute_read_count; ++r)
    reads[std::size_t(plan.recompute_reads[r][0])].push_back(plan.recompute_reads[r][1]);
  std::vector<int> demand(N, 0);  // recomputations chosen so far that read node i
  double kept = 0;
  for (std::size_t i = 0; i < N; ++i)
    if (plan.backward_last_use[i] >= 0 && plan.recompute_entry[i] < 0 && is_forward_buffer(plan, int(i))) kept += bytes[i];
  std::vector<bool> current(N), best;
  double best_flops = 0;
  bool found = false, exact = true;
  long steps = 0;
  auto search = [&](auto&& self, std::size_t next, double kept_bytes, double work) -> void {
    if (kept_bytes > double(budget) || (found && work >= best_flops)) return;
    if (++steps > step_limit) { exact = false; return; }
    if (next == candidates.size()) {
      best = current, best_flops = work, found = true;
      return;
    }
    const int u = candidates[next];
    if (plan.backward_last_use[u] < 0 && demand[u] == 0) return self(self, next + 1, kept_bytes, work);
    self(self, next + 1, kept_bytes + bytes[u], work);  // keep it
    double added = 0;                                     // or recompute it
    for (int r : reads[u])
      if (demand[r]++ == 0 && plan.backward_last_use[r] < 0 && plan.recompute_entry[r] < 0 && is_forward_buffer(plan, r))
        added += bytes[r];
    current[u] = true;
    self(self, next + 1, kept_bytes + added, work + flops[u]);
    current[u] = false;
    for (int r : reads[u]) --demand[r];
  };
  search(search, 0, kept, 0.0);
  if (!found) {
    std::vector<bool> all(N);
    for (int u : candidates) all[u] = true;
    throw input_error("luminal: retention_policy::budget of " + std::to_string(budget) +
                      " bytes cannot be met at these extents: even recomputing every forward value it can, "
                      "the backward keeps " + std::to_string(kept_bytes(plan, bytes, all)) + " bytes");
  }
  return {best, kept_bytes(plan, bytes, best), best_flops, exact, {}, {}};
}

/// Bytes of node `id`'s value for the extents table `dims` (rows of max_rank).
template <std::size_t N>
double node_bytes(const std::array<node_info, N>& table, const index_t* dims, std::size_t max_rank, int id) {
  double count = table[id].element_bytes;
  for (int k = 0; k < table[id].rank; ++k) count *= double(dims[std::size_t(id) * max_rank + std::size_t(k)]);
  return count;
}

/// Per node of program Layout, for the extents table `dims`: its value's bytes, and the
/// FLOPs of its recompute entry (0 without one).
template <class Layout>
std::pair<std::vector<double>, std::vector<double>> node_costs(const std::vector<index_t>& dims) {
  constexpr std::size_t n = Layout::node_count;
  std::vector<double> bytes(n), flops(n);
  for (std::size_t i = 0; i < n; ++i) {
    bytes[i] = node_bytes(Layout::table, dims.data(), Layout::max_rank, int(i));
    if (Layout::plan.recompute_entry[i] >= 0)
      flops[i] = kernel_flops(Layout::table, Layout::plan, dims.data(), Layout::max_rank, int(i));
  }
  return {std::move(bytes), std::move(flops)};
}

/// A buffer of the arena (every stored node but the inputs, which the caller binds) and
/// the kernels that use it: made by kernel `made`, read by the forward until
/// `forward_end` and by the backward until `backward_end` (-1: never), computed again at
/// the earliest by kernel `again` (-1: it has no recompute entry; a run's choice says
/// which entry runs).
struct buffer_span {
  int id = 0, made = 0, forward_end = 0, backward_end = -1, again = -1;
  bool forward_buffer = false;  // is_forward_buffer: retention counts it
};
template <std::size_t N, std::size_t NumOutputs>
constexpr std::size_t arena_buffer_count(const std::array<node_info, N>& table, const plan_data<N, NumOutputs>& plan) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < N; ++i) count += plan.stored[i] && !is_leaf(table[i].kind);
  return count;
}
/// The buffer_spans of a plan, by node id; program_layout::buffers holds them.
template <std::size_t Count, std::size_t N, std::size_t NumOutputs>
constexpr std::array<buffer_span, Count> arena_buffers(const std::array<node_info, N>& table,
                                                       const plan_data<N, NumOutputs>& plan) {
  std::array<buffer_span, Count> spans{};
  std::size_t j = 0;
  for (int i = 0; i < int(N); ++i) {
    if (!plan.stored[i] || is_leaf(table[i].kind)) continue;
    const int made = plan.kernel_of[i];
    spans[j++] = {i, made, std::max(made, plan.forward_last_use[i]), plan.backward_last_use[i], plan.recompute_entry[i],
                  is_forward_buffer(plan, i)};
  }
  return spans;
}

/// Which entry of each recomputed node runs (choice.entry) and the last running entry
/// that reads each node (choice.last_recompute_read). A node is needed first by its first
/// backward reader or by the running entry of a recomputed node reading it, whichever
/// comes first; its entry is the last before that (add_recompute_entries put one there,
/// or earlier). Readers are decided first: they have the larger ids.
template <std::size_t N, std::size_t NumOutputs>
void pick_entries(const plan_data<N, NumOutputs>& plan, recompute_choice& choice) {
  std::vector<std::vector<int>> entries(N), reads(N);
  for (int k = 0; k < plan.kernel_count; ++k)
    if (plan.is_recompute[std::size_t(k)]) entries[std::size_t(plan.kernels[std::size_t(k)])].push_back(k);
  for (int r = 0; r < plan.recompute_read_count; ++r)
    reads[std::size_t(plan.recompute_reads[std::size_t(r)][0])].push_back(plan.recompute_reads[std::size_t(r)][1]);
  choice.entry.assign(N, -1);
  choice.last_recompute_read.assign(N, -1);
  std::vector<int> needed(N, plan.kernel_count);
  for (std::size_t i = N; i-- > 0;) {
    if (!choice.recompute[i]) continue;
    const int first_use = plan.backward_first_use[i];
    const int need = first_use >= 0 && first_use < needed[i] ? first_use : needed[i];
    for (int k : entries[i])
      if (k < need) choice.entry[i] = k;
    if (choice.entry[i] < 0) throw std::logic_error("luminal: a recomputed value has no recompute entry early enough");
    for (int id : reads[i]) {
      needed[std::size_t(id)] = std::min(needed[std::size_t(id)], choice.entry[i]);
      choice.last_recompute_read[std::size_t(id)] = std::max(choice.last_recompute_read[std::size_t(id)], choice.entry[i]);
    }
  }
}

/// What program Layout keeps and recomputes for the extents table `dims`: under a budget
/// the cheapest set that fits (choose_recomputation); otherwise it runs no recompute
/// entries and `recompute` and `last_recompute_read` stay empty.
template <class Layout>
recompute_choice retention_for(const std::vector<index_t>& dims) {
  constexpr auto& table = Layout::table;
  recompute_choice choice;
  if constexpr (Layout::has_recompute_entries) {
    constexpr auto& plan = Layout::plan;
    auto [bytes, flops] = node_costs<Layout>(dims);
    choice = choose_recomputation(plan, bytes, flops, Layout::policy.budget_bytes);
    pick_entries(plan, choice);
  } else {
    double kept = 0;
    for (const buffer_span& s : Layout::buffers)
      if (s.forward_buffer && s.backward_end >= 0) kept += node_bytes(table, dims.data(), Layout::max_rank, s.id);
    choice.retained_bytes = std::size_t(kept);
  }
  return choice;
}

/// Sets the kernels during which buffer `s` holds its value under `choice` (a recomputed
/// value has two lifetimes), each widened by `widen` (first, last) to the loops that run
/// several kernels as one.
inline void set_lifetimes(const recompute_choice& choice, const buffer_span& s, buffer_request& r,
                          std::pair<int, int> (*widen)(int, int)) {
  const auto id = std::size_t(s.id);
  const bool recomputed = !choice.recompute.empty() && choice.recompute[id];
  const int backward_end =
      choice.last_recompute_read.empty() ? s.backward_end : std::max(s.backward_end, choice.last_recompute_read[id]);
  if (recomputed) {
    std::tie(r.first_kernel, r.last_kernel) = widen(s.made, s.forward_end);
    const int again = choice.entry.empty() ? s.again : choice.entry[id];
    std::tie(r.first_again, r.last_again) = widen(again, std::max(again, backward_end));
  } else {
    std::tie(r.first_kernel, r.last_kernel) = widen(s.made, std::max(s.forward_end, backward_end));
  }
}

}  // namespace detail
}  // namespace luminal
