// AVX-512 kernels of the quantized matmul's int16_dot method: activations as int16 quants
// per 32-element block plus, in the blocks that hold an outlier, a residual (x ~= d * (q +
// r / 128), see quant_activations.hpp), multiplied with vpdpwssd (16 x 16-bit products
// summed in 32 bits). The row kernel (small M) reads each weight block once per group of up
// to 4 activation rows on 256-bit vectors, and folds a wide block's residual into the same
// integer (q . w * 128 + r . w). The panel kernel (large M) unpacks 32 weight rows into int16
// pairs and multiplies them by tiles of activation rows; a second pass adds the residuals of
// the wide blocks. Results are within about 1e-5 of sum |x w| of the exact product, at twice
// the products per instruction of f32 FMAs.
//
//     quant_avx512::quantize_activations_int16(x, ldx, acts, 0, M);
//     quant_avx512::int16_matmul(quant_format::q4_1, quant_tiling::panels, w, row_bytes, acts, y, ldy, n0, n1);
#pragma once
#include "quant_avx512_int8.hpp"
#if defined(LUMINAL_QUANT_HAVE_AVX512)

LUMINAL_QUANT_KERNELS_BEGIN

namespace luminal::quant_avx512 {

// ---------------------------------------------------------------------------------------
// Activations
// ---------------------------------------------------------------------------------------

/// The 16 lanes of v summed in block_sum's order (halves folded onto each other).
LUMINAL_TARGET_AVX512 inline float fold_sum(__m512 v) {
  const __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

/// Prepares rows [m_begin, m_end) of x for int16_dot, bit for bit as
/// quant_detail::prepare_activations_scalar does for finite x.
LUMINAL_TARGET_AVX512 inline void quantize_activations_int16(const float* x, std::int64_t ldx,
                                                             const quant_activations& a, std::int64_t m_begin,
                                                             std::int64_t m_end) {
  const __m512 sign_bit = _mm512_set1_ps(-0.0f), infinity = _mm512_set1_ps(INFINITY);
  const __m512 steps = _mm512_set1_ps(quant_detail::residual_steps);
  const __m512i q_low = _mm512_set1_epi32(-32767), q_high = _mm512_set1_epi32(32767);
  const __m512i r_low = _mm512_set1_epi32(-64), r_high = _mm512_set1_epi32(64);
  for (std::int64_t m = m_begin; m < m_end; ++m) {
    const float* row = x + m * ldx;
    __m512 lanes = _mm512_setzero_ps();
    for (std::int64_t b = 0; b < a.blocks; ++b)
      lanes = _mm512_add_ps(lanes, _mm512_add_ps(_mm512_andnot_ps(sign_bit, _mm512_loadu_ps(row + 32 * b)),
                                                 _mm512_andnot_ps(sign_bit, _mm512_loadu_ps(row + 32 * b + 16))));
    const float threshold = quant_detail::wide_block_fraction * fold_sum(lanes);
    for (std::int64_t b = 0; b < a.blocks; ++b) {
      const std::int64_t at = m * a.blocks + b;
      const __m512 v[2] = {_mm512_loadu_ps(row + 32 * b), _mm512_loadu_ps(row + 32 * b + 16)};
      const float amax =
          _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign_bit, v[0]), _mm512_andnot_ps(sign_bit, v[1])));
      const float d = amax * (1.0f / 32767.0f);
      const __m512 inverse = _mm512_set1_ps(d != 0.0f ? 32767.0f / amax : 0.0f);
      __m512i q_sum = _mm512_setzero_si512(), r_sum = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512 scaled = _mm512_mul_ps(v[h], inverse);
        const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign_bit, scaled), infinity, _CMP_LT_OQ);
        const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_maskz_cvtps_epi32(finite, scaled), q_low), q_high);
        const __m512 rest = _mm512_maskz_fmsub_ps(finite, v[h], inverse, _mm512_cvtepi32_ps(q));
        const __m512i r =
            _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(rest, steps)), r_low), r_high);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q16 + m * a.q_stride + 32 * b + 16 * h),
                            _mm512_cvtsepi32_epi16(q));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.r16 + m * a.q_stride + 32 * b + 16 * h),
                            _mm512_cvtsepi32_epi16(r));
        q_sum = _mm512_add_epi32(q_sum, q);
        r_sum = _mm512_add_epi32(r_sum, r);
      }
      const bool wide = !(amax <= threshold);
      a.d(at) = d;
      a.s(at) = quant_detail::int16_block_sum(d, _mm512_reduce_add_epi32(q_sum) * std::int32_t(quant_detail::residual_steps),
                                              _mm512_reduce_add_epi32(r_sum), wide);
      a.wide[b * a.M + m] = wide;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Row kernel (small M): 256-bit vectors, one weight row at a time
