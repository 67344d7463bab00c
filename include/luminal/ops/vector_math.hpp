// exp2, log2 and erf of float in straight-line arithmetic that a compiler vectorizes: a
// call of the C library's exp2f / log2f / erff inside a fused loop keeps the whole loop
// scalar (softmax, GELU and cross-entropy run through these). Over every float,
// subnormals, infinities and NaN included, each is within 1 ulp of libm's double result
// rounded to float (checked exhaustively once); tests/unit/ops_vector_math_test.cpp
// samples 1M floats. Device code keeps CUDA's own functions, and double keeps libm.
//
//     float y = luminal::detail::exp2_f32(x);   // what fn::Exp2 runs on the host for f32
//     float e = luminal::detail::erf_f32(x);    // and fn::Erf
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/dtype.hpp"

namespace luminal::detail {

LUMINAL_INLINE std::int32_t float_bits(float x) {
  std::int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
LUMINAL_INLINE float bits_float(std::int32_t i) {
  float x;
  std::memcpy(&x, &i, sizeof x);
  return x;
}
/// c ? a : b as a blend of bits: both values are computed, and GCC cannot move their
/// arithmetic into a branch (see exp2_f32).
LUMINAL_INLINE float blend(bool c, float a, float b) {
  const std::int32_t mask = -std::int32_t(c);
  return bits_float((float_bits(a) & mask) | (float_bits(b) & ~mask));
}
LUMINAL_INLINE double blend(bool c, double a, double b) {
  std::int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  const std::int64_t mask = -std::int64_t(c), bits = (ia & mask) | (ib & ~mask);
  double r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
/// a > b without raising an exception on NaN (a quiet comparison), so that GCC may
/// compute both sides of a choice that depends on it (see exp2_f32).
template <class T>
LUMINAL_INLINE bool quiet_greater(T a, T b) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_floating_point_v<T>) return __builtin_isgreater(a, b);
#endif
  return a > b;
}
/// c ? a : b for a kernel's values (where): floats as a blend, so that a loop choosing
/// between computed values still vectorizes; integers choose as they are (they cannot trap).
template <class T>
LUMINAL_INLINE T select_value(bool c, T a, T b) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return blend(c, a, b);
#endif
  return c ? a : b;
}

/// 2^x: x = n + f with n an integer and |f| <= 1/2; 2^f by its Taylor polynomial of
/// degree 7 (truncation error below 1e-8 relative); 2^n applied as two exact powers of
/// two, so that results down in the subnormals round once and the largest overflow to inf.
///
/// Written for GCC's vectorizer under its default -ftrapping-math: no float-to-int
/// conversion, no ordinary < on floats (it may raise an exception on NaN), and choices
/// between floats as blends of bits. GCC moves arithmetic into the arm of a `c ? a : b`
/// that needs it, and an arm that may raise an exception is a branch: the loop stays scalar.
LUMINAL_INLINE float exp2_f32(float x) {
  // Adding 1.5 * 2^23 rounds to an integer, which the low bits of the sum then hold.
  constexpr float round_magic = 12582912.0f;
  const float shifted = x + round_magic;
  const float f = x - (shifted - round_magic);
  // ln(2)^k / k!
  float p = 1.5252733804059841e-05f;
  p = p * f + 1.5403530393381606e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  // The difference of the bit patterns, wrapping (unsigned) where |x| is huge: garbage
  // past |x| = 2^22, overridden below, but no signed overflow.
  std::int32_t e = std::int32_t(std::uint32_t(float_bits(shifted)) - std::uint32_t(float_bits(round_magic)));
  // Below 2^-150 every result rounds to 0. Those lanes scale by 2^0 instead and are set to
  // 0 after: scaling them down would make subnormal products, which cost a microcode
  // assist each (a masked softmax's exp is half such lanes, all of them slow). Integer
  // tests of e, as a mask of bits: a float compare mixed in, or a choice of e by `?:`, left
  // the loop scalar where only AVX2 (no mask registers) is there.
  const std::int32_t underflows = -std::int32_t(e < -150);
  e = (e > 129 ? 129 : e) & ~underflows;
  const std::int32_t half = e >> 1;  // e = half + (e - half), each a normal float's exponent
  const float scaled = p * bits_float((half + 127) << 23) * bits_float((e - half + 127) << 23);
  constexpr float inf = __builtin_inff();
  float result = blend(__builtin_isgreater(x, 129.0f), inf, scaled);
  result = blend(underflows != 0, 0.0f, result);
  result = blend(__builtin_isless(x, -151.0f), 0.0f, result);
  return blend(__builtin_isunordered(x, x), x, result);
}

