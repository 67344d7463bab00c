// What a quantized matmul does to its activations before the weights are read: the kinds
// of kernel (instruction set, how a weight block meets the activations, how the loops are
// tiled), the layout of the prepared activations in the caller's workspace, and the scalar
// preparation that every instruction set reproduces exactly.
//
//     quant_kernel k{quant_isa::scalar, quant_method::int8_dot, quant_tiling::rows};
//     std::vector<unsigned char> ws(quant_workspace_bytes(quant_format::q4_1, M, K, k));
//     prepare_activations(quant_format::q4_1, x, M, K, K, ws.data(), k);   // exec/quant_matmul.hpp
//
// For int8_dot, each row of x is quantized per 32-element block as ggml's Q8_0/Q8_1 do for
// its integer dot products: d = max|x| / 127, q = round-to-nearest-even(x / d) in
// [-127, 127]. The scale stays f32 (ggml rounds it to f16), which only removes error.
//
// For int16_dot, each block is x ~= d * (q + r / 128) with d = max|x| / 32767, q an int16 and
// r a residual in [-64, 64], 22 bits below the block's largest element: q alone (15 bits) is
// what most blocks need, r is added where a block's scale is large beside its row ("wide"
// blocks: a block holding an outlier channel, whose other elements q would round coarsely).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/quant_blocks.hpp"

