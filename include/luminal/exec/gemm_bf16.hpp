// A single-threaded row-major GEMM of bf16 operands, accumulated in f32:
//
//     C = op(A) op(B) + beta C      (op: transposed or not; A m x k, B k x n after op)
//
// with C either f32 or bf16 (each bf16 element rounded once, by bf16(float), from its f32
// sum). On a CPU with AVX512_BF16 it runs on vdpbf16ps (two bf16 products per f32 lane
// per instruction); elsewhere on a portable f32 loop (gemm_bf16_portable). beta 0 ignores
// what C holds (NaN included).
//
//     luminal::gemm_bf16(false, true, m, n, k, a, lda, b, ldb, c_bf16, ldc);        // C = A B^T
//     luminal::gemm_bf16(true, false, m, n, k, a, lda, b, ldb, c_f32, ldc, 1.0f);   // C += A^T B
//
// The AVX-512 kernel, as BLIS and ggml lay it out: op(B) is packed into panels of 32
// columns whose k is cut into pairs ([k/2][32 columns][2]: one vdpbf16ps operand per 16
// columns of a pair), op(A) is read in place (transposed: packed as B is) as rows of pairs
// broadcast as 32-bit words, and an 8 x 32 micro-kernel keeps 16 zmm accumulators over
// the whole of k (k is not blocked: each tile's sum ends in registers, rounded once).
// Odd k and edge tiles are padded with zeros. Every call packs into buffers of its own
// thread (thread_local): calls on different threads are independent.
//
// Precision: each f32 lane adds two exact bf16 products per step, so the sum carries f32
// rounding as a sequential f32 dot product does, in another order. vdpbf16ps flushes
// denormals to zero (its inputs and outputs, whatever MXCSR says), so bf16 inputs below
// 2^-126 count as 0 there, and the portable path keeps them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/half_types.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__)
#define LUMINAL_GEMM_BF16_HAVE_AVX512 1
#include <immintrin.h>
#define LUMINAL_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#endif

namespace luminal {

namespace gemm_bf16_detail {

/// Element (i, p) of op(X) for X row-major with leading dimension ld.
inline float at(const bf16* x, bool trans, index_t ld, index_t i, index_t p) {
  return float(trans ? x[p * ld + i] : x[i * ld + p]);
}

/// *c = sum + beta *c in Out (beta 0: *c is not read).
template <class Out>
inline void store(Out* c, float sum, float beta) {
  const float v = beta == 0.0f ? sum : sum + beta * float(*c);
  if constexpr (std::is_same_v<Out, bf16>) *c = bf16(v);
  else *c = v;
}

/// Throws std::invalid_argument for a negative extent or a leading dimension shorter than
/// its row (BLAS's conditions).
inline void check_arguments(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, index_t lda, index_t ldb,
                            index_t ldc) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("gemm_bf16: " + what); };
  if (m < 0 || n < 0 || k < 0)
    fail("negative extent (m, n, k) = (" + std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) +
         ")");
  if (lda < (trans_a ? m : k)) fail("lda " + std::to_string(lda) + " is shorter than a row of A");
  if (ldb < (trans_b ? k : n)) fail("ldb " + std::to_string(ldb) + " is shorter than a row of B");
  if (ldc < n) fail("ldc " + std::to_string(ldc) + " is shorter than a row of C (n = " + std::to_string(n) + ")");
}

/// A buffer of `count` elements at a 64-byte boundary, this thread's, reused by later calls.
template <class T, int Slot>
inline T* scratch(std::size_t count) {
  static thread_local std::vector<T> elements;
  constexpr std::size_t per_line = 64 / sizeof(T);
  if (elements.size() < count + per_line) elements.resize(count + per_line);
  const auto address = reinterpret_cast<std::uintptr_t>(elements.data());
  return elements.data() + ((64 - address % 64) % 64) / sizeof(T);
}

}  // namespace gemm_bf16_detail