/// log2(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)); log2(m) = 2/ln(2) atanh(t) with
/// t = (m - 1) / (m + 1), |t| < 0.172, by its series to t^11, in double and rounded to
/// float once (near x = 1, where log2 is small, float arithmetic lost 4 ulp). Subnormal x
/// is scaled by 2^23 first; 0 gives -inf, negative x NaN, inf inf.
LUMINAL_INLINE float log2_f32(float x) {
  const bool subnormal = __builtin_isless(x, 1.17549435e-38f);
  const float times_2_23 = x * 8388608.0f;
  const std::int32_t bits = float_bits(blend(subnormal, times_2_23, x));
  std::int32_t e = ((bits >> 23) & 0xff) - 127 - (subnormal ? 23 : 0);
  const float mantissa = bits_float((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const float half_mantissa = mantissa * 0.5f;
  const bool high = __builtin_isgreater(mantissa, 1.41421356f);
  const float m = blend(high, half_mantissa, mantissa);
  e = high ? e + 1 : e;
  const double t = (double(m) - 1.0) / (double(m) + 1.0);
  const double t2 = t * t;
  double series = 1.0 / 11.0;
  series = series * t2 + 1.0 / 9.0;
  series = series * t2 + 1.0 / 7.0;
  series = series * t2 + 1.0 / 5.0;
  series = series * t2 + 1.0 / 3.0;
  series = series * t2 + 1.0;
  float result = float(double(e) + 2.8853900817779268 * t * series);  // 2 / ln(2)
  constexpr float inf = __builtin_inff();
  result = blend(x == 0.0f, -inf, result);
  result = blend(x == inf, inf, result);
  return blend(__builtin_isless(x, 0.0f) || __builtin_isunordered(x, x), __builtin_nanf(""), result);
}

/// erf(x) = sign(x) erf(|x|) with, for |x| <= 1, |x| P(x^2), P of degree 6 (relative error
/// below 2e-9), and for 1 < |x|, 1 - 2^Q(t), Q of degree 11 fitting log2(erfc) over [1, 4]
/// in t = (|x| - 2.5) / 1.5 (erfc's relative error below 1e-10; past 4, erfc < 2e-8 and
/// erf rounds to 1). Least-squares fits on Chebyshev nodes against libm in double. Both
/// polynomials run in double, so that the only roundings are the final one and exp2's.
LUMINAL_INLINE float erf_f32(float x) {
  const double a = __builtin_fabs(double(x)), s = a * a;
  double p = 7.847259131439632e-05;
  p = p * s - 0.0008008189324422155;
  p = p * s + 0.005188098889532575;
  p = p * s - 0.0268536910997782;
  p = p * s + 0.11283582247994237;
  p = p * s - 0.3761262556739931;
  p = p * s + 1.1283791656893227;
  const double small = a * p;  // NaN stays NaN here, and the blend below keeps it
  const double clamped = blend(__builtin_isgreater(a, 4.0), 4.0, blend(__builtin_isless(a, 1.0), 1.0, a));
  const double t = (clamped - 2.5) * (1.0 / 1.5);
  double q = 2.2180886196652096e-06;
  q = q * t - 3.4149524672879327e-06;
  q = q * t - 9.750731343234167e-06;
  q = q * t + 6.821681880026338e-05;
  q = q * t - 0.00031375930941751775;
  q = q * t + 0.0012643677251895154;
  q = q * t - 0.004611708980023967;
  q = q * t + 0.015816227267492076;
  q = q * t - 0.05286897123582286;
  q = q * t - 3.0639393498740457;
  q = q * t - 11.583428963251114;
  q = q * t - 11.262853678669188;
  const double large = 1.0 - double(exp2_f32(float(q)));
  const float magnitude = float(blend(__builtin_isgreater(a, 1.0), large, small));
  return __builtin_copysignf(magnitude, x);
}

}  // namespace luminal::detail
