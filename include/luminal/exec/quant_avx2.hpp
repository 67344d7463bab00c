// The AVX2 kernels of the quantized matmul, for x86 CPUs without AVX-512 VNNI (Haswell to
// Skylake-X, Zen 1 to 3): the int8 row kernel of quant_avx512_int8.hpp with vpmaddubsw +
// vpmaddwd in place of vpdpbusd, as ggml's AVX2 vec_dot does (the 16-bit pair sums cannot
// overflow: 2 * 15 * 127 for Q4, 2 * 127 * 127 for Q8_0 through the sign trick), and the
// int16 row kernel of quant_avx512_int16.hpp with vpmaddwd + vpaddd in place of vpdpwssd.
// They serve both tilings; int8 activations are prepared by the scalar code, int16 ones
// here, and the float_fma method and F32/F16/BF16 weights run the scalar kernels.
//
//     quant_avx2::int8_rows(quant_format::q8_0, w, row_bytes, acts, y, ldy, n0, n1);
//     quant_avx2::int16_rows(quant_format::q4_1, w, row_bytes, acts, y, ldy, n0, n1);
#pragma once
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__)
#define LUMINAL_QUANT_HAVE_AVX2 1
#include <immintrin.h>

#include <cstring>

#include "quant_activations.hpp"
#include "quant_kernel_common.hpp"

#define LUMINAL_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace luminal::quant_avx2 {

/// Whether this CPU runs the kernels of this file (every AVX2 CPU has F16C).
inline bool supported() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

inline std::int32_t load_i32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

LUMINAL_TARGET_AVX2 inline float sum_lanes(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/// Adds block b of one weight row times activation rows m0 .. m0 + R (see int8_row_block in
/// quant_avx512_int8.hpp: the same sums, in the same order).
template <quant_format F, int R>
[[gnu::always_inline]] LUMINAL_TARGET_AVX2 inline void int8_row_block(const unsigned char* block, std::int64_t b,
                                                                      const quant_activations& a, std::int64_t m0,
                                                                      __m256* acc, __m128* offsets) {
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load_i32(block)));
  __m256i wq;
  if constexpr (F == quant_format::q8_0) {
    wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (F == quant_format::q4_1 ? 4 : 2)));
    wq = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
                          _mm256_set1_epi8(15));
  }
  const __m256i unsigned_w = F == quant_format::q8_0 ? _mm256_abs_epi8(wq) : wq;
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const std::int64_t at = (m0 + r) * a.blocks + b;
    __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + (m0 + r) * a.q_stride + 32 * b));
    if constexpr (F == quant_format::q8_0) xq = _mm256_sign_epi8(xq, wq);  // |w| * (x * sign w)
    __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned_w, xq), ones);
    if constexpr (F == quant_format::q4_0)  // q - 8 as q, then 8 * sum(x) off
      dot = _mm256_sub_epi32(dot, _mm256_zextsi128_si256(_mm_cvtsi32_si128(a.c[at])));
    const __m128 products = _mm_mul_ps(dm, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&a.d(at)))));
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcastss_ps(products), acc[r]);
    if constexpr (F == quant_format::q4_1) offsets[r] = _mm_add_ps(offsets[r], products);
  }
}

template <quant_format F, int R>
LUMINAL_TARGET_AVX2 void int8_row_group(const unsigned char* w, const quant_activations& a, std::int64_t m0, float* y,
                                        std::int64_t ldy) {
  constexpr int block_bytes = int(format_info(F).block_bytes);
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
LUMINAL_TARGET_AVX2 void int8_rows_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                      float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t n = n_begin; n < n_end; ++n)
    quant_kernels::for_each_tile<4>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
      int8_row_group<F, R>(w + n * row_bytes, a, m, y + m * ldy + n, ldy);
    });
}

/// y[m, n] for all m < a.M and n in [n_begin, n_end), weights of a block format.
inline void int8_rows(quant_format f, const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                      float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  quant_kernels::with_block_format(f, [&]<quant_format F>(quant_kernels::format_constant<F>) {
    int8_rows_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
  });
}

/// Sum of the 8 lanes of an int32 vector.
LUMINAL_TARGET_AVX2 inline std::int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

