// AVX-512 kernels of the quantized matmul that multiply in f32: weights are dequantized in
// registers and meet f32 activations with FMAs. The row kernel (small M) factors each
// block's scale out of its dot product (d * sum(q x) + m * sum(x), the block sums of x
// prepared once); the panel kernel (large M, and every F32/F16/BF16 weight) dequantizes 32
// weight rows x 256 columns into an f32 panel laid out [k][32] and runs a register-blocked
// 4 x 32 FMA tile over it. exec/quant_matmul.hpp calls them only where
// quant_avx512::supported().
//
//     luminal::quant_avx512::f32_matmul(quant_format::f16, quant_tiling::panels, w, row_bytes, K,
//                                       x, ldx, acts, y, ldy, n0, n1);
#pragma once
#include "quant_avx512_int8.hpp"
#if defined(LUMINAL_QUANT_HAVE_AVX512)

LUMINAL_QUANT_KERNELS_BEGIN

namespace luminal::quant_avx512 {

/// 16 weights of a plain format from element k of a row, masked to `mask` (zeros elsewhere).
template <quant_format F>
LUMINAL_TARGET_AVX512 inline __m512 load_plain(const unsigned char* row, std::int64_t k, __mmask16 mask) {
  if constexpr (F == quant_format::f32) return _mm512_maskz_loadu_ps(mask, row + 4 * k);
  const __m256i h = _mm256_maskz_loadu_epi16(mask, row + 2 * k);
  if constexpr (F == quant_format::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// The 32 weights of a block as two f32 vectors (elements 0..15, 16..31), before d and m.
template <quant_format F>
LUMINAL_TARGET_AVX512 inline void block_quants(const unsigned char* block, __m512& lo, __m512& hi) {
  if constexpr (F == quant_format::q8_0) {
    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2))));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18))));
  } else {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + quants_at(F)));
    const __m128i low_nibble = _mm_set1_epi8(15);
    lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, low_nibble)));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), low_nibble)));
  }
}

// ---------------------------------------------------------------------------------------
// Row kernel (small M)
// ---------------------------------------------------------------------------------------

template <quant_format F, int R>
LUMINAL_TARGET_AVX512 void f32_row_group(const unsigned char* w, std::int64_t K, const float* x, std::int64_t ldx,
                                         const quant_activations& a, std::int64_t m0, float* y, std::int64_t ldy) {
  __m512 acc[R];
  float offset_terms[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), offset_terms[r] = 0.0f;
  if constexpr (is_block_format(F)) {
    constexpr int block_bytes = block_bytes_of(F);
    for (std::int64_t b = 0; b < a.blocks; ++b, w += block_bytes) {
      __m512 lo, hi;
      block_quants<F>(w, lo, hi);
      const __m512 d = _mm512_set1_ps(load_half(w));
      const float m = F == quant_format::q4_1 ? load_half(w + 2) : F == quant_format::q4_0 ? -8.0f * load_half(w) : 0.0f;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float* xr = x + (m0 + r) * ldx + 32 * b;
        const __m512 t = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xr + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(xr)));
        acc[r] = _mm512_fmadd_ps(t, d, acc[r]);
        if constexpr (F != quant_format::q8_0) offset_terms[r] += m * a.s((m0 + r) * a.blocks + b);
      }
    }
  } else {
    for (std::int64_t k = 0; k < K; k += 16) {
      const __mmask16 mask = K - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - k)) - 1);
      const __m512 wv = load_plain<F>(w, k, mask);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mask, x + (m0 + r) * ldx + k), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) y[r * ldy] = _mm512_reduce_add_ps(acc[r]) + offset_terms[r];
}

template <quant_format F>
LUMINAL_TARGET_AVX512 void f32_rows_of(const unsigned char* w, std::int64_t row_bytes, std::int64_t K, const float* x,
                                       std::int64_t ldx, const quant_activations& a, float* y, std::int64_t ldy,
                                       std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t n = n_begin; n < n_end; ++n)
    quant_kernels::for_each_tile<4>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
      f32_row_group<F, R>(w + n * row_bytes, K, x, ldx, a, m, y + m * ldy + n, ldy);
    });
}

// ---------------------------------------------------------------------------------------
// Panel kernel (large M)
// ---------------------------------------------------------------------------------------

inline constexpr int f32_panel_columns = 256;  // elements of K per panel: 32 KiB of f32

struct f32_panel {
  alignas(64) float w[f32_panel_columns * panel_rows];  // [k][row]
};