// ---------------------------------------------------------------------------------------

/// One block of a weight row, unpacked: its quants as signed int16 (elements 0..15 and
/// 16..31; Q4_0's as q - 8) and (d, m) as f32 in lanes 0 and 1 (lane 1 only for Q4_1).
struct int16_row_block_weights {
  __m256i low, high;
  __m128 dm;
};

template <quant_format F>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512 inline int16_row_block_weights unpack_int16_block(
    const unsigned char* block) {
  int16_row_block_weights w;
  w.dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load_i32(block)));
  if constexpr (F == quant_format::q8_0) {
    w.low = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    w.high = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)));
  } else {
    const __m256i words = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + quants_at(F))));
    w.low = _mm256_and_si256(words, _mm256_set1_epi16(15));
    w.high = _mm256_srli_epi16(words, 4);
    if constexpr (F == quant_format::q4_0) {
      w.low = _mm256_sub_epi16(w.low, _mm256_set1_epi16(8));
      w.high = _mm256_sub_epi16(w.high, _mm256_set1_epi16(8));
    }
  }
  return w;
}

/// Adds block b of one weight row times activation rows m0 .. m0 + R to acc (lanes of
/// d_w d_x q . w, or in a wide block d_w d_x / 128 (q . w * 128 + r . w), the integer
/// converted once) and, for Q4_1, to offsets (lane 1: m s_x).
template <quant_format F, int R>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512 inline void int16_row_block(const unsigned char* block, std::int64_t b,
                                                                         const quant_activations& a, std::int64_t m0,
                                                                         __m256* acc, __m128* offsets) {
  const int16_row_block_weights w = unpack_int16_block<F>(block);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const std::int64_t at = (m0 + r) * a.blocks + b;
    const std::int16_t* q = a.q16 + (m0 + r) * a.q_stride + 32 * b;
    const std::int16_t* rq = a.r16 + (m0 + r) * a.q_stride + 32 * b;
    __m256i dot = _mm256_madd_epi16(w.low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    dot = _mm256_dpwssd_epi32(dot, w.high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16)));
    const __m128 products = _mm_mul_ps(w.dm, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&a.d(at)))));
    __m256 scale = _mm256_broadcastss_ps(products);
    if (a.wide[b * a.M + m0 + r]) {  // q . w * 128 + r . w, which stays below 2^31
      __m256i rest = _mm256_madd_epi16(w.low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rq)));
      rest = _mm256_dpwssd_epi32(rest, w.high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rq + 16)));
      dot = _mm256_add_epi32(_mm256_slli_epi32(dot, quant_detail::residual_bits), rest);
      scale = _mm256_mul_ps(scale, _mm256_set1_ps(1.0f / quant_detail::residual_steps));
    }
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[r]);
    if constexpr (F == quant_format::q4_1) offsets[r] = _mm_add_ps(offsets[r], products);
  }
}

template <quant_format F, int R>
LUMINAL_TARGET_AVX512 void int16_row_group(const unsigned char* w, const quant_activations& a, std::int64_t m0,
                                           float* y, std::int64_t ldy) {
  constexpr int block_bytes = block_bytes_of(F);
  __m256 even[R], odd[R];
  __m128 even_offsets[R], odd_offsets[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    even[r] = odd[r] = _mm256_setzero_ps();
    even_offsets[r] = odd_offsets[r] = _mm_setzero_ps();
  }
  std::int64_t b = 0;
  for (; b + 2 <= a.blocks; b += 2) {
    int16_row_block<F, R>(w + b * block_bytes, b, a, m0, even, even_offsets);
    int16_row_block<F, R>(w + (b + 1) * block_bytes, b + 1, a, m0, odd, odd_offsets);
  }
  if (b < a.blocks) int16_row_block<F, R>(w + b * block_bytes, b, a, m0, even, even_offsets);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    y[r * ldy] = sum_lanes(_mm256_add_ps(even[r], odd[r])) +
                 _mm_cvtss_f32(_mm_movehdup_ps(_mm_add_ps(even_offsets[r], odd_offsets[r])));
}

template <quant_format F>
LUMINAL_TARGET_AVX512 void int16_rows_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                         float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t n = n_begin; n < n_end; ++n)
    quant_kernels::for_each_tile<4>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
      int16_row_group<F, R>(w + n * row_bytes, a, m, y + m * ldy + n, ldy);
    });
}

// ---------------------------------------------------------------------------------------
// Panel kernel (large M)
// ---------------------------------------------------------------------------------------

