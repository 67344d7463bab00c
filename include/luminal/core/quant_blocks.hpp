// The block structs of ggml's quantized formats, the f16 and bf16 conversions, and scalar
// dequantization, bit for bit as ggml (and the `gguf` Python package) compute it. Plain
// data and plain functions: they compile for the host and, under nvcc or hipcc, for the
// device, where dequantize_element is the generic fallback of a backend without special
// quantized kernels.
//
//     const auto* blocks = static_cast<const block_q4_1*>(tensor_data);  // one row: K/32 blocks
//     std::vector<float> row(576);
//     dequantize_row(quant_format::q4_1, blocks, row.data(), row.size());
//     float w = dequantize_element(quant_format::q4_1, blocks, 37);      // == row[37]
//
// Multi-byte fields are little-endian, as GGUF stores them; the functions read them byte by
// byte, so a block needs no alignment.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "quant_format.hpp"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define LUMINAL_QUANT_HD __host__ __device__
#else
#define LUMINAL_QUANT_HD
#endif

namespace luminal {

/// A quantized tensor or buffer that cannot be read: a format luminal does not know, or a
/// length that is not a whole number of blocks.
class quant_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Elements that share one scale in Q4_0, Q4_1 and Q8_0.
inline constexpr std::size_t quant_block_elements = 32;

/// Q4_0: x = d * (q - 8). Element j is the low nibble of qs[j], element j + 16 the high one.
struct block_q4_0 {
  std::uint16_t d;       // f16 bits
  std::uint8_t qs[16];
};
/// Q4_1: x = d * q + m, nibbles as in Q4_0.
struct block_q4_1 {
  std::uint16_t d;       // f16 bits
  std::uint16_t m;       // f16 bits
  std::uint8_t qs[16];
};
/// Q8_0: x = d * q.
struct block_q8_0 {
  std::uint16_t d;       // f16 bits
  std::int8_t qs[32];
};
static_assert(sizeof(block_q4_0) == 18 && alignof(block_q4_0) == 2);
static_assert(sizeof(block_q4_1) == 20 && alignof(block_q4_1) == 2);
static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);
static_assert(sizeof(block_q4_0) == format_info(quant_format::q4_0).block_bytes);
static_assert(sizeof(block_q4_1) == format_info(quant_format::q4_1).block_bytes);
static_assert(sizeof(block_q8_0) == format_info(quant_format::q8_0).block_bytes);

namespace quant_detail {
LUMINAL_QUANT_HD constexpr float float_of_bits(std::uint32_t u) { return __builtin_bit_cast(float, u); }
LUMINAL_QUANT_HD constexpr std::uint32_t bits_of_float(float f) { return __builtin_bit_cast(std::uint32_t, f); }
LUMINAL_QUANT_HD constexpr std::uint16_t load_u16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
}  // namespace quant_detail