/// The portable path of gemm_bf16 (any CPU): op(B) widened to f32 once, then each row of C
/// summed in f32 over p in order, in loops GCC vectorizes. Denormals are kept.
template <class Out>
void gemm_bf16_portable(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const bf16* a, index_t lda,
                        const bf16* b, index_t ldb, Out* c, index_t ldc, float beta = 0.0f) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>, "gemm_bf16 writes C as float or bf16");
  gemm_bf16_detail::check_arguments(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  // f32 scratch: op(B) k x n, then one row of op(A) and one row of sums.
  float* wide = gemm_bf16_detail::scratch<float, 0>(std::size_t(k * n + k + n));
  float* row_a = wide + k * n;
  float* sums = row_a + k;
  for (index_t p = 0; p < k; ++p)
    for (index_t j = 0; j < n; ++j) wide[p * n + j] = gemm_bf16_detail::at(b, trans_b, ldb, p, j);
  for (index_t i = 0; i < m; ++i) {
    for (index_t p = 0; p < k; ++p) row_a[p] = gemm_bf16_detail::at(a, trans_a, lda, i, p);
    std::fill(sums, sums + n, 0.0f);
    for (index_t p = 0; p < k; ++p) {
      const float x = row_a[p];
      const float* bp = wide + p * n;
      for (index_t j = 0; j < n; ++j) sums[j] += x * bp[j];
    }
    for (index_t j = 0; j < n; ++j) gemm_bf16_detail::store(c + i * ldc + j, sums[j], beta);
  }
}

#ifdef LUMINAL_GEMM_BF16_HAVE_AVX512
// GCC's AVX-512 intrinsics start masked operations from _mm512_undefined_*(), which -O1
// reports as uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace gemm_bf16_avx512 {

// The micro-kernel's tile: 8 rows x 32 columns, 16 zmm accumulators (enough to cover
// vdpbf16ps's latency at one per cycle), 2 loads of B and 8 broadcasts of A per pair of k.
// Of the tiles tried (benchmarks/RESULTS.md), it was the fastest on large products, its
// 16-column edge tiles waste least on a narrow n, and taller ones spill registers.
inline constexpr int rows = 8;                  // MR: rows of C per tile, one broadcast each
inline constexpr int vectors = 2;               // zmm per row of the tile
inline constexpr int columns = 16 * vectors;    // NR
/// Packed op(B) kept within about half of a Zen 4 / Skylake-SP L2 (1 MB), read from there
/// by every row panel.
inline constexpr std::size_t packed_b_bytes = 512 * 1024;

/// Whether this CPU runs the AVX512_BF16 kernel.
inline bool supported() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma");
  return yes;
}

/// Transposes 16 rows of 16 32-bit words (row j's word q to row q's word j): 32-bit, then
/// 64-bit interleaves within 128-bit lanes, then two rounds of lane shuffles.
LUMINAL_TARGET_AVX512_BF16 inline void transpose_16x16(__m512i (&r)[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // r[4g + q], lane L: word 4L + q of rows 4g .. 4g + 3
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    t[q] = _mm512_shuffle_i32x4(r[q], r[4 + q], 0x88);
    t[4 + q] = _mm512_shuffle_i32x4(r[q], r[4 + q], 0xdd);
    t[8 + q] = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0x88);
    t[12 + q] = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0xdd);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm512_shuffle_i32x4(t[q], t[8 + q], 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(t[q], t[8 + q], 0xdd);
    r[4 + q] = _mm512_shuffle_i32x4(t[4 + q], t[12 + q], 0x88);
    r[12 + q] = _mm512_shuffle_i32x4(t[4 + q], t[12 + q], 0xdd);
  }
}