namespace luminal {

/// The instruction set of a kernel. avx512 needs AVX-512 F, BW, VL, DQ and VNNI with F16C
/// and FMA (Zen 4, Ice Lake, Cascade Lake and later); avx2 needs AVX2, FMA and F16C and has
/// only the int8 row kernel (both tilings use it; float_fma runs the scalar code).
enum class quant_isa : unsigned char { scalar, avx2, avx512 };

/// How a weight block meets the activations: float_fma dequantizes it to f32 in registers
/// and multiplies f32 activations; int8_dot multiplies its integers with int8-quantized
/// activations (ggml's method: fast, but a block holding an outlier loses the precision of
/// its other elements); int16_dot with int16 activations and a residual where needed
/// (within about 1e-5 of sum |x w|, with twice the products per instruction of f32 FMAs).
/// F32, F16 and BF16 weights always take float_fma.
enum class quant_method : unsigned char { float_fma, int8_dot, int16_dot };

/// rows: one weight row after the other, each block dequantized once per group of up to 4
/// activation rows (small M). panels: 32 weight rows at a time are unpacked into a
/// cache-resident panel and multiplied by tiles of activation rows (large M).
enum class quant_tiling : unsigned char { rows, panels };

/// A kernel: what quant_workspace_bytes, prepare_activations and quant_matmul_rows are told
/// (the same value for all three).
struct quant_kernel {
  quant_isa isa = quant_isa::scalar;
  quant_method method = quant_method::int8_dot;
  quant_tiling tiling = quant_tiling::rows;
  friend constexpr bool operator==(const quant_kernel&, const quant_kernel&) = default;
};

constexpr bool is_block_format(quant_format f) {
  return f == quant_format::q4_0 || f == quant_format::q4_1 || f == quant_format::q8_0;
}

/// The method a kernel really uses for format f.
constexpr quant_method effective_method(quant_format f, quant_method m) {
  return is_block_format(f) ? m : quant_method::float_fma;
}

/// Prepared activations inside a workspace, for M rows of K elements and B = K / 32 blocks;
/// block b of row m is at = m * B + b. int8_dot: q[m * q_stride + k] the quantized x; d(at)
/// its block scale; s(at) the scale times the block's sum of q (for Q4_1's offset term),
/// stored beside d so that one 8-byte load reads both; c[at] the integer that a dot product
/// over weights read as unsigned bytes subtracts (Q4_0: 8 * sum q, Q8_0: 128 * sum q, Q4_1:
/// 0). int16_dot: q16[m * q_stride + k] the int16 quants, r16[...] the residuals, d(at) the
/// scale, s(at) the block's sum d (sum q + sum r / 128) (for Q4_1's offset term; r only where
/// wide), wide[b * M + m] = 1 where the kernels add the residual. float_fma with a block
/// format: s(at) the f32 sum of the block of x. Arrays a kernel does not use are null.
struct quant_activations {
  std::int64_t M = 0, K = 0, blocks = 0, q_stride = 0;
  std::int8_t* q = nullptr;
  float* scales = nullptr;  // pairs (d, s) per block
  std::int32_t* c = nullptr;
  std::int16_t* q16 = nullptr;
  std::int16_t* r16 = nullptr;
  std::uint8_t* wide = nullptr;  // [block][row]
  float& d(std::int64_t at) const { return scales[2 * at]; }
  float& s(std::int64_t at) const { return scales[2 * at + 1]; }
};

namespace quant_detail {

inline constexpr std::size_t workspace_alignment = 64;
inline constexpr std::int64_t largest_extent = std::int64_t(1) << 40;

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

/// Lays the arrays out from `base` (or from 0 when base is null, to size them); returns the
/// bytes used past the aligned start.
inline std::size_t lay_out_activations(quant_format f, std::int64_t M, std::int64_t K, quant_method method,
                                       unsigned char* base, quant_activations& out) {
  out = {};
  out.M = M;
  out.K = K;
  if (!is_block_format(f)) return 0;
  const std::size_t blocks = std::size_t(K) / quant_block_elements;
  const std::size_t per_block = round_up(std::size_t(M) * blocks * 4, workspace_alignment);
  out.blocks = std::int64_t(blocks);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    unsigned char* p = base ? base + at : nullptr;
    at += bytes;
    return p;
  };
  const quant_method used = effective_method(f, method);
  if (used == quant_method::int8_dot || used == quant_method::int16_dot) {
    out.q_stride = std::int64_t(round_up(std::size_t(K), workspace_alignment));
    const std::size_t elements = std::size_t(M) * std::size_t(out.q_stride);
    if (used == quant_method::int8_dot) {
      out.q = reinterpret_cast<std::int8_t*>(take(elements));
      out.c = reinterpret_cast<std::int32_t*>(take(per_block));
    } else {
      out.q16 = reinterpret_cast<std::int16_t*>(take(2 * elements));
      out.r16 = reinterpret_cast<std::int16_t*>(take(2 * elements));
      out.wide = reinterpret_cast<std::uint8_t*>(take(round_up(std::size_t(M) * blocks, workspace_alignment)));
    }
    out.scales = reinterpret_cast<float*>(take(2 * per_block));
  } else {
    out.scales = reinterpret_cast<float*>(take(2 * per_block));
  }
  return at;
}

inline void check_extents(quant_format f, std::int64_t M, std::int64_t K) {
  if (format_info(f).block_elements == 0)
    throw quant_error("quantized matmul: unknown weight format id " + std::to_string(unsigned(f)));
  if (M < 0 || K <= 0 || M > largest_extent || K > largest_extent || M * K > largest_extent)
    throw quant_error("quantized matmul: activations of " + std::to_string(M) + " x " + std::to_string(K) +
                      " elements are empty, negative or too large");
  check_whole_blocks(f, std::size_t(K));
}

/// The one unsigned-weight correction per format (see quant_activations::c).
constexpr std::int32_t unsigned_weight_offset(quant_format f) {
  return f == quant_format::q4_0 ? 8 : f == quant_format::q8_0 ? 128 : 0;
}

/// Quantizes one 32-element block of x (the scalar definition that every ISA reproduces).
inline void quantize_block_int8(quant_format f, const float* x, std::int8_t* q, float& d, float& s,
                                std::int32_t& c) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  std::int32_t sum = 0;
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] * inverse;
    // Round half to even, as vcvtps2dq does; |v| <= 127 (+ rounding) by construction.
    const std::int32_t r = std::isfinite(v) ? std::int32_t(std::nearbyint(v)) : 0;
    q[j] = std::int8_t(std::clamp(r, -127, 127));
    sum += q[j];
  }
  s = d * float(sum);
  c = unsigned_weight_offset(f) * sum;
}

/// int16_dot: a block is wide (gets the residual) when its largest element exceeds this
/// fraction of the sum |x| of its row. Elsewhere q's rounding, up to max|x| / 65534 per
/// element, stays near 1e-6 of the row's sum |x w| (1e-5 at worst). Rows of normal values
/// have no wide block; SmolLM2's activations have 0-22 % of them (8 % over the model).
inline constexpr float wide_block_fraction = 1.0f / 64.0f;
/// The residual's unit: r counts d / 128 (|r| <= 64 for |x / d - q| <= 1/2), so that a row
/// kernel can shift the int32 dot product of q by 7 bits and add r's to it without overflow
/// (4 products of 16 bits by 8 bits and 2^7 stay below 2^31).
inline constexpr int residual_bits = 7;
inline constexpr float residual_steps = float(1 << residual_bits);

