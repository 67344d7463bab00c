// The quantized ops of ops/quantized.hpp on the host backend's threads: activations are
// prepared once (quantized to 16-bit blocks for the integer kernels of exec/quant_matmul.hpp),
// then each thread multiplies them by its own panels of 32 weight rows; an embedding
// lookup dequantizes whole rows. The weights are read in their blocks, never expanded.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <luminal/core/exceptions.hpp>
#include <luminal/exec/quant_matmul.hpp>

#include "thread_pool.hpp"

namespace luminal::detail {

/// Weight rows per work item: the panel kernels' height.
inline constexpr index_t host_quant_panel = 32;
/// Below this many weight bytes a product runs on the calling thread: waking a thread
/// costs more than reading them.
inline constexpr std::size_t host_quant_serial_below = 32 << 10;
/// From this many activation rows their preparation is split over the threads.
inline constexpr index_t host_quant_parallel_rows = 64;

/// y [m, n] = x [m, k] . w [n, k]^T for weights w in `format`.
inline void host_quantized_matmul(quant_format format, const void* w, index_t n, index_t k, const float* x, index_t m,
                                  float* y) {
  quant_kernel kernel = choose_quant_kernel(format, m);
  // ggml's 8-bit activations or plain f32 arithmetic instead of the default, to compare.
  if (const char* method = std::getenv("LUMINAL_QUANT_METHOD")) {
    const std::string_view name(method);
    if (name == "int8") kernel.method = quant_method::int8_dot;
    else if (name == "f32") kernel.method = quant_method::float_fma;
  }
  thread_local std::vector<unsigned char> workspace;
  workspace.resize(quant_workspace_bytes(format, m, k, kernel));
  void* prepared = workspace.data();
  auto& pool = thread_pool::instance();
  // Many activation rows: the threads prepare a share of them each.
  if (m >= host_quant_parallel_rows && pool.size() > 1) {
    auto rows = [&](index_t begin, index_t end) { prepare_activations(format, x, m, k, k, prepared, kernel, begin, end); };
    pool.run(m, 16, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(rows)*>(f))(begin, end); },
             &rows);
  } else {
    prepare_activations(format, x, m, k, k, prepared, kernel);
  }
  auto panels = [&](index_t begin, index_t end) {
    quant_matmul_rows(format, w, k, m, prepared, x, k, y, n, begin * host_quant_panel,
                      std::min(n, end * host_quant_panel), kernel);
  };
  const index_t count = (n + host_quant_panel - 1) / host_quant_panel;
  if (pool.size() == 1 || count == 1 || std::size_t(n) * row_bytes(format, std::size_t(k)) * std::size_t(m) <
                                           host_quant_serial_below) {
    panels(0, count);
    return;
  }
  pool.run(count, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(panels)*>(f))(begin, end); },
           &panels);
}

/// out [count, k] = rows ids of the table [rows, k] in `format`; throws run_error for an id
/// outside [0, rows) before writing anything.
inline void host_dequantize_rows(quant_format format, const void* table, index_t rows, index_t k,
                                 const std::int32_t* ids, index_t count, float* out) {
  for (index_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= rows)
      throw run_error("luminal: gather: index " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                      " is outside the table's " + std::to_string(rows) + " rows");
  const std::size_t stride = row_bytes(format, std::size_t(k));
  const auto* bytes = static_cast<const unsigned char*>(table);
  for (index_t i = 0; i < count; ++i)
    dequantize_row(format, bytes + std::size_t(ids[i]) * stride, out + i * k, std::size_t(k));
}

}  // namespace luminal::detail