/// Prepares rows [m_begin, m_end) of x for int16_dot, bit for bit as
/// quant_detail::prepare_activations_scalar does for finite x (the 16 lanes of its sums as
/// two vectors).
LUMINAL_TARGET_AVX2 inline void quantize_activations_int16(const float* x, std::int64_t ldx, const quant_activations& a,
                                                           std::int64_t m_begin, std::int64_t m_end) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f), infinity = _mm256_set1_ps(INFINITY);
  const __m256 steps = _mm256_set1_ps(quant_detail::residual_steps);
  for (std::int64_t m = m_begin; m < m_end; ++m) {
    const float* row = x + m * ldx;
    __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps();  // lanes 0..7 and 8..15
    for (std::int64_t b = 0; b < a.blocks; ++b) {
      const float* block = row + 32 * b;
      low = _mm256_add_ps(low, _mm256_add_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(block)),
                                             _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(block + 16))));
      high = _mm256_add_ps(high, _mm256_add_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(block + 8)),
                                               _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(block + 24))));
    }
    const __m256 eight = _mm256_add_ps(low, high);
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    const float threshold = quant_detail::wide_block_fraction * _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
    for (std::int64_t b = 0; b < a.blocks; ++b) {
      const std::int64_t at = m * a.blocks + b;
      const float* block = row + 32 * b;
      __m256 v[4], largest = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(block + 8 * i);
        largest = _mm256_max_ps(largest, _mm256_andnot_ps(sign_bit, v[i]));
      }
      __m128 l = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
      l = _mm_max_ps(l, _mm_movehl_ps(l, l));
      const float amax = _mm_cvtss_f32(_mm_max_ss(l, _mm_movehdup_ps(l)));
      const float d = amax * (1.0f / 32767.0f);
      const __m256 inverse = _mm256_set1_ps(d != 0.0f ? 32767.0f / amax : 0.0f);
      __m256i q[4], r[4], q_sum = _mm256_setzero_si256(), r_sum = _mm256_setzero_si256();
      for (int i = 0; i < 4; ++i) {
        const __m256 scaled = _mm256_mul_ps(v[i], inverse);
        const __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, scaled), infinity, _CMP_LT_OQ);
        q[i] = _mm256_and_si256(_mm256_cvtps_epi32(scaled), _mm256_castps_si256(finite));
        q[i] = _mm256_min_epi32(_mm256_max_epi32(q[i], _mm256_set1_epi32(-32767)), _mm256_set1_epi32(32767));
        const __m256 rest = _mm256_and_ps(_mm256_fmsub_ps(v[i], inverse, _mm256_cvtepi32_ps(q[i])), finite);
        r[i] = _mm256_cvtps_epi32(_mm256_mul_ps(rest, steps));
        r[i] = _mm256_min_epi32(_mm256_max_epi32(r[i], _mm256_set1_epi32(-64)), _mm256_set1_epi32(64));
        q_sum = _mm256_add_epi32(q_sum, q[i]);
        r_sum = _mm256_add_epi32(r_sum, r[i]);
      }
      // packs interleaves 128-bit lanes; the permutation puts the 16 words back in order.
      for (int i = 0; i < 4; i += 2) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q16 + m * a.q_stride + 32 * b + 8 * i),
                            _mm256_permute4x64_epi64(_mm256_packs_epi32(q[i], q[i + 1]), 0xd8));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.r16 + m * a.q_stride + 32 * b + 8 * i),
                            _mm256_permute4x64_epi64(_mm256_packs_epi32(r[i], r[i + 1]), 0xd8));
      }
      const bool wide = !(amax <= threshold);
      a.d(at) = d;
      a.s(at) = quant_detail::int16_block_sum(d, sum_lanes(q_sum) * std::int32_t(quant_detail::residual_steps),
                                              sum_lanes(r_sum), wide);
      a.wide[b * a.M + m] = wide;
    }
  }
}

/// Adds block b of one weight row times activation rows m0 .. m0 + R (see int16_row_block in
/// quant_avx512_int16.hpp: the same integers).
template <quant_format F, int R>
[[gnu::always_inline]] LUMINAL_TARGET_AVX2 inline void int16_row_block(const unsigned char* block, std::int64_t b,
                                                                       const quant_activations& a, std::int64_t m0,
                                                                       __m256* acc, __m128* offsets) {
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load_i32(block)));
  __m256i low, high;
  if constexpr (F == quant_format::q8_0) {
    low = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    high = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)));
  } else {
    const __m256i words = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (F == quant_format::q4_1 ? 4 : 2))));
    low = _mm256_and_si256(words, _mm256_set1_epi16(15));
    high = _mm256_srli_epi16(words, 4);
    if constexpr (F == quant_format::q4_0) {
      low = _mm256_sub_epi16(low, _mm256_set1_epi16(8));
      high = _mm256_sub_epi16(high, _mm256_set1_epi16(8));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const std::int64_t at = (m0 + r) * a.blocks + b;
    const std::int16_t* q = a.q16 + (m0 + r) * a.q_stride + 32 * b;
    const std::int16_t* rq = a.r16 + (m0 + r) * a.q_stride + 32 * b;
    const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
                                         _mm256_madd_epi16(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16))));
    __m256i sum = dot;
    const __m128 products = _mm_mul_ps(dm, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&a.d(at)))));
    __m256 scale = _mm256_broadcastss_ps(products);
    if (a.wide[b * a.M + m0 + r]) {
      const __m256i rest = _mm256_add_epi32(_mm256_madd_epi16(low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rq))),
                                            _mm256_madd_epi16(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rq + 16))));
      sum = _mm256_add_epi32(_mm256_slli_epi32(dot, quant_detail::residual_bits), rest);
      scale = _mm256_mul_ps(scale, _mm256_set1_ps(1.0f / quant_detail::residual_steps));
    }
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[r]);
    if constexpr (F == quant_format::q4_1) offsets[r] = _mm_add_ps(offsets[r], products);
  }
}

template <quant_format F, int R>
LUMINAL_TARGET_AVX2 void int16_row_group(const unsigned char* w, const quant_activations& a, std::int64_t m0, float* y,
                                         std::int64_t ldy) {
  constexpr int block_bytes = int(format_info(F).block_bytes);
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
LUMINAL_TARGET_AVX2 void int16_rows_of(const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                                       float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t n = n_begin; n < n_end; ++n)
    quant_kernels::for_each_tile<4>(a.M, [&]<int R>(quant_kernels::rows_constant<R>, std::int64_t m) {
      int16_row_group<F, R>(w + n * row_bytes, a, m, y + m * ldy + n, ldy);
    });
}

/// y[m, n] for all m < a.M and n in [n_begin, n_end) with int16_dot activations (the row
/// kernel serves both tilings).
inline void int16_rows(quant_format f, const unsigned char* w, std::int64_t row_bytes, const quant_activations& a,
                       float* y, std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  quant_kernels::with_block_format(f, [&]<quant_format F>(quant_kernels::format_constant<F>) {
    int16_rows_of<F>(w, row_bytes, a, y, ldy, n_begin, n_end);
  });
}

}  // namespace luminal::quant_avx2
#endif
