// The 16-bit floating element types bf16 and f16: plain data (two bytes, trivially
// copyable) with conversions to and from f32 that give PyTorch's bits on the CPU.
//
//     luminal::bf16 b{1.0f / 3};        // rounded to nearest even: 0x3EAB
//     float back = float(b);            // exact: 0.333984375
//     auto y = cast<bf16>(x);           // a tensor of them (ops/cast.hpp)
//
// Arithmetic is never done on them directly: kernels compute in f32 (arithmetic_t<T>) and
// round at each op's output (exec/eval.hpp). Both conversions are explicit, so that no
// expression rounds or widens without saying so.
//
// The bits, checked against PyTorch 2.15 on every one of the 65,536 patterns and on random
// and halfway f32 values (tests/unit/dtype_half_test.cpp):
// - f32 -> bf16 rounds to nearest even; overflow goes to infinity; a subnormal f32 keeps
//   its rounded bits. Every NaN becomes 0xFFFF: what `x.to(torch.bfloat16)` writes on the
//   CPU (its AVX2 and AVX-512 kernels). Its scalar c10::BFloat16 writes 0x7FC0 instead
//   (ATEN_CPU_CAPABILITY=default), and CUDA's __float2bfloat16 0x7FFF; we follow the
//   tensor conversion everywhere, devices included, so that every backend gives one result.
// - f32 -> f16 is IEEE binary16 with round to nearest even, subnormals, and overflow from
//   65520 up to infinity; a NaN stays NaN, quieted, its sign and high payload kept: what
//   F16C's vcvtps2ph, and so PyTorch's CPU kernels, write.
// - bf16 -> f32 and f16 -> f32 are exact; an f16 NaN comes back quieted (vcvtph2ps), a bf16
//   NaN keeps its bits.
// The scalar code here is the reference and runs everywhere (constexpr, host, device). It
// is written without branches, as selects, so that GCC vectorizes the loops that convert
// (a kernel's loads and stores): a scalar F16C intrinsic would stop that, and AVX512_BF16's
// vcvtneps2bf16 keeps NaN payloads, unlike PyTorch.
#pragma once
#include <cstdint>
#include <type_traits>

#ifndef LUMINAL_HD
#if defined(__CUDACC__)
#define LUMINAL_HD __host__ __device__
#else
#define LUMINAL_HD
#endif
#endif

namespace luminal {

namespace half_detail {
LUMINAL_HD constexpr std::uint32_t bits_of(float f) { return __builtin_bit_cast(std::uint32_t, f); }
LUMINAL_HD constexpr float float_of(std::uint32_t u) { return __builtin_bit_cast(float, u); }

/// f32 to bf16 bits (see the file's comment).
LUMINAL_HD constexpr std::uint16_t bf16_bits(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // NaN aside, no overflow
  // All ones for a NaN, whose bf16 is 0xffff: arithmetic, not a select, which GCC turned
  // into a branch per element inside fused loops and left them unvectorized.
  const std::uint32_t nan = 0u - std::uint32_t((u & 0x7fffffffu) > 0x7f800000u);
  return std::uint16_t(rounded | nan);
}

/// f32 to f16 bits (see the file's comment).
LUMINAL_HD constexpr std::uint16_t f16_bits(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t magnitude = u & 0x7fffffffu;
  // A normal half: drop 13 bits rounding to nearest even, and rebias the exponent (127 -> 15).
  const std::uint32_t normal = ((magnitude + 0xfffu + ((magnitude >> 13) & 1u)) >> 13) - (112u << 10);
  // A subnormal half (or zero): adding 0.5 aligns the value's bits to the half's last
  // mantissa bit, and the addition itself rounds to nearest even.
  const std::uint32_t subnormal = bits_of(float_of(magnitude) + 0.5f) - 0x3f000000u;
  const std::uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  const std::uint32_t h = magnitude > 0x7f800000u    ? nan
                          : magnitude >= 0x477ff000u ? 0x7c00u  // rounds past 65504: infinity
                          : magnitude >= 0x38800000u ? normal
                                                     : subnormal;
  return std::uint16_t(sign | h);
}

/// f16 bits to f32: exact; a NaN is quieted, keeping its sign and payload.
LUMINAL_HD constexpr float f16_value(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  // A subnormal half m * 2^-24 is computed as (2^23 + m) * 2^-23 - 1, scaled: exact.
  const float tiny = (float_of(0x3f800000u | (mantissa << 13)) - 1.0f) * float_of(0x38800000u);  // * 2^-14
  const std::uint32_t bits = exponent == 0x1fu ? 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u)
                             : exponent != 0   ? ((exponent + 112u) << 23) | (mantissa << 13)
                                               : bits_of(tiny);
  return float_of(sign | bits);
}
}  // namespace half_detail

/// bfloat16: f32's sign and 8-bit exponent, 7 mantissa bits.
struct bf16 {
  std::uint16_t bits;
  bf16() = default;
  /// Rounds to nearest even (NaN: 0xFFFF, as PyTorch's CPU kernels).
  LUMINAL_HD constexpr explicit bf16(float f) : bits(half_detail::bf16_bits(f)) {}
  /// Exact.
  LUMINAL_HD constexpr explicit operator float() const { return half_detail::float_of(std::uint32_t(bits) << 16); }
  LUMINAL_HD constexpr explicit operator double() const { return double(float(*this)); }
  LUMINAL_HD static constexpr bf16 from_bits(std::uint16_t b) {
    bf16 out{};
    out.bits = b;
    return out;
  }
};

/// IEEE binary16: 5-bit exponent, 10 mantissa bits, subnormals.
struct f16 {
  std::uint16_t bits;
  f16() = default;
  /// Rounds to nearest even; from 65520 up, infinity.
  LUMINAL_HD constexpr explicit f16(float f) : bits(half_detail::f16_bits(f)) {}
  /// Exact (a NaN is quieted).
  LUMINAL_HD constexpr explicit operator float() const { return half_detail::f16_value(bits); }
  LUMINAL_HD constexpr explicit operator double() const { return double(float(*this)); }
  LUMINAL_HD static constexpr f16 from_bits(std::uint16_t b) {
    f16 out{};
    out.bits = b;
    return out;
  }
};

static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16> && std::is_trivially_default_constructible_v<bf16>);
static_assert(sizeof(f16) == 2 && std::is_trivially_copyable_v<f16> && std::is_trivially_default_constructible_v<f16>);

/// Whether T is one of the 16-bit floating types, stored in 16 bits and computed in f32.
template <class T>
inline constexpr bool is_half_float = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

/// The type a kernel computes an element of type T in: f32 for bf16 and f16, T otherwise.
template <class T>
struct arithmetic_type {
  using type = T;
};
template <>
struct arithmetic_type<bf16> {
  using type = float;
};
template <>
struct arithmetic_type<f16> {
  using type = float;
};
template <class T>
using arithmetic_t = typename arithmetic_type<T>::type;

/// v as a value of element type T, in T's arithmetic type: rounded to T and widened back
/// for bf16 and f16 (an op's output, computed in f32, rounded as PyTorch rounds it), a
/// plain conversion otherwise.
template <class T, class V>
LUMINAL_HD constexpr arithmetic_t<T> as_element(V v) {
  if constexpr (is_half_float<T>) return static_cast<float>(T(static_cast<float>(v)));
  else return static_cast<T>(v);
}

}  // namespace luminal