/// Columns [j0, j0 + cols) of op(B) (cols <= width, a multiple of 16) as one panel
/// [pairs][width][2], zeros past cols and past k.
LUMINAL_TARGET_AVX512_BF16 inline void pack_panel(bool trans_b, index_t k, const bf16* b, index_t ldb, index_t j0,
                                                  index_t cols, index_t width, std::uint32_t* out) {
  const index_t pairs = (k + 1) / 2;
  const auto* bits = reinterpret_cast<const std::uint16_t*>(b);
  if (!trans_b) {
    // Rows 2p and 2p+1 of B interleaved, 16 columns (one vector of pairs) at a time.
    alignas(64) std::uint16_t order[32];  // word 2i: row 2p's column i (low half); 2i + 1: row 2p + 1's
    for (int i = 0; i < 16; ++i) order[2 * i] = std::uint16_t(i), order[2 * i + 1] = std::uint16_t(16 + i);
    const __m512i interleave = _mm512_load_si512(order);
    for (index_t c0 = 0; c0 < width; c0 += 16) {
      const index_t n_here = std::clamp<index_t>(cols - c0, 0, 16);
      const __mmask16 mask = __mmask16((1u << n_here) - 1);
      for (index_t p = 0; p < pairs; ++p) {
        const std::uint16_t* r0 = bits + (2 * p) * ldb + j0 + c0;
        const __m256i even = _mm256_maskz_loadu_epi16(mask, r0);
        const __m256i odd = 2 * p + 1 < k ? _mm256_maskz_loadu_epi16(mask, r0 + ldb) : _mm256_setzero_si256();
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
        _mm512_store_si512(out + p * width + c0, _mm512_permutexvar_epi16(interleave, both));
      }
    }
    return;
  }
  // B^T: column j of op(B) is row j of B, whose pairs are already 32-bit words: blocks of
  // 16 rows x 16 pairs transposed.
  const index_t whole = k / 2;
  for (index_t c0 = 0; c0 < width; c0 += 16) {
    const index_t rows_here = std::clamp<index_t>(cols - c0, 0, 16);
    const std::uint16_t* first = bits + (j0 + c0) * ldb;
    for (index_t p0 = 0; p0 < whole; p0 += 16) {
      const index_t words = std::min<index_t>(16, whole - p0);
      const __mmask16 mask = __mmask16((1u << words) - 1);
      __m512i block[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        block[j] = j < rows_here ? _mm512_maskz_loadu_epi32(mask, first + j * ldb + 2 * p0) : _mm512_setzero_si512();
      transpose_16x16(block);
      for (index_t q = 0; q < words; ++q) _mm512_store_si512(out + (p0 + q) * width + c0, block[q]);
    }
    if (k % 2) {  // the last pair: an odd k's last element and a zero
      std::uint32_t* dst = out + whole * width + c0;
      for (index_t j = 0; j < 16; ++j) dst[j] = j < rows_here ? first[j * ldb + k - 1] : 0u;
    }
  }
}

/// f32 to bf16 bits as bf16(float) rounds (nearest even; NaN to 0xFFFF), 16 lanes.
LUMINAL_TARGET_AVX512_BF16 inline __m256i round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0xffff));
  return _mm512_cvtepi32_epi16(r);
}

/// The pair of bf16 at p broadcast to every 32-bit lane.
[[gnu::always_inline]] LUMINAL_TARGET_AVX512_BF16 inline __m512i pair_word(const std::uint16_t* p) {
  std::int32_t w;
  std::memcpy(&w, p, 4);
  return _mm512_set1_epi32(w);
}

/// One pair of k: every row's broadcast pair times the panel's first 16 * NV column pairs.
template <int NV>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512_BF16 inline void step(__m512 (&acc)[rows][vectors],
                                                                   const std::uint32_t* bp,
                                                                   const __m512i (&xs)[rows]) {
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const __m512bh bv = (__m512bh)_mm512_load_si512(bp + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < rows; ++r) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)xs[r], bv);
  }
}

