// AVX-512 VNNI kernels of the quantized matmul that multiply integers: the quantization of
// activations to int8 blocks, the row kernel (small M: each weight block unpacked once per
// group of up to 4 activation rows, vpdpbusd on 256-bit vectors, as ggml's vec_dot does)
// and the panel kernel (large M: 32 weight rows unpacked into a panel of 4-byte groups,
// multiplied by tiles of activation rows, each loaded weight vector reused for every row
// of the tile). Compiled with target attributes, so a translation unit built without
// -march=native can include them; exec/quant_matmul.hpp calls them only on a CPU that has
// AVX-512 F/BW/VL/DQ/VNNI, FMA and F16C.
//
//     quant_avx512::quantize_activations(quant_format::q4_1, quant_method::int8_dot, x, ldx, acts, 0, M);
//     quant_avx512::int8_matmul(quant_format::q4_1, quant_tiling::rows, w, row_bytes, acts, y, ldy, n0, n1);
#pragma once
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__)
#define LUMINAL_QUANT_HAVE_AVX512 1
#include <immintrin.h>

#include <cstring>

#include "quant_activations.hpp"
#include "quant_kernel_common.hpp"

#define LUMINAL_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))

LUMINAL_QUANT_KERNELS_BEGIN

namespace luminal::quant_avx512 {

/// Whether this CPU (and its OS) runs the kernels of this file. Every AVX-512 CPU has F16C
/// (and Clang 14 cannot ask for it).
inline bool supported() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  return yes;
}

LUMINAL_TARGET_AVX512 inline float load_half(const unsigned char* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline std::int32_t load_i32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

constexpr int block_bytes_of(quant_format f) { return int(format_info(f).block_bytes); }
constexpr int quants_at(quant_format f) { return f == quant_format::q4_1 ? 4 : 2; }

// ---------------------------------------------------------------------------------------
// Activations
// ---------------------------------------------------------------------------------------

/// Prepares rows [m_begin, m_end) of x as quantize_block_int8 (int8_dot) or as block sums
/// (float_fma) do.
LUMINAL_TARGET_AVX512 inline void quantize_activations(quant_format f, quant_method method, const float* x,
                                                       std::int64_t ldx, const quant_activations& a,
                                                       std::int64_t m_begin, std::int64_t m_end) {
  if (!is_block_format(f)) return;
  const bool to_int8 = effective_method(f, method) == quant_method::int8_dot;
  const std::int32_t offset = quant_detail::unsigned_weight_offset(f);
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  for (std::int64_t m = m_begin; m < m_end; ++m) {
    const float* row = x + m * ldx;
    for (std::int64_t b = 0; b < a.blocks; ++b) {
      const __m512 v0 = _mm512_loadu_ps(row + 32 * b), v1 = _mm512_loadu_ps(row + 32 * b + 16);
      const std::int64_t at = m * a.blocks + b;
      if (!to_int8) {
        a.s(at) = _mm512_reduce_add_ps(_mm512_add_ps(v0, v1));
        continue;
      }
      const __m512 largest = _mm512_max_ps(_mm512_andnot_ps(sign_bit, v0), _mm512_andnot_ps(sign_bit, v1));
      const float d = _mm512_reduce_max_ps(largest) / 127.0f;
      const __m512 inverse = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
      const __m512i q0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inverse)), lo), hi);
      const __m512i q1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inverse)), lo), hi);
      std::int8_t* q = a.q + m * a.q_stride + 32 * b;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
      const std::int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
      a.d(at) = d;
      a.s(at) = d * float(sum);
      a.c[at] = offset * sum;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Row kernel (small M)
// ---------------------------------------------------------------------------------------