/// Dequantizes columns [k0, k0 + count) of `rows` weight rows into the panel (zeros below).
template <quant_format F>
LUMINAL_TARGET_AVX512 void pack_f32_panel(const unsigned char* w, std::int64_t row_bytes, int rows, std::int64_t k0,
                                          int count, f32_panel& p) {
  alignas(64) float values[f32_panel_columns];
  for (int r = 0; r < panel_rows; ++r) {
    if (r >= rows) {
      for (int k = 0; k < count; ++k) p.w[k * panel_rows + r] = 0.0f;
      continue;
    }
    const unsigned char* row = w + r * row_bytes;
    if constexpr (is_block_format(F)) {  // k0 and count are whole blocks
      constexpr int block_bytes = block_bytes_of(F);
      for (int b = 0; b < count / 32; ++b) {
        const unsigned char* block = row + (k0 / 32 + b) * block_bytes;
        __m512 lo, hi;
        block_quants<F>(block, lo, hi);
        const __m512 d = _mm512_set1_ps(load_half(block));
        const __m512 m = _mm512_set1_ps(F == quant_format::q4_1 ? load_half(block + 2)
                                        : F == quant_format::q4_0 ? -8.0f * load_half(block) : 0.0f);
        _mm512_store_ps(values + 32 * b, _mm512_fmadd_ps(lo, d, m));
        _mm512_store_ps(values + 32 * b + 16, _mm512_fmadd_ps(hi, d, m));
      }
    } else {
      for (int k = 0; k < count; k += 16) {
        const __mmask16 mask = count - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count - k)) - 1);
        _mm512_store_ps(values + k, load_plain<F>(row, k0 + k, mask));
      }
    }
    for (int k = 0; k < count; ++k) p.w[k * panel_rows + r] = values[k];
  }
}

// Activation rows per tile of the f32 panel kernel: 8 accumulators, 2 weight vectors.
inline constexpr int f32_tile_rows = 4;

template <int R>
LUMINAL_TARGET_AVX512 void f32_panel_tile(const f32_panel& p, int count, const float* x, std::int64_t ldx,
                                          std::int64_t m0, std::int64_t k0, float* y, std::int64_t ldy,
                                          __mmask16 mask0, __mmask16 mask1, bool accumulate) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const float* xs = x + m0 * ldx + k0;
#pragma GCC unroll 4
  for (int k = 0; k < count; ++k) {
    const __m512 w0 = _mm512_load_ps(p.w + k * panel_rows), w1 = _mm512_load_ps(p.w + k * panel_rows + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(xs[r * ldx + k]);
      acc[r][0] = _mm512_fmadd_ps(w0, xv, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(w1, xv, acc[r][1]);
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

template <quant_format F>
LUMINAL_TARGET_AVX512 void f32_panels_of(const unsigned char* w, std::int64_t row_bytes, std::int64_t K,
                                         const float* x, std::int64_t ldx, std::int64_t M, float* y,
                                         std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  f32_panel panel;
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += panel_rows) {
    const int rows = int(std::min<std::int64_t>(panel_rows, n_end - n0));
    const __mmask16 mask0 = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
    const __mmask16 mask1 = rows >= 32 ? __mmask16(0xffff) : rows <= 16 ? __mmask16(0) : __mmask16((1u << (rows - 16)) - 1);
    for (std::int64_t k0 = 0; k0 < K; k0 += f32_panel_columns) {
      const int count = int(std::min<std::int64_t>(f32_panel_columns, K - k0));
      pack_f32_panel<F>(w + n0 * row_bytes, row_bytes, rows, k0, count, panel);
      quant_kernels::for_each_tile<f32_tile_rows>(M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
        f32_panel_tile<R>(panel, count, x, ldx, m, k0, y + n0, ldy, mask0, mask1, k0 > 0);
      });
    }
  }
}

/// y[m, n] for all m < a.M and n in [n_begin, n_end), with f32 FMAs.
inline void f32_matmul(quant_format f, quant_tiling tiling, const unsigned char* w, std::int64_t row_bytes,
                       std::int64_t K, const float* x, std::int64_t ldx, const quant_activations& a, float* y,
                       std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  quant_kernels::with_format(f, [&]<quant_format F>(quant_kernels::format_constant<F>) {
    if (tiling == quant_tiling::panels) f32_panels_of<F>(w, row_bytes, K, x, ldx, a.M, y, ldy, n_begin, n_end);
    else f32_rows_of<F>(w, row_bytes, K, x, ldx, a, y, ldy, n_begin, n_end);
  });
}

}  // namespace luminal::quant_avx512

LUMINAL_QUANT_KERNELS_END
#endif
