// The text of program::describe(): what each kernel computes, how it loops, what it reads
// and the bytes it moves, with times and achieved bandwidth when the program was profiled.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "dot.hpp"
#include "kernels.hpp"

namespace luminal::detail {

/// One block per kernel, in run order:
///
///     kernel 4: elementwise, loop nest over (128, 28, 28, 1, 3, 3), inner loop 3
///       computes reshape f32 (100352, 9); fuses 4 views, 0 maps
///       reads param conv1.weight f32 (32, 1, 3, 3) ...
///       moves 3.90 MB; 0.412 ms per run, 9.5 GB/s
///
/// dims: the program's extents table (node_count rows of max_rank); seconds: each
/// kernel's total time over `runs` profiled runs (empty: not profiled).
template <class Layout>
std::string describe_kernels(const std::vector<index_t>& dims, const std::vector<double>& seconds, std::size_t runs) {
  using P = flat::program_of<Layout>;
  using eval = evaluator<P>;
  constexpr auto& table = Layout::table;
  constexpr auto& plan = Layout::plan;
  constexpr std::size_t node_count = Layout::node_count, max_rank = Layout::max_rank;
  std::vector<std::string> labels(node_count);
  std::vector<std::size_t> bytes(node_count);
  auto extents_text = [&](int id) {
    std::string s = "(";
    for (int k = 0; k < table[id].rank; ++k) s += (k ? ", " : "") + std::to_string(dims[id * max_rank + k]);
    return s + ")";
  };
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<node_count>>([&](auto I) {
    using N = boost::mp11::mp_at_c<typename Layout::nodes, I>;
    labels[I] = node_label<N>(" ");
    std::size_t count = 1;
    for (std::size_t k = 0; k < N::shape::rank; ++k) count *= std::size_t(dims[I * max_rank + k]);
    bytes[I] = count * sizeof(typename N::value_type);
  });
  auto megabytes = [](double b) {
    char text[32];
    if (b >= 1e6) std::snprintf(text, sizeof text, "%.2f MB", b / 1e6);
    else std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
    return std::string(text);
  };
  std::string out;
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<plan.kernel_count>>([&](auto K) {
    constexpr int root = plan.kernels[K];
    out += "kernel " + std::to_string(K) + ": ";
    double flops = 0;
    if constexpr (table[root].kind == op_kind::matmul) {
      int a = table[root].children[0], r = table[root].rank;
      double m = double(dims[root * max_rank + r - 2]), n = double(dims[root * max_rank + r - 1]);
      double k = double(dims[a * max_rank + r - 1]), batches = 1;
      for (int i = 0; i + 2 < r; ++i) batches *= double(dims[root * max_rank + i]);
      flops = 2 * m * n * k * batches;
      char text[96];
      std::snprintf(text, sizeof text, "GEMM %.0f x %.0f x %.0f, %.0f batch(es)", m, n, k, batches);
      out += text;
    } else if constexpr (table[root].kind == op_kind::exchange) {
      out += "exchange over the communicator's ranks";
    } else if constexpr (table[root].kind == op_kind::reduce) {
      int child = table[root].children[0];
      using N = typename eval::template node_t<root>;
      constexpr bool per_output = reduce_kernel<P, root>::axis >= reduce_kernel<P, root>::row;
      out += "reduction over axis " + std::to_string(N::op::axis) + " of " + extents_text(child) +
             (per_output ? ", a loop over the reduced axis per output" : ", the reduced axis added into rows of outputs");
    } else {
      using where = iteration<P, root>;
      constexpr int it = where::it;
      if constexpr (where::permute < 0 && eval::template is_flat<it, it == root>()) {
        out += "elementwise, one flat loop over " + extents_text(root);
      } else {
        constexpr std::size_t row = row_axis(typename eval::template node_t<it>::static_extents{});
        out += "elementwise, loop nest over " + extents_text(it);
        if (table[it].rank > 0) out += ", inner loop " + std::to_string(dims[it * max_rank + row]);
        if (where::permute >= 0) out += " (the permute's input; writes at a stride)";
        else if (it != root) out += " (the reshape's input)";
      }
    }
    constexpr int group_end = kernel_groups<Layout>::end[K];
    if (group_end > int(K) + 1)
      out += "; one loop with kernels " + std::to_string(K + 1) + " to " + std::to_string(group_end - 1);
    if (group_end < 0) out += "; in the loop of the kernel before";
    if constexpr (plan.is_recompute[K]) out += "; recomputes a forward value, run only if the retention policy chose to";
    out += "\n  computes " + labels[root];
    // The nodes evaluated inline and the stored values read: a walk down to stored nodes.
    std::vector<int> stack, reads;
    std::vector<bool> seen(node_count);
    int views = 0, maps = 0;
    for (int c = 0; c < table[root].child_count; ++c) stack.push_back(table[root].children[c]);
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (seen[id]) continue;
      seen[id] = true;
      if (plan.stored[id]) {
        reads.push_back(id);
        continue;
      }
      views += table[id].kind == op_kind::view;
      maps += table[id].kind == op_kind::map;
      for (int c = 0; c < table[id].child_count; ++c) stack.push_back(table[id].children[c]);
    }
    out += "; fuses " + std::to_string(views) + " views, " + std::to_string(maps) + " maps\n";
    double moved = double(bytes[root]);
    for (int id : reads) {
      out += "  reads " + labels[id] + " " + extents_text(id) + "\n";
      moved += double(bytes[id]);
    }
    out += "  moves " + megabytes(moved);
    if (!seconds.empty() && runs > 0) {
      double s = seconds[K] / double(runs);
      char text[96];
      if (flops > 0) std::snprintf(text, sizeof text, "; %.3f ms per run, %.1f GFLOP/s", 1e3 * s, flops / s / 1e9);
      else std::snprintf(text, sizeof text, "; %.3f ms per run, %.1f GB/s", 1e3 * s, moved / s / 1e9);
      out += text;
    }
    out += "\n";
  });
  return out;
}

}  // namespace luminal::detail