/// C[0..valid_rows)[0..valid_cols) (+)= the rows x 16 NV tile of rows a_row[r] times one
/// packed panel. Row r's pair p is the 32-bit word at a_row[r] + p * a_step; with
/// `odd_tail`, one more step multiplies a_row[r][pairs * a_step] alone (an odd k's last
/// element, not followed by a zero in A's own rows).
template <class Out, int NV>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512_BF16 inline void micro_kernel(index_t pairs, bool odd_tail,
                                                                           const std::uint16_t* const* a_row,
                                                                           index_t a_step,
                                                                           const std::uint32_t* panel, Out* c,
                                                                           index_t ldc, int valid_rows, int valid_cols,
                                                                           float beta) {
  __m512 acc[rows][vectors];
#pragma GCC unroll 16
  for (int r = 0; r < rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < vectors; ++v) acc[r][v] = _mm512_setzero_ps();
  const std::uint16_t* a_at[rows];
#pragma GCC unroll 16
  for (int r = 0; r < rows; ++r) a_at[r] = a_row[r];
#pragma GCC unroll 2
  for (index_t p = 0; p < pairs; ++p) {
    __m512i xs[rows];
#pragma GCC unroll 16
    for (int r = 0; r < rows; ++r) xs[r] = pair_word(a_at[r] + p * a_step);
    step<NV>(acc, panel + p * columns, xs);
  }
  if (odd_tail) {
    __m512i xs[rows];
#pragma GCC unroll 16
    for (int r = 0; r < rows; ++r) xs[r] = _mm512_set1_epi32(a_at[r][pairs * a_step]);
    step<NV>(acc, panel + pairs * columns, xs);
  }
  const __m512 scale = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < rows; ++r) {
    if (r >= valid_rows) break;
    Out* row = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int left = valid_cols - 16 * v;
      if (left <= 0) break;
      const __mmask16 mask = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      if constexpr (std::is_same_v<Out, float>) {
        __m512 sum = acc[r][v];
        if (beta != 0.0f) sum = _mm512_fmadd_ps(scale, _mm512_maskz_loadu_ps(mask, row + 16 * v), sum);
        _mm512_mask_storeu_ps(row + 16 * v, mask, sum);
      } else {
        __m512 sum = acc[r][v];
        if (beta != 0.0f) {
          const __m256i old = _mm256_maskz_loadu_epi16(mask, row + 16 * v);
          const __m512 wide = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(old), 16));
          sum = _mm512_fmadd_ps(scale, wide, sum);
        }
        _mm256_mask_storeu_epi16(row + 16 * v, mask, round_to_bf16(sum));
      }
    }
  }
}

/// micro_kernel on the fewest vectors (NV or more) that hold `needed` of them.
template <class Out, int NV>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512_BF16 inline void tile_with(int needed, index_t pairs, bool odd_tail,
                                                                        const std::uint16_t* const* a_row,
                                                                        index_t a_step, const std::uint32_t* panel,
                                                                        Out* c, index_t ldc, int valid_rows,
                                                                        int valid_cols, float beta) {
  if constexpr (NV < vectors) {
    if (needed > NV) {
      tile_with<Out, NV + 1>(needed, pairs, odd_tail, a_row, a_step, panel, c, ldc, valid_rows, valid_cols, beta);
      return;
    }
  }
  micro_kernel<Out, NV>(pairs, odd_tail, a_row, a_step, panel, c, ldc, valid_rows, valid_cols, beta);
}

