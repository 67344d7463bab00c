// The text of program::describe(): what each kernel computes, how it loops, what it reads
// and the bytes it moves, with times and achieved bandwidth when the program was profiled.
#pragma once
#include <array>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "../exec/kernels.hpp"
#include "../core/node_labels.hpp"

namespace luminal::detail {

/// Each kernel's milliseconds per run and its label, "<prefix>kernel k: <node>", in run
/// order: the rows of program::profile().
template <class Layout>
std::vector<std::pair<double, std::string>> kernel_time_rows(const std::vector<double>& seconds, std::size_t runs,
                                                             std::string_view prefix) {
  constexpr auto& plan = Layout::plan;
  std::vector<std::pair<double, std::string>> rows;
  for (std::size_t k = 0; k < std::size_t(plan.kernel_count); ++k) {
    std::string label = format_label(node_labels<typename Layout::nodes>[std::size_t(plan.kernels[k])], " ");
    double ms = runs ? 1e3 * seconds[k] / double(runs) : 0.0;
    rows.emplace_back(ms, std::string(prefix) + "kernel " + std::to_string(k) + ": " + label);
  }
  return rows;
}

/// How kernel K loops, where that takes the kernel's types to tell: the compile-time half
/// of its description, one entry of a table (consteval: no code, no symbols).
struct kernel_loop {
  int it = -1;                // elementwise: the node whose extents the loop nest runs over
  bool split = false;         // elementwise: `it` is the input of a reshape that splits the root's axes
  int permute = -1;           // elementwise: a permute whose input the nest runs over, or -1
  bool flat = false;          // elementwise: one flat loop
  int row = 0;                // elementwise: the inner loop's axis
  bool wide = false;          // elementwise: applies a float function, compiled for the widest vectors
  bool narrow = false;        // elementwise: short rows in short blocks, compiled for 128-bit vectors
  bool per_output = false;    // reduction: a loop over the reduced axis per output
  int reduce_axis = 0;
};

template <class P, class Layout, int K>
consteval kernel_loop kernel_loop_of() {
  constexpr int root = Layout::plan.kernels[K];
  constexpr kernel_form form = kernel_form_of(Layout::table[root].kind);
  kernel_loop loop;
  if constexpr (form == kernel_form::reduction) {
    loop.per_output = reduce_kernel<P, root>::axis >= reduce_kernel<P, root>::row;
    loop.reduce_axis = int(reduce_kernel<P, root>::axis);
  } else if constexpr (form == kernel_form::elementwise) {
    using where = iteration<P, root>;
    constexpr int it = where::it;
    loop.it = where::loop;
    loop.split = where::split >= 0 && !where::merges;  // a merging reshape's input is "the reshape's input"
    loop.permute = where::permute;
    if constexpr (where::permute < 0) loop.flat = detail::evaluates_flat<P, it, it == root>::value;
    loop.row = int(row_axis(typename node_at<typename P::nodes, where::loop>::static_extents{}));
#ifdef LUMINAL_VECTOR_WIDTHS
    loop.wide = elementwise_kernel<P, root>::arithmetic_bound;
    loop.narrow = !loop.wide && elementwise_kernel<P, root>::short_blocks;
#endif
  }
  return loop;
}

template <class Layout, std::size_t... K>
consteval std::array<kernel_loop, sizeof...(K)> kernel_loops(std::index_sequence<K...>) {
  return {kernel_loop_of<flat::graph_of<Layout>, Layout, int(K)>()...};
}

/// One block per kernel, in run order:
///
///     kernel 4: elementwise, loop nest over (128, 28, 28, 1, 3, 3), inner loop 3
///       computes reshape f32 (100352, 9); fuses 4 views, 0 maps
///       reads param conv1.weight f32 (32, 1, 3, 3) ...
///       moves 3.90 MB; 0.412 ms per run, 9.5 GB/s
///
/// Kernels that run as one loop are timed together: the first prints the group's time and
/// bytes, the others "timed with kernel K".
/// dims: the program's extents table (node_count rows of max_rank); seconds: each
/// kernel's total time over `runs` profiled runs (empty: not profiled). One loop over
/// the kernels, reading constant tables: a function per kernel would name the program.
template <class Layout>
std::string describe_kernels(const std::vector<index_t>& dims, const std::vector<double>& seconds, std::size_t runs) {
  constexpr auto& table = Layout::table;
  constexpr auto& plan = Layout::plan;
  constexpr auto& labels_of = node_labels<typename Layout::nodes>;
  static constexpr auto loops = kernel_loops<Layout>(std::make_index_sequence<plan.kernel_count>{});
  constexpr std::size_t node_count = Layout::node_count, max_rank = Layout::max_rank;
  std::vector<std::string> labels(node_count);
  std::vector<double> bytes(node_count);
  auto extents_text = [&](int id) {
    return extents_in_parentheses({dims.data() + std::size_t(id) * max_rank, std::size_t(table[id].rank)});
  };
  for (std::size_t i = 0; i < node_count; ++i) {
    labels[i] = format_label(labels_of[i], " ");
    bytes[i] = node_bytes(table, dims.data(), max_rank, int(i));
  }
  auto megabytes = [](double b) {
    char text[32];
    if (b >= 1e6) std::snprintf(text, sizeof text, "%.2f MB", b / 1e6);
    else std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
    return std::string(text);
  };
  // The nodes a kernel evaluates inline and the stored values it reads: a walk from its
  // root down to stored nodes.
  struct stored_reads {
    std::vector<int> reads;
    int views = 0, maps = 0;
  };
  auto walk = [&](int root) {
    stored_reads r;
    std::vector<int> stack;
    std::vector<bool> seen(node_count);
    for (int c = 0; c < table[root].child_count; ++c) stack.push_back(table[root].children[c]);
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (seen[std::size_t(id)]) continue;
      seen[std::size_t(id)] = true;
      if (plan.stored[id]) {
        r.reads.push_back(id);
        continue;
      }
      r.views += child_reads_of(table[id].kind) == child_reads::remapped;
      r.maps += child_reads_of(table[id].kind) == child_reads::same_place;
      for (int c = 0; c < table[id].child_count; ++c) stack.push_back(table[id].children[c]);
    }
    return r;
  };
  std::string out;
  for (std::size_t K = 0; K < plan.kernel_count; ++K) {
    const int root = plan.kernels[K];
    const kernel_loop& loop = loops[K];
    out += "kernel " + std::to_string(K) + ": ";
    double flops = 0;
    const kernel_form form = kernel_form_of(table[root].kind);
    if (form == kernel_form::gemm || plan.sums_gemm[root]) {
      const int gemm = plan.sums_gemm[root] ? table[root].children[0] : root;
      int a = table[gemm].children[0], r = table[gemm].rank;
      double m = double(dims[gemm * max_rank + r - 2]), n = double(dims[gemm * max_rank + r - 1]);
      double k = double(dims[a * max_rank + r - 1]), batches = 1;
      for (int i = 0; i + 2 < r; ++i) batches *= double(dims[gemm * max_rank + i]);
      flops = 2 * m * n * k * batches;
      char text[128];
      if (gemm == root) {
        std::snprintf(text, sizeof text, "GEMM %.0f x %.0f x %.0f, %.0f batch(es)", m, n, k, batches);
      } else {
        const int axis = table[root].summed_axis;
        std::snprintf(text, sizeof text, "GEMM %.0f x %.0f x %.0f, %.0f batch(es) summed over axis %d (%.0f of them)",
                      m, n, k, batches, axis, double(dims[gemm * max_rank + axis]));
      }
      out += text;
    } else if (form == kernel_form::own) {
      out += "the op's own kernel: " + labels[std::size_t(root)];
    } else if (form == kernel_form::reduction) {
      int child = table[root].children[0];
      out += "reduction over axis " + std::to_string(loop.reduce_axis) + " of " + extents_text(child) +
             (loop.per_output ? ", a loop over the reduced axis per output"
                              : ", the reduced axis added into rows of outputs");
    } else if (loop.flat) {
      out += "elementwise, one flat loop over " + extents_text(root);
    } else {
      const int it = loop.it;
      out += "elementwise, loop nest over " + extents_text(it);
      if (table[it].rank > 0) out += ", inner loop " + std::to_string(dims[std::size_t(it) * max_rank + std::size_t(loop.row)]);
      if (loop.permute >= 0) out += " (the permute's input; writes at a stride)";
      if (loop.split) out += " (the axes a reshape under it splits)";
      else if (it != root) out += " (the reshape's input)";
    }
    if (loop.wide) out += "; bound by a float function's arithmetic: 512-bit vectors where the CPU has them";
    if (loop.narrow) out += "; short rows in short blocks: 128-bit vectors, 4 rows a step";
    const int group_end = kernel_groups<Layout>::end[K];
    const auto& segment_end = kernel_groups<Layout>::segment_end;
    if (group_end > int(K) + 1) {
      const int segments = kernel_groups<Layout>::segment_count(int(K));
      if (segments == 1) {
        out += "; one loop with kernels " + std::to_string(K + 1) + " to " + std::to_string(group_end - 1);
      } else {
        out += "; one launch with kernels " + std::to_string(K + 1) + " to " + std::to_string(group_end - 1) + ", as " +
               std::to_string(segments) + " loops over their own elements";
        if (segment_end[K] > int(K) + 1)
          out += ", this one with kernels " + std::to_string(K + 1) + " to " + std::to_string(segment_end[K] - 1);
      }
    }
    if (group_end < 0 && segment_end[K] > 0) {
      out += "; a loop of its own in the launch of kernel " + std::to_string(kernel_groups<Layout>::first_of(int(K)));
      if (segment_end[K] > int(K) + 1)
        out += ", with kernels " + std::to_string(K + 1) + " to " + std::to_string(segment_end[K] - 1);
    }
    if (group_end < 0 && segment_end[K] < 0) out += "; in the loop of the kernel before";
    const bool stays = kernel_groups<Layout>::stays_in_group(int(K));
    if (stays) out += "; on the CPU its result stays in the cache, read only by the loop";
    if (plan.is_recompute[K]) out += "; recomputes a forward value, run only if the retention policy chose to";
    out += "\n  computes " + labels[root];
    const stored_reads r = walk(root);
    out += "; fuses " + std::to_string(r.views) + " views, " + std::to_string(r.maps) + " maps\n";
    double moved = stays ? 0.0 : bytes[root];
    for (int id : r.reads) {
      out += "  reads " + labels[id] + " " + extents_text(id) + "\n";
      const int producer = plan.kernel_of[std::size_t(id)];
      if (producer < 0 || !kernel_groups<Layout>::stays_in_group(producer)) moved += bytes[id];
    }
    out += "  moves " + megabytes(moved);
    // A group's time is its first kernel's, for the bytes of every kernel in it: each
    // result written once, and each value read that no kernel of the group wrote.
    if (group_end > int(K) + 1) {
      std::vector<bool> in_group(node_count), counted(node_count);
      for (int g = int(K); g < group_end; ++g) in_group[std::size_t(plan.kernels[g])] = true;
      moved = 0;
      for (int g = int(K); g < group_end; ++g) {
        if (!kernel_groups<Layout>::stays_in_group(g)) moved += bytes[std::size_t(plan.kernels[g])];
        for (int id : walk(plan.kernels[g]).reads)
          if (!in_group[std::size_t(id)] && !counted[std::size_t(id)]) {
            counted[std::size_t(id)] = true;
            moved += bytes[std::size_t(id)];
          }
      }
      out += ", the group " + megabytes(moved);
    }
    if (group_end < 0) {
      out += "; timed with kernel " + std::to_string(kernel_groups<Layout>::first_of(int(K)));
    } else if (!seconds.empty() && runs > 0) {
      double s = seconds[K] / double(runs);
      char text[96];
      if (flops > 0) std::snprintf(text, sizeof text, "; %.3f ms per run, %.1f GFLOP/s", 1e3 * s, flops / s / 1e9);
      else std::snprintf(text, sizeof text, "; %.3f ms per run, %.1f GB/s", 1e3 * s, moved / s / 1e9);
      out += text;
    }
    out += "\n";
  }
  return out;
}

}  // namespace luminal::detail
