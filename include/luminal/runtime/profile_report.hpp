// The text of program::profile(): per-kernel times, slowest first.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace luminal::detail {

/// One line per kernel (milliseconds per run, share of the total, label) under a header
/// line with the run count and the total.
///     profile_report({{0.5, "kernel 0: matmul f32 (8, 16)"}}, 10)
inline std::string profile_report(std::vector<std::pair<double, std::string>> rows, std::size_t runs) {
  double total = 0;
  for (const auto& row : rows) total += row.first;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = "luminal profile: " + std::to_string(runs) + " runs, " + std::to_string(total) +
                    " ms per run in " + std::to_string(rows.size()) + " kernels\n";
  for (const auto& [ms, label] : rows) {
    char figures[64];
    std::snprintf(figures, sizeof figures, "%10.3f ms %5.1f%%  ", ms, total > 0 ? 100.0 * ms / total : 0.0);
    out += figures + label + "\n";
  }
  return out;
}

}  // namespace luminal::detail