/// The sum of 32 floats in the order of the vector code: halves folded onto each other
/// (x[j] + x[j + 16], then + 8, + 4, + 2, + 1), so that every ISA prepares identical bits.
inline float block_sum(const float* x) {
  float t[16];
  for (int j = 0; j < 16; ++j) t[j] = x[j] + x[j + 16];
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) t[j] += t[j + width];
  return t[0];
}

/// The largest |x| of a block that is not wide in a row of K elements: wide_block_fraction
/// times the row's sum |x|, summed as the AVX-512 code does (lane j of a 16-lane sum gathers
/// |x| of elements j and j + 16 of every block in turn; then the lanes fold as in block_sum).
inline float wide_threshold(const float* row, std::int64_t K) {
  float lanes[32] = {};
  for (std::int64_t b = 0; b < K / 32; ++b)
    for (int j = 0; j < 16; ++j) lanes[j] += std::fabs(row[32 * b + j]) + std::fabs(row[32 * b + j + 16]);
  return wide_block_fraction * block_sum(lanes);  // lanes 16..31 are zero: x + 0 is exact
}

/// The int16_dot quants of one block (the scalar definition that every ISA reproduces):
/// q, r and d; returns max|x| and sets sums = 128 * sum q and rests = sum r.
inline float quantize_block_int16(const float* x, std::int16_t* q, std::int16_t* r, float& d, std::int32_t& sums,
                                  std::int32_t& rests) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  // d and its inverse each in one rounding (not 1 / d): x ~= d (q + r / 128) holds to within
  // 2^-23 of max|x|, and the two do not wait for each other.
  d = amax * (1.0f / 32767.0f);
  const float inverse = d != 0.0f ? 32767.0f / amax : 0.0f;
  sums = rests = 0;
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] * inverse;
    const bool finite = std::isfinite(v);
    const std::int32_t rounded = finite ? std::int32_t(std::nearbyint(v)) : 0;
    q[j] = std::int16_t(std::clamp(rounded, -32767, 32767));
    // x * inverse - q with one rounding (an FMA), as vfmsub computes it.
    const float rest = finite ? std::fma(x[j], inverse, -float(q[j])) : 0.0f;
    r[j] = std::int16_t(std::clamp(std::int32_t(std::nearbyint(rest * residual_steps)), -64, 64));
    sums += q[j];
    rests += r[j];
  }
  sums *= std::int32_t(residual_steps);
  return amax;
}

/// s of an int16_dot block: the sum of the block as the kernels see it, d (sum q + sum r / 128)
/// with r only in a wide block. Summing the integers (exactly) rather than x in f32 keeps
/// Q4_1's offset term m s consistent with the dot product d_w d (q . w + r . w / 128) it
/// nearly cancels when the weights are small beside their offset.
inline float int16_block_sum(float d, std::int32_t sums, std::int32_t rests, bool wide) {
  return d * float(wide ? sums + rests : sums) * (1.0f / residual_steps);
}

inline void prepare_activations_scalar(quant_format f, quant_method method, const float* x, std::int64_t ldx,
                                       const quant_activations& a, std::int64_t m_begin, std::int64_t m_end) {
  if (!is_block_format(f)) return;
  if (effective_method(f, method) == quant_method::int16_dot) {
    for (std::int64_t m = m_begin; m < m_end; ++m) {
      const float* row = x + m * ldx;
      const float threshold = wide_threshold(row, a.K);
      for (std::int64_t b = 0; b < a.blocks; ++b) {
        const std::int64_t at = m * a.blocks + b;
        std::int32_t sums, rests;
        const float amax = quantize_block_int16(row + 32 * b, a.q16 + m * a.q_stride + 32 * b,
                                                a.r16 + m * a.q_stride + 32 * b, a.d(at), sums, rests);
        const bool wide = !(amax <= threshold);  // NaN and infinity count as wide
        a.wide[b * a.M + m] = wide;
        a.s(at) = int16_block_sum(a.d(at), sums, rests, wide);
      }
    }
    return;
  }
  for (std::int64_t m = m_begin; m < m_end; ++m) {
    const float* row = x + m * ldx;
    for (std::int64_t b = 0; b < a.blocks; ++b) {
      const std::int64_t at = m * a.blocks + b;
      if (effective_method(f, method) == quant_method::int8_dot) {
        quantize_block_int8(f, row + 32 * b, a.q + m * a.q_stride + 32 * b, a.d(at), a.s(at), a.c[at]);
      } else {
        float sum = 0.0f;
        for (int j = 0; j < 32; ++j) sum += row[32 * b + j];
        a.s(at) = sum;
      }
    }
  }
}

}  // namespace quant_detail
}  // namespace luminal