/// The 32 quants of a Q4 block as unsigned bytes 0..15 in element order (low nibbles are
/// elements 0..15, high nibbles 16..31).
LUMINAL_TARGET_AVX512 inline __m256i unpack_nibbles(const unsigned char* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

LUMINAL_TARGET_AVX512 inline float sum_lanes(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/// Adds block b of one weight row times activation rows m0 .. m0 + R to acc; lane 1 of
/// offsets[r] gathers Q4_1's m * s terms. The block's (d, m) and the activations' (d, s) are
/// multiplied as pairs.
template <quant_format F, int R>
[[gnu::always_inline]] LUMINAL_TARGET_AVX512 inline void int8_row_block(const unsigned char* block, std::int64_t b,
                                                                        const quant_activations& a, std::int64_t m0,
                                                                        __m256* acc, __m128* offsets) {
  // d and, for Q4_1, m as f32 in lanes 0 and 1 (lane 1 is garbage for the other formats).
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load_i32(block)));
  const __m256i wq = F == quant_format::q8_0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2))
                                             : unpack_nibbles(block + quants_at(F));
  const __m256i unsigned_w = F == quant_format::q8_0 ? _mm256_abs_epi8(wq) : wq;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const std::int64_t at = (m0 + r) * a.blocks + b;
    __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + (m0 + r) * a.q_stride + 32 * b));
    if constexpr (F == quant_format::q8_0) xq = _mm256_sign_epi8(xq, wq);  // |w| * (x * sign w)
    __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unsigned_w, xq);
    if constexpr (F == quant_format::q4_0)  // q - 8 as q, then 8 * sum(x) off
      dot = _mm256_sub_epi32(dot, _mm256_zextsi128_si256(_mm_cvtsi32_si128(a.c[at])));
    const __m128 products = _mm_mul_ps(dm, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&a.d(at)))));
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcastss_ps(products), acc[r]);
    if constexpr (F == quant_format::q4_1) offsets[r] = _mm_add_ps(offsets[r], products);
  }
}

/// y[m0 + r, n] for r < R, from one weight row. Even and odd blocks go to separate
/// accumulators, so that two chains of FMAs are in flight.
template <quant_format F, int R>
LUMINAL_TARGET_AVX512 void int8_row_group(const unsigned char* w, const quant_activations& a, std::int64_t m0,
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
    int8_row_block<F, R>(w + b * block_bytes, b, a, m0, even, even_offsets);
    int8_row_block<F, R>(w + (b + 1) * block_bytes, b + 1, a, m0, odd, odd_offsets);
  }
  if (b < a.blocks) int8_row_block<F, R>(w + b * block_bytes, b, a, m0, even, even_offsets);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    y[r * ldy] = sum_lanes(_mm256_add_ps(even[r], odd[r])) +
                 _mm_cvtss_f32(_mm_movehdup_ps(_mm_add_ps(even_offsets[r], odd_offsets[r])));
}

template <quant_format F>
LUMINAL_TARGET_AVX512 void int8_rows_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                        float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t n = n_begin; n < n_end; ++n)
    quant_kernels::for_each_tile<4>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
      int8_row_group<F, R>(w + n * row_bytes, a, m, y + m * ldy + n, ldy);
    });
}

// ---------------------------------------------------------------------------------------
// Panel kernel (large M)
// ---------------------------------------------------------------------------------------

inline constexpr int panel_rows = 32;    // two 16-lane vectors of weight rows
inline constexpr int panel_blocks = 16;  // blocks of K per packed chunk: 16 KiB of quants

/// 32 weight rows x up to 16 blocks: for block b and 4-element group t, 128 bytes hold the
/// group's 4 quants of rows 0..31 (as unsigned bytes), so that one vpdpbusd multiplies 16
/// rows by one broadcast group of activations. d and m are the rows' scales and offsets.
struct int8_panel {
  alignas(64) unsigned char q[panel_blocks * 8 * 128];
  alignas(64) float d[panel_blocks * panel_rows];
  alignas(64) float m[panel_blocks * panel_rows];
};

template <quant_format F>
LUMINAL_TARGET_AVX512 void pack_int8_panel(const unsigned char* w, std::int64_t row_bytes, int rows,
                                           std::int64_t b0, int nb, int8_panel& p) {
  constexpr int block_bytes = block_bytes_of(F);
  alignas(32) unsigned char quants[32];
  for (int r = 0; r < panel_rows; ++r) {
    const unsigned char* row = w + r * row_bytes + b0 * block_bytes;
    for (int b = 0; b < nb; ++b) {
      if (r < rows) {
        const unsigned char* block = row + b * block_bytes;
        const __m256i u = F == quant_format::q8_0
                              ? _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)),
                                                 _mm256_set1_epi8(char(0x80)))  // q + 128
                              : unpack_nibbles(block + quants_at(F));
        _mm256_store_si256(reinterpret_cast<__m256i*>(quants), u);
        p.d[b * panel_rows + r] = load_half(block);
        p.m[b * panel_rows + r] = F == quant_format::q4_1 ? load_half(block + 2) : 0.0f;
      } else {
        std::memset(quants, 0, sizeof quants);
        p.d[b * panel_rows + r] = 0.0f;
        p.m[b * panel_rows + r] = 0.0f;
      }
      for (int t = 0; t < 8; ++t) std::memcpy(p.q + (b * 8 + t) * 128 + r * 4, quants + 4 * t, 4);
    }
  }
}

