// GEMMs on the host backend's own threads: each thread calls single-threaded OpenBLAS on
// its part of the output (whole matrices of a batch, or blocks of rows or columns of one
// matrix). One pool runs every kernel of a program: OpenBLAS's own threads would spin
// after each GEMM (OpenBLAS waits for the next call before sleeping) while the pool's
// elementwise kernels need the same cores, and a batch of small GEMMs (a convolution's
// per-image products) would pay a thread launch per matrix.
//
// bf16 operands run exec/gemm_bf16.hpp's kernel (vdpbf16ps, f32 sums) where the CPU has
// AVX512_BF16, elsewhere OpenBLAS's sgemm on f32 copies (host_gemm_bf16_widened); a summed
// batch of them is summed in f32 and rounded to bf16 once.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <vector>

#include <luminal/core/half_types.hpp>
#include <luminal/exec/gemm_bf16.hpp>

#include "thread_pool.hpp"

namespace luminal::detail {

/// gemm_bf16's contract (C float or bf16, f32 sums, beta 0 or 1) on any CPU through
/// single-threaded sgemm: the operands widened to f32 (exact), the product rounded once.
template <class Out>
void host_gemm_bf16_widened(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const bf16* a, index_t lda,
                            const bf16* b, index_t ldb, Out* c, index_t ldc, float beta = 0.0f) {
  if (m <= 0 || n <= 0) return;
  static thread_local std::vector<float> wide_a, wide_b, wide_c;
  // op(X) as a dense f32 matrix of `rows` x `cols` (stored rows x cols, leading dimension cols).
  auto widen = [](std::vector<float>& out, const bf16* x, index_t ld, index_t rows, index_t cols) {
    out.resize(std::size_t(std::max<index_t>(rows * cols, 1)));
    for (index_t r = 0; r < rows; ++r)
      for (index_t j = 0; j < cols; ++j) out[std::size_t(r * cols + j)] = float(x[r * ld + j]);
  };
  widen(wide_a, a, lda, trans_a ? k : m, trans_a ? m : k);
  widen(wide_b, b, ldb, trans_b ? n : k, trans_b ? k : n);
  const int la = int(std::max<index_t>(trans_a ? m : k, 1)), lb = int(std::max<index_t>(trans_b ? k : n, 1));
  auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<Out, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, wide_a.data(), la, wide_b.data(), lb, beta, c,
                int(ldc));
  } else {
    wide_c.resize(std::size_t(m * n));
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) wide_c[std::size_t(i * n + j)] = beta == 0.0f ? 0.0f : float(c[i * ldc + j]);
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, wide_a.data(), la, wide_b.data(), lb, beta,
                wide_c.data(), int(n));
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) c[i * ldc + j] = bf16(wide_c[std::size_t(i * n + j)]);
  }
}

/// One single-threaded bf16 GEMM: the AVX512_BF16 kernel where the CPU has it, else sgemm.
template <class Out>
void host_gemm_bf16(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const bf16* a, index_t lda,
                    const bf16* b, index_t ldb, Out* c, index_t ldc, float beta) {
  if (gemm_bf16_native()) gemm_bf16<Out>(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta);
  else host_gemm_bf16_widened<Out>(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta);
}

/// Row-major C[b] = op(A[b]) op(B[b]) for b < batches, A[b] = a + b * stride_a (likewise
/// B, C); a stride of 0 repeats one matrix.
template <class T>
struct host_gemm_batch {
  bool trans_a, trans_b;
  index_t m, n, k;
  const T* a;
  index_t lda, stride_a;
  const T* b;
  index_t ldb, stride_b;
  T* c;
  index_t ldc, stride_c;

  /// One call of single-threaded BLAS on rows [row0, row1) and columns [col0, col1) of
  /// C[batch], or, with `into`, of the matrix at `into` (leading dimension ldc) instead;
  /// `beta` 1 adds the product to what is there.
  void block(index_t batch, index_t row0, index_t row1, index_t col0, index_t col1, T beta = T(0),
             T* into = nullptr) const {
    const T* ap = a + batch * stride_a + (trans_a ? row0 : row0 * lda);
    const T* bp = b + batch * stride_b + (trans_b ? col0 * ldb : col0);
    T* cp = (into ? into : c + batch * stride_c) + row0 * ldc + col0;
    auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, bf16>)
      host_gemm_bf16<bf16>(trans_a, trans_b, row1 - row0, col1 - col0, k, ap, lda, bp, ldb, cp, ldc, float(beta));
    else if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, int(row1 - row0), int(col1 - col0), int(k), 1.0f, ap, int(lda), bp, int(ldb),
                  beta, cp, int(ldc));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, int(row1 - row0), int(col1 - col0), int(k), 1.0, ap, int(lda), bp, int(ldb),
                  beta, cp, int(ldc));
  }

  /// bf16 only: as block(), into the f32 matrix `into` (leading dimension ld_into), whose
  /// element (0, 0) is C's (row0, col0); `beta` 1 adds to the f32 sums there.
  void block_f32(index_t batch, index_t row0, index_t row1, index_t col0, index_t col1, float beta, float* into,
                 index_t ld_into) const {
    static_assert(std::is_same_v<T, bf16>, "block_f32 is the bf16 GEMM's f32 sum");
    const T* ap = a + batch * stride_a + (trans_a ? row0 : row0 * lda);
    const T* bp = b + batch * stride_b + (trans_b ? col0 * ldb : col0);
    host_gemm_bf16<float>(trans_a, trans_b, row1 - row0, col1 - col0, k, ap, lda, bp, ldb, into, ld_into, beta);
  }
};