/// f16 bits to f32: exact for every pattern; infinities stay infinite and NaNs keep sign
/// and payload.
LUMINAL_QUANT_HD constexpr float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return quant_detail::float_of_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return quant_detail::float_of_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return quant_detail::float_of_bits(sign);
  // A subnormal half is a normal float: shift the leading one into the implicit bit.
  std::uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return quant_detail::float_of_bits(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

/// f32 to f16 bits, rounding to nearest even (as F16C's vcvtps2ph and numpy do): values
/// from 65520 up become infinity, NaNs stay NaN (quieted, sign and high payload kept).
LUMINAL_QUANT_HD constexpr std::uint16_t f32_to_f16(float f) {
  const std::uint32_t bits = quant_detail::bits_of_float(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return std::uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // rounds past 65504
  if (magnitude >= 0x38800000u) {  // a normal half
    std::uint32_t h = (magnitude >> 13) - (112u << 10);
    const std::uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
    return std::uint16_t(sign | h);
  }
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return std::uint16_t(sign);  // below half the smallest subnormal
  const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14..24
  std::uint32_t h = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may round up to the smallest normal
  return std::uint16_t(sign | h);
}

/// bf16 bits to f32: exact.
LUMINAL_QUANT_HD constexpr float bf16_to_f32(std::uint16_t b) {
  return quant_detail::float_of_bits(std::uint32_t(b) << 16);
}

/// f32 to bf16 bits, rounding to nearest even as ggml does (subnormals kept, overflow to
/// infinity); NaNs stay NaN, quieted, with their sign.
LUMINAL_QUANT_HD constexpr std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t bits = quant_detail::bits_of_float(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((bits >> 16) | 0x40u);
  return std::uint16_t((std::uint64_t(bits) + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// d * q + m with the product rounded to f32 before the sum, as ggml and numpy compute a
/// Q4_1 element: a fused multiply-add (which compilers form on their own from `d * q + m`)
/// would round once and differ in the last bit. The double product of a half-precision
/// scale and a 4-bit integer is exact, so rounding it to float is the f32 product.
LUMINAL_QUANT_HD inline float scaled_plus_offset(float d, int q, float m) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fadd_rn(__fmul_rn(d, float(q)), m);
#else
  return float(double(d) * double(q)) + m;
#endif
}

/// Element k (0 <= k < 32) of one block.
LUMINAL_QUANT_HD inline float dequantize_block_element(quant_format f, const unsigned char* block, std::size_t k) {
  using quant_detail::load_u16;
  switch (f) {
    case quant_format::q4_0: {
      const int byte = block[2 + (k & 15)];
      const int q = k < 16 ? (byte & 15) : (byte >> 4);
      return f16_to_f32(load_u16(block)) * float(q - 8);
    }
    case quant_format::q4_1: {
      const int byte = block[4 + (k & 15)];
      const int q = k < 16 ? (byte & 15) : (byte >> 4);
      return scaled_plus_offset(f16_to_f32(load_u16(block)), q, f16_to_f32(load_u16(block + 2)));
    }
    case quant_format::q8_0:
      return f16_to_f32(load_u16(block)) * float(static_cast<std::int8_t>(block[2 + k]));
    case quant_format::f32: return quant_detail::float_of_bits(
        std::uint32_t(block[0]) | std::uint32_t(block[1]) << 8 | std::uint32_t(block[2]) << 16 |
        std::uint32_t(block[3]) << 24);
    case quant_format::f16: return f16_to_f32(load_u16(block));
    case quant_format::bf16: return bf16_to_f32(load_u16(block));
  }
  return 0.0f;
}

/// Element k of a row stored in format f (k < the row's length; not checked, so that it
/// costs nothing in a device kernel's inner loop).
LUMINAL_QUANT_HD inline float dequantize_element(quant_format f, const void* row, std::size_t k) {
  const auto* bytes = static_cast<const unsigned char*>(row);
  switch (f) {
    case quant_format::q4_0:
    case quant_format::q4_1:
    case quant_format::q8_0: {
      const std::size_t block_bytes = f == quant_format::q4_0 ? 18 : f == quant_format::q4_1 ? 20 : 34;
      return dequantize_block_element(f, bytes + k / quant_block_elements * block_bytes, k % quant_block_elements);
    }
    case quant_format::f32: return dequantize_block_element(f, bytes + 4 * k, 0);
    case quant_format::f16:
    case quant_format::bf16: return dequantize_block_element(f, bytes + 2 * k, 0);
  }
  return 0.0f;
}

/// Checks that `elements` elements of format f are whole blocks; throws quant_error naming
/// the format and the count otherwise.
inline void check_whole_blocks(quant_format f, std::size_t elements) {
  const quant_format_info info = format_info(f);
  if (info.block_elements == 0)
    throw quant_error("quantized data: unknown format id " + std::to_string(static_cast<std::uint32_t>(f)));
  if (elements % info.block_elements != 0)
    throw quant_error("quantized data: " + std::to_string(elements) + " elements of " + std::string(info.name) +
                      " are not a whole number of " + std::to_string(info.block_elements) + "-element blocks");
}

/// Dequantizes `elements` elements (whole blocks) from `blocks` into `out`, bit-identical
/// to ggml's dequantize_row_* and gguf.quants.dequantize.
inline void dequantize_row(quant_format f, const void* blocks, float* out, std::size_t elements) {
  check_whole_blocks(f, elements);
  const auto* bytes = static_cast<const unsigned char*>(blocks);
  using quant_detail::load_u16;
  switch (f) {
    case quant_format::q4_0:
    case quant_format::q4_1: {
      const bool offset = f == quant_format::q4_1;
      const std::size_t block_bytes = offset ? 20 : 18;
      for (std::size_t b = 0; b < elements / 32; ++b, bytes += block_bytes, out += 32) {
        const float d = f16_to_f32(load_u16(bytes));
        const float m = offset ? f16_to_f32(load_u16(bytes + 2)) : 0.0f;
        const unsigned char* qs = bytes + (offset ? 4 : 2);
        for (int j = 0; j < 16; ++j) {
          const int lo = qs[j] & 15, hi = qs[j] >> 4;
          out[j] = offset ? scaled_plus_offset(d, lo, m) : d * float(lo - 8);
          out[j + 16] = offset ? scaled_plus_offset(d, hi, m) : d * float(hi - 8);
        }
      }
      return;
    }
    case quant_format::q8_0:
      for (std::size_t b = 0; b < elements / 32; ++b, bytes += 34, out += 32) {
        const float d = f16_to_f32(load_u16(bytes));
        for (int j = 0; j < 32; ++j) out[j] = d * float(static_cast<std::int8_t>(bytes[2 + j]));
      }
      return;
    case quant_format::f32:
    case quant_format::f16:
    case quant_format::bf16:
      for (std::size_t k = 0; k < elements; ++k) out[k] = dequantize_element(f, blocks, k);
      return;
  }
}

}  // namespace luminal