/// gemm_bf16 on AVX512_BF16 (call only where supported() holds).
template <class Out>
LUMINAL_TARGET_AVX512_BF16 void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const bf16* a,
                                     index_t lda, const bf16* b, index_t ldb, Out* c, index_t ldc, float beta) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, bf16>, "gemm_bf16 writes C as float or bf16");
  if (m <= 0 || n <= 0) return;
  const index_t pairs = (k + 1) / 2;
  // Columns per packed block: as many panels as fit packed_b_bytes.
  const index_t panel_words = std::max<index_t>(pairs, 1) * columns;
  const index_t block_panels =
      std::max<index_t>(1, index_t(packed_b_bytes / (4 * std::size_t(panel_words))));
  const index_t n_panels = (n + columns - 1) / columns;
  const index_t panels_per_block = std::min(block_panels, n_panels);
  std::uint32_t* packed_b = gemm_bf16_detail::scratch<std::uint32_t, 1>(std::size_t(panels_per_block * panel_words));
  // A^T is packed once, as B is, in panels of 16 rows of op(A) ([pairs][16][2]): a tile's
  // rows read half of each 64-byte line.
  constexpr index_t a_width = 16;
  const index_t a_panels = trans_a ? (m + a_width - 1) / a_width : 0, a_panel_words = pairs * a_width;
  std::uint32_t* packed_a =
      trans_a ? gemm_bf16_detail::scratch<std::uint32_t, 2>(std::size_t(a_panels * a_panel_words)) : nullptr;
  for (index_t q = 0; q < a_panels; ++q)
    pack_panel(false, k, a, lda, q * a_width, std::min<index_t>(a_width, m - q * a_width), a_width,
               packed_a + q * a_panel_words);
  const auto* a_bits = reinterpret_cast<const std::uint16_t*>(a);
  const index_t a_step = trans_a ? 2 * a_width : 2;
  const index_t whole_pairs = trans_a ? pairs : k / 2;
  const bool odd_tail = !trans_a && k % 2;
  for (index_t jc = 0; jc < n; jc += panels_per_block * columns) {
    const index_t nc = std::min(n - jc, panels_per_block * columns);
    const index_t panels = (nc + columns - 1) / columns;
    for (index_t q = 0; q < panels; ++q)
      pack_panel(trans_b, k, b, ldb, jc + q * columns, std::min<index_t>(columns, nc - q * columns), columns,
                 packed_b + q * panel_words);
    for (index_t i0 = 0; i0 < m; i0 += rows) {
      const int valid_rows = int(std::min<index_t>(rows, m - i0));
      const std::uint16_t* a_row[rows];
      for (int r = 0; r < rows; ++r) {
        const index_t i = i0 + std::min(r, valid_rows - 1);  // rows past m repeat the last
        a_row[r] = trans_a ? reinterpret_cast<const std::uint16_t*>(packed_a + (i / a_width) * a_panel_words) +
                                 2 * (i % a_width)
                           : a_bits + i * lda;
      }
      for (index_t q = 0; q < panels; ++q) {
        const index_t j0 = jc + q * columns;
        const int valid_cols = int(std::min<index_t>(columns, n - j0));
        Out* tile = c + i0 * ldc + j0;
        // An edge panel runs only the vectors that hold its columns.
        tile_with<Out, 1>((valid_cols + 15) / 16, whole_pairs, odd_tail, a_row, a_step, packed_b + q * panel_words,
                          tile, ldc, valid_rows, valid_cols, beta);
      }
    }
  }
}

}  // namespace gemm_bf16_avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/// Whether gemm_bf16 runs on AVX512_BF16 here (else on gemm_bf16_portable).
inline bool gemm_bf16_native() {
#ifdef LUMINAL_GEMM_BF16_HAVE_AVX512
  return gemm_bf16_avx512::supported();
#else
  return false;
#endif
}

/// C = op(A) op(B) + beta C, row-major, single-threaded; C is float or bf16 (see the
/// file's comment). beta 0 ignores C's contents. Throws std::invalid_argument for a
/// negative extent or a leading dimension shorter than its row.
template <class Out>
void gemm_bf16(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const bf16* a, index_t lda, const bf16* b,
               index_t ldb, Out* c, index_t ldc, float beta = 0.0f) {
#ifdef LUMINAL_GEMM_BF16_HAVE_AVX512
  if (gemm_bf16_avx512::supported()) {
    gemm_bf16_detail::check_arguments(trans_a, trans_b, m, n, k, lda, ldb, ldc);
    gemm_bf16_avx512::gemm<Out>(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta);
    return;
  }
#endif
  gemm_bf16_portable<Out>(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, beta);
}

}  // namespace luminal