/// y[m0 + r, n0 .. n0 + 32) (+)= the panel's nb blocks times activation rows m0 .. m0 + R.
template <quant_format F, int R>
LUMINAL_TARGET_AVX512 void int8_panel_tile(const int8_panel& p, int nb, const quant_activations& a,
                                           std::int64_t m0, std::int64_t b0, float* y, std::int64_t ldy,
                                           __mmask16 mask0, __mmask16 mask1, bool accumulate) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const std::int8_t* q = a.q + m0 * a.q_stride + b0 * 32;
  const std::int64_t first = m0 * a.blocks + b0;
  for (int b = 0; b < nb; ++b) {
    __m512i dot[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
    const unsigned char* pq = p.q + b * 1024;
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m512i w0 = _mm512_load_si512(pq + t * 128), w1 = _mm512_load_si512(pq + t * 128 + 64);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i xq = _mm512_set1_epi32(load_i32(q + r * a.q_stride + b * 32 + 4 * t));
        dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], w0, xq);
        dot[r][1] = _mm512_dpbusd_epi32(dot[r][1], w1, xq);
      }
    }
    const __m512 d0 = _mm512_load_ps(p.d + b * panel_rows), d1 = _mm512_load_ps(p.d + b * panel_rows + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::int64_t at = first + r * a.blocks + b;
      if constexpr (F != quant_format::q4_1) {
        const __m512i offset = _mm512_set1_epi32(a.c[at]);
        dot[r][0] = _mm512_sub_epi32(dot[r][0], offset);
        dot[r][1] = _mm512_sub_epi32(dot[r][1], offset);
      }
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

// Activation rows per tile: 6 rows x 2 vectors of int32 and of f32 accumulators take 24 of
// the 32 vector registers, leaving room for the weights, a broadcast and the scales.
inline constexpr int int8_tile_rows = 6;

template <quant_format F>
LUMINAL_TARGET_AVX512 void int8_panels_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                          float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  int8_panel panel;
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += panel_rows) {
    const int rows = int(std::min<std::int64_t>(panel_rows, n_end - n0));
    const __mmask16 mask0 = rows >= 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
    const __mmask16 mask1 = rows >= 32 ? __mmask16(0xffff) : rows <= 16 ? __mmask16(0) : __mmask16((1u << (rows - 16)) - 1);
    for (std::int64_t b0 = 0; b0 < a.blocks; b0 += panel_blocks) {
      const int nb = int(std::min<std::int64_t>(panel_blocks, a.blocks - b0));
      pack_int8_panel<F>(w + n0 * row_bytes, row_bytes, rows, b0, nb, panel);
      float* out = y + n0;
      quant_kernels::for_each_tile<int8_tile_rows>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
        int8_panel_tile<F, R>(panel, nb, a, m, b0, out, ldy, mask0, mask1, b0 > 0);
      });
    }
  }
}

/// y[m, n] for all m < a.M and n in [n_begin, n_end), weights of a block format.
inline void int8_matmul(quant_format f, quant_tiling tiling, const unsigned char* w, std::int64_t row_bytes,
                        const quant_activations& a, float* y, std::int64_t ldy, std::int64_t n_begin,
                        std::int64_t n_end) {
  quant_kernels::with_block_format(f, [&]<quant_format F>(quant_kernels::format_constant<F>) {
    if (tiling == quant_tiling::panels) int8_panels_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
    else int8_rows_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
  });
}

}  // namespace luminal::quant_avx512

LUMINAL_QUANT_KERNELS_END
#endif