inline constexpr int int16_panel_blocks = 8;  // blocks of K per packed chunk: 16 KiB of quants

/// 32 weight rows x up to 8 blocks: for block b and element pair t (elements 2t, 2t + 1),
/// 128 bytes hold the pair of rows 0..31 as int16, so that one vpdpwssd multiplies 16 rows
/// by one broadcast pair of activations (Q4_0's quants as q - 8). d and m are the rows'
/// scales and Q4_1's offsets.
struct int16_panel {
  alignas(64) std::int16_t q[int16_panel_blocks * 16 * 64];
  alignas(64) float d[int16_panel_blocks * panel_rows];
  alignas(64) float m[int16_panel_blocks * panel_rows];
};

/// Transposes 16 vectors of 16 dwords in place: v[i] lane j becomes v[j] lane i.
LUMINAL_TARGET_AVX512 inline void transpose_16x16(__m512i* v) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) {
      v[i + 2 * j] = _mm512_unpacklo_epi64(t[i + j], t[i + j + 2]);
      v[i + 2 * j + 1] = _mm512_unpackhi_epi64(t[i + j], t[i + j + 2]);
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_i32x4(v[i + j], v[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(v[i + j], v[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    v[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    v[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

/// Unpacks `rows` (<= 32) weight rows x nb blocks from block b0 into the panel, 16 rows at a
/// time: each row's block becomes 16 pairs of int16, and a 16 x 16 transposition puts pair t
/// of the 16 rows side by side (zeros for rows past `rows`).
template <quant_format F>
LUMINAL_TARGET_AVX512 void pack_int16_panel(const unsigned char* w, std::int64_t row_bytes, int rows,
                                            std::int64_t b0, int nb, int16_panel& p) {
  constexpr int block_bytes = block_bytes_of(F);
  for (int half = 0; half < 2; ++half) {
    for (int b = 0; b < nb; ++b) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i) {
        const int r = 16 * half + i;
        float d = 0.0f, m = 0.0f;
        if (r < rows) {
          const unsigned char* block = w + r * row_bytes + (b0 + b) * block_bytes;
          const __m512i q = F == quant_format::q8_0
                                ? _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)))
                                : _mm512_cvtepu8_epi16(unpack_nibbles(block + quants_at(F)));
          v[i] = F == quant_format::q4_0 ? _mm512_sub_epi16(q, _mm512_set1_epi16(8)) : q;
          d = load_half(block);
          m = F == quant_format::q4_1 ? load_half(block + 2) : 0.0f;
        } else {
          v[i] = _mm512_setzero_si512();
        }
        p.d[b * panel_rows + r] = d;
        p.m[b * panel_rows + r] = m;
      }
      transpose_16x16(v);
      for (int t = 0; t < 16; ++t) _mm512_store_si512(p.q + (b * 16 + t) * 64 + half * 32, v[t]);
    }
  }
}

/// y[m0 + r, n0 .. n0 + 32) (+)= the panel's nb blocks times activation rows m0 .. m0 + R,
/// without the residuals.
template <quant_format F, int R>
LUMINAL_TARGET_AVX512 void int16_panel_tile(const int16_panel& p, int nb, const quant_activations& a,
                                            std::int64_t m0, std::int64_t b0, float* y, std::int64_t ldy,
                                            __mmask16 mask0, __mmask16 mask1, bool accumulate) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const std::int16_t* q = a.q16 + m0 * a.q_stride + b0 * 32;
  const std::int64_t first = m0 * a.blocks + b0;
  for (int b = 0; b < nb; ++b) {
    __m512i dot[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
    const std::int16_t* pq = p.q + b * 16 * 64;
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      const __m512i w0 = _mm512_load_si512(pq + t * 64), w1 = _mm512_load_si512(pq + t * 64 + 32);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i xq = _mm512_set1_epi32(load_i32(q + r * a.q_stride + b * 32 + 2 * t));
        dot[r][0] = _mm512_dpwssd_epi32(dot[r][0], w0, xq);
        dot[r][1] = _mm512_dpwssd_epi32(dot[r][1], w1, xq);
      }
    }
    const __m512 d0 = _mm512_load_ps(p.d + b * panel_rows), d1 = _mm512_load_ps(p.d + b * panel_rows + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::int64_t at = first + r * a.blocks + b;
      const __m512 dx = _mm512_set1_ps(a.d(at));
      acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][0]), _mm512_mul_ps(d0, dx), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][1]), _mm512_mul_ps(d1, dx), acc[r][1]);
      if constexpr (F == quant_format::q4_1) {
        const __m512 sx = _mm512_set1_ps(a.s(at));
        acc[r][0] = _mm512_fmadd_ps(_mm512_load_ps(p.m + b * panel_rows), sx, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_load_ps(p.m + b * panel_rows + 16), sx, acc[r][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* out = y + (m0 + r) * ldy;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_maskz_loadu_ps(mask0, out));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_maskz_loadu_ps(mask1, out + 16));
    }
    _mm512_mask_storeu_ps(out, mask0, acc[r][0]);
    _mm512_mask_storeu_ps(out + 16, mask1, acc[r][1]);
  }
}

