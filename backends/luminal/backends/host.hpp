// The embedded default backend: host memory, a thread pool, OpenBLAS for GEMM.
#pragma once
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include <luminal/backend.hpp>

#include "thread_pool.hpp"

namespace luminal {

/// Runs kernels on all cores of this machine; `compile<host>(y)` (the default).
struct host {
  static constexpr bool host_accessible = true;
  static constexpr const char* name = "host";
  /// Loops shorter than this run on the calling thread: waking threads costs more.
  static constexpr index_t serial_below = 1 << 15;

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
    if (n < serial_below || pool.size() == 1) {
      body(0, n);
      return;
    }
    pool.run(n, serial_below / 4,
             [](const void* b, index_t begin, index_t end) { (*static_cast<const Body*>(b))(begin, end); }, &body);
  }

  void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const float* a, index_t lda,
            const float* b, index_t ldb, float* c, index_t ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(ldc));
  }
  void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const double* a, index_t lda,
            const double* b, index_t ldb, double* c, index_t ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), 0.0, c, int(ldc));
  }
};

static_assert(backend<host>);

}  // namespace luminal
