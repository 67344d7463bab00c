// The embedded default backend: host memory, a thread pool, OpenBLAS for GEMM (run on
// the pool's threads, each calling single-threaded OpenBLAS: host_gemm.hpp).
#pragma once
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>

#include <luminal/core/backend.hpp>

#include "host_attention.hpp"
#include "host_gemm.hpp"
#include "host_quant.hpp"
#include "thread_pool.hpp"

namespace luminal {

/// Runs kernels on all cores of this machine; `compile<host>(y)` (the default).
struct host {
  static constexpr bool host_accessible = true;
  static constexpr const char* name = "host";
  /// Loops shorter than this run on the calling thread: waking threads costs more.
  static constexpr index_t serial_below = 1 << 15;
  /// The same for a loop of float functions (a kernel whose Body says arithmetic_bound:
  /// exp2, erf...), whose elements cost tens of cycles each: an LSTM step's gates, a few
  /// thousand elements, are worth both threads.
  static constexpr index_t serial_below_arithmetic = serial_below / 8;
  template <class Body>
  static constexpr index_t serial_limit() {
    if constexpr (requires { Body::arithmetic_bound; }) return Body::arithmetic_bound ? serial_below_arithmetic : serial_below;
    else return serial_below;
  }
  /// gemm, gemm_strided_batched and gemm_batch_sum take bf16 operands (f32 sums, host_gemm.hpp).
  static constexpr bool bf16_gemm = true;

  void* allocate(std::size_t bytes) {
    void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p) { std::free(p); }
  void to_device(void* dst, const void* src, std::size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
  void to_host(void* dst, const void* src, std::size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
  void device_copy(void* dst, const void* src, std::size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }

  template <class Body>
  void parallel_for(index_t n, const Body& body) {
    if (n <= 0) return;
    auto& pool = thread_pool::instance();
    if (n < serial_limit<Body>() || pool.size() == 1) {
      body(0, n);
      return;
    }
    pool.run(n, serial_limit<Body>() / 4,
             [](const void* b, index_t begin, index_t end) { (*static_cast<const Body*>(b))(begin, end); }, &body);
  }

  /// A reduction of `outputs` values over `extent` elements each (loop_kernels.hpp's
  /// reduce_kernel). Many outputs: each thread takes runs of outputs, in chunks sized by
  /// the work (outputs x extent), not by the output count, so that a reduction to a few
  /// thousand values of long axes (a weight gradient summed over a batch) still uses every
  /// thread. Fewer outputs than threads: each output's axis is cut across the threads and
  /// their partial results combined.
  template <class Body>
  void parallel_reduce(index_t outputs, index_t extent, const Body& body) {
    if (outputs <= 0) return;
    auto& pool = thread_pool::instance();
    const index_t threads = index_t(pool.size());
    if (threads == 1 || outputs * extent < serial_below) {
      body(0, outputs);
    } else if (outputs >= threads) {
      index_t grain = std::max<index_t>(1, serial_below / 4 / std::max<index_t>(extent, 1));
      pool.run(outputs, grain,
               [](const void* b, index_t begin, index_t end) { (*static_cast<const Body*>(b))(begin, end); }, &body);
    } else {
      using T = typename Body::value_type;
      std::array<T, 256> partial;
      const index_t parts = std::min<index_t>(threads, 256 / outputs);
      auto part = [&](index_t begin, index_t end) {
        for (index_t p = begin; p < end; ++p) {
          index_t o = p / parts, slice = p % parts;
          T acc = Body::identity();
          for (index_t k = extent * slice / parts, last = extent * (slice + 1) / parts; k < last; ++k)
            acc = Body::combine(acc, body.element(o, k));
          partial[std::size_t(p)] = acc;
        }
      };
      pool.run(outputs * parts, 1,
               [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(part)*>(f))(begin, end); },
               &part);
      for (index_t o = 0; o < outputs; ++o) {
        T acc = partial[std::size_t(o * parts)];
        for (index_t p = 1; p < parts; ++p) acc = Body::combine(acc, partial[std::size_t(o * parts + p)]);
        body.store(o, acc);
      }
    }
  }

  /// Row-major C = op(A) op(B), on the pool's threads (host_gemm.hpp).
  template <class T>
  void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda, const T* b,
            index_t ldb, T* c, index_t ldc) {
    detail::host_gemm(detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0}, 1);
  }
  /// linear with a quantized weight (ops/quantized.hpp): integer dot products on blocks.
  void quantized_matmul(quant_format format, const void* w, index_t n, index_t k, const float* x, index_t m, float* y) {
    detail::host_quantized_matmul(format, w, n, k, x, m, y);
  }
  /// gather from a quantized table (ops/quantized.hpp): whole rows dequantized.
  void dequantize_rows(quant_format format, const void* table, index_t rows, index_t k, const std::int32_t* ids,
                       index_t count, float* out) {
    detail::host_dequantize_rows(format, table, rows, k, ids, count, out);
  }
  /// cached_attention (ops/cached_attention.hpp): BLAS on blocks of queries, on the pool.
  void cached_attention(const attention_extents& e, const float* q, const float* k_past, const float* v_past,
                        const float* k_new, const float* v_new, float* y) {
    detail::host_cached_attention(e, q, k_past, v_past, k_new, v_new, y);
  }
  /// `batches` GEMMs whose operands lie at fixed strides (0: one matrix for every batch).
  template <class T>
  void gemm_strided_batched(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda,
                            index_t stride_a, const T* b, index_t ldb, index_t stride_b, T* c, index_t ldc,
                            index_t stride_c, index_t batches) {
    detail::host_gemm(detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c,
                                                 ldc, stride_c},
                      batches);
  }
  /// C = the sum over `batches` GEMMs whose operands lie at fixed strides (backend.hpp's
  /// sums_gemm_batches).
  template <class T>
  void gemm_batch_sum(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda,
                      index_t stride_a, const T* b, index_t ldb, index_t stride_b, T* c, index_t ldc, index_t batches) {
    detail::host_gemm_batch_sum(
        detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, 0}, batches);
  }
};

static_assert(backend<host>);

}  // namespace luminal