/// Adds the residuals of the wide blocks of the panel to y[m, n0 .. n0 + 32) for every
/// activation row m.
LUMINAL_TARGET_AVX512 inline void add_wide_residuals(const int16_panel& p, int nb, const quant_activations& a,
                                              std::int64_t b0, float* y, std::int64_t ldy, __mmask16 mask0,
                                              __mmask16 mask1) {
  const __m512 residual_unit = _mm512_set1_ps(1.0f / quant_detail::residual_steps);
  for (int b = 0; b < nb; ++b) {
    const std::uint8_t* wide = a.wide + (b0 + b) * a.M;
    const std::int16_t* pq = p.q + b * 16 * 64;
    for (std::int64_t m = 0; m < a.M; ++m) {
      if (!wide[m]) continue;
      const std::int16_t* rq = a.r16 + m * a.q_stride + (b0 + b) * 32;
      __m512i dot0 = _mm512_setzero_si512(), dot1 = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) {
        const __m512i xq = _mm512_set1_epi32(load_i32(rq + 2 * t));
        dot0 = _mm512_dpwssd_epi32(dot0, _mm512_load_si512(pq + t * 64), xq);
        dot1 = _mm512_dpwssd_epi32(dot1, _mm512_load_si512(pq + t * 64 + 32), xq);
      }
      const __m512 dx = _mm512_mul_ps(_mm512_set1_ps(a.d(m * a.blocks + b0 + b)), residual_unit);
      const __m512 scale0 = _mm512_mul_ps(_mm512_load_ps(p.d + b * panel_rows), dx);
      const __m512 scale1 = _mm512_mul_ps(_mm512_load_ps(p.d + b * panel_rows + 16), dx);
      float* out = y + m * ldy;
      _mm512_mask_storeu_ps(out, mask0, _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0), scale0, _mm512_maskz_loadu_ps(mask0, out)));
      _mm512_mask_storeu_ps(out + 16, mask1,
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1), scale1, _mm512_maskz_loadu_ps(mask1, out + 16)));
    }
  }
}

// Activation rows per tile: 5 rows x 2 vectors of int32 and of f32 accumulators take 20 of
// the 32 vector registers, leaving room for the weights, a broadcast, the scales and offsets.
inline constexpr int int16_tile_rows = 5;

template <quant_format F>
LUMINAL_TARGET_AVX512 void int16_panels_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                           float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  int16_panel panel;
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += panel_rows) {
    const int rows = int(std::min<std::int64_t>(panel_rows, n_end - n0));
    const __mmask16 mask0 = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
    const __mmask16 mask1 = rows >= 32 ? __mmask16(0xffff) : rows <= 16 ? __mmask16(0) : __mmask16((1u << (rows - 16)) - 1);
    const unsigned char* panel_weights = w + n0 * row_bytes;
    for (std::int64_t b0 = 0; b0 < a.blocks; b0 += int16_panel_blocks) {
      const int nb = int(std::min<std::int64_t>(int16_panel_blocks, a.blocks - b0));
      pack_int16_panel<F>(panel_weights, row_bytes, rows, b0, nb, panel);
      float* out = y + n0;
      quant_kernels::for_each_tile<int16_tile_rows>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
        int16_panel_tile<F, R>(panel, nb, a, m, b0, out, ldy, mask0, mask1, b0 > 0);
      });
      add_wide_residuals(panel, nb, a, b0, out, ldy, mask0, mask1);
    }
  }
}

/// y[m, n] for all m < a.M and n in [n_begin, n_end), weights of a block format.
inline void int16_matmul(quant_format f, quant_tiling tiling, const unsigned char* w, std::int64_t row_bytes,
                         const quant_activations& a, float* y, std::int64_t ldy, std::int64_t n_begin,
                         std::int64_t n_end) {
  quant_kernels::with_block_format(f, [&]<quant_format F>(quant_kernels::format_constant<F>) {
    if (tiling == quant_tiling::panels) int16_panels_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
    else int16_rows_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
  });
}

}  // namespace luminal::quant_avx512

LUMINAL_QUANT_KERNELS_END
#endif