/// Work items of a batched GEMM for `threads` threads: whole matrices when the batch
/// alone keeps every thread busy, else each matrix cut into `parts` blocks along its
/// longer side (rows or columns), in multiples of 16 so that BLAS's micro-kernels see
/// full tiles.
struct gemm_split {
  index_t parts = 1;
  bool by_rows = true;
  index_t block = 0;  // rows or columns per part
};
inline gemm_split split_gemm(index_t batches, index_t m, index_t n, unsigned threads) {
  gemm_split s;
  s.by_rows = m >= n;
  index_t side = s.by_rows ? m : n;
  if (batches >= index_t(threads) || threads <= 1) {
    s.block = side;
    return s;
  }
  index_t wanted = (index_t(threads) + batches - 1) / batches;
  s.block = std::max<index_t>(16, (side + wanted - 1) / wanted + 15) / 16 * 16;
  s.parts = (side + s.block - 1) / s.block;
  return s;
}

/// Below this many multiply-adds a GEMM runs on the calling thread.
inline constexpr double host_gemm_serial_below = 1 << 18;

/// OpenBLAS's own threads stay at one: the pool parallelizes. Done once per process, when
/// a GEMM first runs.
inline void single_threaded_blas() {
#ifdef OPENBLAS_VERSION
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
#endif
}

/// `pool`: the threads that share the work, anything with thread_pool's size() and
/// run(n, grain, fn, body) (the Kokkos backend passes its host execution space).
template <class T, class Pool = thread_pool>
void host_gemm(const host_gemm_batch<T>& g, index_t batches, Pool& pool = thread_pool::instance()) {
  single_threaded_blas();
  double work = double(g.m) * double(g.n) * double(g.k) * double(batches);
  gemm_split s = split_gemm(batches, g.m, g.n, pool.size());
  index_t items = batches * s.parts;
  auto run_items = [&](index_t begin, index_t end) {
    for (index_t item = begin; item < end; ++item) {
      index_t batch = item / s.parts, part = item % s.parts;
      index_t first = part * s.block, last = std::min((s.by_rows ? g.m : g.n), first + s.block);
      if (s.by_rows) g.block(batch, first, last, 0, g.n);
      else g.block(batch, 0, g.m, first, last);
    }
  };
  if (pool.size() == 1 || items == 1 || work < host_gemm_serial_below) {
    run_items(0, items);
    return;
  }
  pool.run(items, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(run_items)*>(f))(begin, end); },
           &run_items);
}

/// C = the sum over b < batches of op(A[b]) op(B[b]) (g.stride_c unused). Each thread
/// sums a run of batches with BLAS's beta = 1, the first into C and the others into
/// matrices of their own, added into C at the end: the sum stays in the cache while it
/// grows, and no product is written out per batch. Fewer batches than threads: C is cut
/// into blocks as in host_gemm, each summed over every batch.
template <class T, class Pool = thread_pool>
void host_gemm_batch_sum(const host_gemm_batch<T>& g, index_t batches, Pool& pool = thread_pool::instance()) {
  single_threaded_blas();
  const index_t threads = index_t(pool.size());
  const double work = double(g.m) * double(g.n) * double(g.k) * double(batches);
  auto sum_batches = [&](index_t first, index_t last, index_t row0, index_t row1, index_t col0, index_t col1, T* into) {
    for (index_t batch = first; batch < last; ++batch) g.block(batch, row0, row1, col0, col1, T(batch > first), into);
  };
  if (threads == 1 || work < host_gemm_serial_below) {
    sum_batches(0, batches, 0, g.m, 0, g.n, g.c);
    return;
  }
  if (batches >= threads) {
    const std::size_t matrix = std::size_t(g.m * g.ldc);
    static thread_local std::vector<T> partial;  // the calling thread's, reused by later steps
    partial.resize(matrix * std::size_t(threads - 1));
    T* const scratch = partial.data();  // the pool's threads each have a `partial` of their own
    auto run_parts = [&](index_t begin, index_t end) {
      for (index_t part = begin; part < end; ++part)
        sum_batches(batches * part / threads, batches * (part + 1) / threads, 0, g.m, 0, g.n,
                    part == 0 ? g.c : scratch + matrix * std::size_t(part - 1));
    };
    pool.run(threads, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(run_parts)*>(f))(begin, end); },
             &run_parts);
    for (index_t part = 1; part < threads; ++part) {
      const T* add = scratch + matrix * std::size_t(part - 1);
      for (index_t row = 0; row < g.m; ++row)
        for (index_t col = 0; col < g.n; ++col) g.c[row * g.ldc + col] += add[row * g.ldc + col];
    }
    return;
  }
  const gemm_split s = split_gemm(1, g.m, g.n, unsigned(threads));
  auto run_blocks = [&](index_t begin, index_t end) {
    for (index_t part = begin; part < end; ++part) {
      index_t first = part * s.block, last = std::min(s.by_rows ? g.m : g.n, first + s.block);
      if (s.by_rows) sum_batches(0, batches, first, last, 0, g.n, g.c);
      else sum_batches(0, batches, 0, g.m, first, last, g.c);
    }
  };
  pool.run(s.parts, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(run_blocks)*>(f))(begin, end); },
           &run_blocks);
}

/// host_gemm_batch_sum for bf16: the whole sum in f32 (the product of each batch added with
/// beta 1 into f32 sums), rounded to bf16 once at the end; shared out as the f32 one is.
template <class Pool = thread_pool>
void host_gemm_batch_sum(const host_gemm_batch<bf16>& g, index_t batches, Pool& pool = thread_pool::instance()) {
  single_threaded_blas();
  const index_t threads = index_t(pool.size());
  const double work = double(g.m) * double(g.n) * double(g.k) * double(batches);
  const std::size_t matrix = std::size_t(g.m * g.n);  // an f32 sum of C, leading dimension n
  static thread_local std::vector<float> sums;        // the calling thread's, reused by later steps
  // Batches [first, last) of the block at (row0, col0) summed into `into` (its origin).
  auto sum_batches = [&](index_t first, index_t last, index_t row0, index_t row1, index_t col0, index_t col1,
                         float* into) {
    for (index_t row = row0; first == last && row < row1; ++row)
      std::fill(into + (row - row0) * g.n, into + (row - row0) * g.n + (col1 - col0), 0.0f);
    for (index_t batch = first; batch < last; ++batch)
      g.block_f32(batch, row0, row1, col0, col1, batch > first ? 1.0f : 0.0f, into, g.n);
  };
  auto round_block = [&](const float* from, index_t row0, index_t row1, index_t col0, index_t col1) {
    for (index_t row = row0; row < row1; ++row)
      for (index_t col = col0; col < col1; ++col) g.c[row * g.ldc + col] = bf16(from[row * g.n + col]);
  };
  if (threads == 1 || work < host_gemm_serial_below) {
    sums.resize(matrix);
    sum_batches(0, batches, 0, g.m, 0, g.n, sums.data());
    round_block(sums.data(), 0, g.m, 0, g.n);
    return;
  }
  if (batches >= threads) {
    sums.resize(matrix * std::size_t(threads));
    float* const scratch = sums.data();  // one f32 sum per part
    auto run_parts = [&](index_t begin, index_t end) {
      for (index_t part = begin; part < end; ++part)
        sum_batches(batches * part / threads, batches * (part + 1) / threads, 0, g.m, 0, g.n,
                    scratch + matrix * std::size_t(part));
    };
    pool.run(threads, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(run_parts)*>(f))(begin, end); },
             &run_parts);
    for (index_t part = 1; part < threads; ++part) {
      const float* add = scratch + matrix * std::size_t(part);
      for (std::size_t i = 0; i < matrix; ++i) scratch[i] += add[i];
    }
    round_block(scratch, 0, g.m, 0, g.n);
    return;
  }
  sums.resize(matrix);
  float* const scratch = sums.data();  // blocks of it, one per part
  const gemm_split s = split_gemm(1, g.m, g.n, unsigned(threads));
  auto run_blocks = [&](index_t begin, index_t end) {
    for (index_t part = begin; part < end; ++part) {
      const index_t first = part * s.block, last = std::min(s.by_rows ? g.m : g.n, first + s.block);
      const index_t row0 = s.by_rows ? first : 0, row1 = s.by_rows ? last : g.m;
      const index_t col0 = s.by_rows ? 0 : first, col1 = s.by_rows ? g.n : last;
      sum_batches(0, batches, row0, row1, col0, col1, scratch + row0 * g.n + col0);
      round_block(scratch, row0, row1, col0, col1);
    }
  };
  pool.run(s.parts, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(run_blocks)*>(f))(begin, end); },
           &run_blocks);
}

}  // namespace luminal::detail
