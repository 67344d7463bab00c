// Matmul against weights that stay in their storage format (ggml's Q4_0, Q4_1, Q8_0, F16,
// BF16, F32): y[m, n] = sum_k x[m, k] * W[n, k], W an [N, K] tensor as GGUF stores it, x
// and y row-major f32. The call is split so that the caller owns the threads: the
// activations are prepared once (quantized to integer blocks for the integer kernels), then
// each thread computes its own range of output columns n.
//
//     const quant_kernel kernel = choose_quant_kernel(quant_format::q4_1, M);
//     std::vector<unsigned char> workspace(quant_workspace_bytes(quant_format::q4_1, M, K, kernel));
//     prepare_activations(quant_format::q4_1, x, M, K, K, workspace.data(), kernel);
//     // then on each thread, for its chunk [p0, p1) of the (N + 31) / 32 panels of 32 rows:
//     quant_matmul_rows(quant_format::q4_1, w, K, M, workspace.data(), x, K, y, N, 32 * p0,
//                       std::min(N, 32 * p1), kernel);
//
// Split n at multiples of 32 (a panel kernel works on 32 rows at a time; the row kernels
// take any split). For large M, prepare_activations can also be split by rows of x.
//
// Kernels (chosen by measurement on Zen 4; benchmarks/quant_matmul.cpp prints the figures):
// block formats multiply int16 activations, plus a 7-bit residual in the blocks that hold
// an outlier (quant_method::int16_dot: within about 1e-5 of sum |x w| of the exact
// product, where ggml's int8 activations are off by 1e-3 to 1e-1 on SmolLM2's outlier
// channels), with vpdpwssd, by weight rows for M < 6 and by 32-row panels above; F32/F16/BF16
// weights run f32 FMAs. int8_dot (ggml's method) and float_fma (dequantize to f32, exact to
// f32 rounding) stay selectable. CPUs with AVX2 but not AVX-512 VNNI get int16 and int8 row
// kernels, every CPU the scalar kernels, which define the results the vector kernels
// reproduce (the integer ones exactly, up to f32 summation order).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/quant_blocks.hpp"
#include "quant_activations.hpp"
#include "quant_avx512_f32.hpp"
#include "quant_avx2.hpp"
#include "quant_avx512_int8.hpp"
#include "quant_avx512_int16.hpp"

namespace luminal {

/// Activation rows from which the panel kernels beat the row kernels.
inline constexpr std::int64_t quant_panel_min_rows = 6;

/// Whether this machine runs kernels of instruction set `isa`.
inline bool quant_isa_supported(quant_isa isa) {
  switch (isa) {
    case quant_isa::scalar: return true;
#if defined(LUMINAL_QUANT_HAVE_AVX512)
    case quant_isa::avx512: return quant_avx512::supported();
#endif
#if defined(LUMINAL_QUANT_HAVE_AVX2)
    case quant_isa::avx2: return quant_avx2::supported();
#endif
    default: return false;
  }
}

/// The best instruction set of this machine.
inline quant_isa best_quant_isa() {
  for (quant_isa isa : {quant_isa::avx512, quant_isa::avx2})
    if (quant_isa_supported(isa)) return isa;
  return quant_isa::scalar;
}

/// The kernel luminal uses for M activation rows against weights of format f.
inline quant_kernel choose_quant_kernel(quant_format f, std::int64_t M) {
  return {best_quant_isa(), is_block_format(f) ? quant_method::int16_dot : quant_method::float_fma,
          M >= quant_panel_min_rows ? quant_tiling::panels : quant_tiling::rows};
}

/// Bytes of workspace prepare_activations needs (0 for F32/F16/BF16 weights; the pointer
/// passed may then be null). Any alignment: the arrays start at the next 64-byte boundary.
inline std::size_t quant_workspace_bytes(quant_format f, std::int64_t M, std::int64_t K, quant_kernel kernel) {
  quant_detail::check_extents(f, M, K);
  quant_activations layout;
  const std::size_t bytes = quant_detail::lay_out_activations(f, M, K, kernel.method, nullptr, layout);
  return bytes ? bytes + quant_detail::workspace_alignment : 0;
}
inline std::size_t quant_workspace_bytes(quant_format f, std::int64_t M, std::int64_t K) {
  return quant_workspace_bytes(f, M, K, choose_quant_kernel(f, M));
}

namespace quant_detail {

inline quant_activations activations_at(quant_format f, std::int64_t M, std::int64_t K, quant_method method,
                                        const void* workspace) {
  auto address = reinterpret_cast<std::uintptr_t>(workspace);
  address = (address + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
  quant_activations a;
  const std::size_t bytes = lay_out_activations(f, M, K, method, reinterpret_cast<unsigned char*>(address), a);
  if (bytes && !workspace) throw quant_error("quantized matmul: the workspace is null");
  return a;
}

inline void check_kernel(quant_kernel kernel) {
  if (!quant_isa_supported(kernel.isa))
    throw quant_error(std::string("quantized matmul: this CPU lacks the instruction set of the requested kernel (") +
                      (kernel.isa == quant_isa::avx512 ? "AVX-512 F/BW/VL/DQ/VNNI with FMA and F16C" : "AVX2 with FMA and F16C") + ")");
}

/// Up to 32 weights from element k0 of a row (k0 and count whole blocks for block formats).
inline void dequantize_span(quant_format f, const unsigned char* row, std::int64_t k0, int count, float* out) {
  for (int k = 0; k < count; ++k) out[k] = dequantize_element(f, row, std::size_t(k0 + k));
}

/// The scalar kernels: one weight row and one block of 32 columns at a time.
/// Quant j of a block as the integer kernels read it: Q4 nibbles unsigned (0..15), Q8_0 signed.
inline int block_quant(quant_format f, const unsigned char* block, int j) {
  if (f == quant_format::q8_0) return static_cast<std::int8_t>(block[2 + j]);
  const int byte = block[(f == quant_format::q4_1 ? 4 : 2) + (j & 15)];
  return j < 16 ? (byte & 15) : (byte >> 4);
}

/// The int16_dot result of one block: d_w d_x (q . w + r . w / 128) (+ m sum x for Q4_1),
/// the residual r only where `residual`; w is Q4_0's q - 8, Q4_1's q, Q8_0's q.
inline float int16_block_product(quant_format f, const unsigned char* block, const std::int16_t* q,
                                 const std::int16_t* r, float dx, float sx, bool residual) {
  std::int32_t dot = 0, rest = 0;
  for (int j = 0; j < 32; ++j) {
    const int wq = block_quant(f, block, j) - (f == quant_format::q4_0 ? 8 : 0);
    dot += wq * q[j];
    rest += wq * r[j];
  }
  const float d = f16_to_f32(load_u16(block));
  const float m = f == quant_format::q4_1 ? f16_to_f32(load_u16(block + 2)) : 0.0f;
  const float sum = residual ? float(dot) + float(rest) / residual_steps : float(dot);
  return d * dx * sum + m * sx;
}

inline void matmul_rows_scalar(quant_format f, quant_method method, const unsigned char* w, std::int64_t row_bytes,
                               std::int64_t K, const float* x, std::int64_t ldx, const quant_activations& a, float* y,
                               std::int64_t ldy, std::int64_t n_begin, std::int64_t n_end) {
  const quant_method used = effective_method(f, method);
  const std::size_t block_bytes = format_info(f).block_bytes;
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    const unsigned char* row = w + n * row_bytes;
    for (std::int64_t m = 0; m < a.M; ++m) {
      float sum = 0.0f;
      if (used == quant_method::int16_dot) {
        for (std::int64_t b = 0; b < a.blocks; ++b) {
          const std::int64_t at = m * a.blocks + b;
          sum += int16_block_product(f, row + b * block_bytes, a.q16 + m * a.q_stride + 32 * b,
                                     a.r16 + m * a.q_stride + 32 * b, a.d(at), a.s(at), a.wide[b * a.M + m]);
        }
      } else if (used == quant_method::int8_dot) {
        for (std::int64_t b = 0; b < a.blocks; ++b) {
          const unsigned char* block = row + b * block_bytes;
          const std::int8_t* xq = a.q + m * a.q_stride + 32 * b;
          std::int32_t dot = 0;
          for (int j = 0; j < 32; ++j) dot += block_quant(f, block, j) * xq[j];
          const std::int64_t at = m * a.blocks + b;
          if (f == quant_format::q4_0) dot -= a.c[at];
          sum += f16_to_f32(quant_detail::load_u16(block)) * a.d(at) * float(dot);
          if (f == quant_format::q4_1) sum += f16_to_f32(quant_detail::load_u16(block + 2)) * a.s(at);
        }
      } else {
        float weights[32];
        const float* xr = x + m * ldx;
        for (std::int64_t k0 = 0; k0 < K; k0 += 32) {
          const int count = int(std::min<std::int64_t>(32, K - k0));
          dequantize_span(f, row, k0, count, weights);
          for (int k = 0; k < count; ++k) sum += weights[k] * xr[k0 + k];
        }
      }
      y[m * ldy + n] = sum;
    }
  }
}

}  // namespace quant_detail

/// Prepares rows [m_begin, m_end) of the M rows of x (row stride ldx >= K) in `workspace`
/// (quant_workspace_bytes(f, M, K, kernel) bytes) for quant_matmul_rows with the same format,
/// extents and kernel. Threads may prepare disjoint row ranges at once; all M rows must be
/// prepared before any thread multiplies.
inline void prepare_activations(quant_format f, const float* x, std::int64_t M, std::int64_t K, std::int64_t ldx,
                                void* workspace, quant_kernel kernel, std::int64_t m_begin, std::int64_t m_end) {
  quant_detail::check_extents(f, M, K);
  quant_detail::check_kernel(kernel);
  if (ldx < K) throw quant_error("quantized matmul: activation row stride " + std::to_string(ldx) + " < K = " + std::to_string(K));
  if (m_begin < 0 || m_end < m_begin || m_end > M)
    throw quant_error("quantized matmul: activation rows [" + std::to_string(m_begin) + ", " + std::to_string(m_end) +
                      ") are not within the " + std::to_string(M) + " rows");
  const quant_activations a = quant_detail::activations_at(f, M, K, kernel.method, workspace);
  if (m_begin == m_end || !is_block_format(f)) return;
  if (!x) throw quant_error("quantized matmul: the activations are null");
#if defined(LUMINAL_QUANT_HAVE_AVX512)
  if (kernel.isa == quant_isa::avx512) {
    if (effective_method(f, kernel.method) == quant_method::int16_dot)
      return quant_avx512::quantize_activations_int16(x, ldx, a, m_begin, m_end);
    return quant_avx512::quantize_activations(f, kernel.method, x, ldx, a, m_begin, m_end);
  }
#endif
#if defined(LUMINAL_QUANT_HAVE_AVX2)
  if (kernel.isa == quant_isa::avx2 && effective_method(f, kernel.method) == quant_method::int16_dot)
    return quant_avx2::quantize_activations_int16(x, ldx, a, m_begin, m_end);
#endif
  quant_detail::prepare_activations_scalar(f, kernel.method, x, ldx, a, m_begin, m_end);
}
/// All M rows.
inline void prepare_activations(quant_format f, const float* x, std::int64_t M, std::int64_t K, std::int64_t ldx,
                                void* workspace, quant_kernel kernel) {
  prepare_activations(f, x, M, K, ldx, workspace, kernel, 0, M);
}
inline void prepare_activations(quant_format f, const float* x, std::int64_t M, std::int64_t K, std::int64_t ldx,
                                void* workspace) {
  prepare_activations(f, x, M, K, ldx, workspace, choose_quant_kernel(f, M));
}

/// y[m * ldy + n] = sum_k x[m, k] * W[n, k] for m < M and n in [n_begin, n_end). w holds W's
/// rows of row_bytes(f, K) bytes each (at least n_end of them); x is the matrix given to
/// prepare_activations (the f32 kernels read it, the integer ones only the workspace). Threads
/// may run disjoint n ranges at once; panel kernels work in 32-row panels, so ranges that
/// are multiples of 32 waste nothing.
inline void quant_matmul_rows(quant_format f, const void* w, std::int64_t K, std::int64_t M, const void* workspace,
                              const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t n_begin,
                              std::int64_t n_end, quant_kernel kernel) {
  quant_detail::check_extents(f, M, K);
  quant_detail::check_kernel(kernel);
  if (n_begin < 0 || n_end < n_begin)
    throw quant_error("quantized matmul: output range [" + std::to_string(n_begin) + ", " + std::to_string(n_end) + ") is invalid");
  if (ldy < n_end || ldx < K)
    throw quant_error("quantized matmul: row stride of y (" + std::to_string(ldy) + ") below n_end or of x (" +
                      std::to_string(ldx) + ") below K");
  if (M == 0 || n_begin == n_end) return;
  if (!w || !y) throw quant_error("quantized matmul: null weights or output");
  const quant_method method = effective_method(f, kernel.method);
  if (method == quant_method::float_fma && !x) throw quant_error("quantized matmul: the f32 kernels need x");
  const quant_activations a = quant_detail::activations_at(f, M, K, method, workspace);
  const auto* weights = static_cast<const unsigned char*>(w);
  const auto stride = std::int64_t(row_bytes(f, std::size_t(K)));
#if defined(LUMINAL_QUANT_HAVE_AVX512)
  if (kernel.isa == quant_isa::avx512) {
    if (method == quant_method::int8_dot)
      return quant_avx512::int8_matmul(f, kernel.tiling, weights, stride, a, y, ldy, n_begin, n_end);
    if (method == quant_method::int16_dot)
      return quant_avx512::int16_matmul(f, kernel.tiling, weights, stride, a, y, ldy, n_begin, n_end);
    return quant_avx512::f32_matmul(f, kernel.tiling, weights, stride, K, x, ldx, a, y, ldy, n_begin, n_end);
  }
#endif
#if defined(LUMINAL_QUANT_HAVE_AVX2)
  if (kernel.isa == quant_isa::avx2 && method == quant_method::int8_dot)
    return quant_avx2::int8_rows(f, weights, stride, a, y, ldy, n_begin, n_end);
  if (kernel.isa == quant_isa::avx2 && method == quant_method::int16_dot)
    return quant_avx2::int16_rows(f, weights, stride, a, y, ldy, n_begin, n_end);
#endif
  quant_detail::matmul_rows_scalar(f, method, weights, stride, K, x, ldx, a, y, ldy, n_begin, n_end);
}
inline void quant_matmul_rows(quant_format f, const void* w, std::int64_t K, std::int64_t M, const void* workspace,
                              const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t n_begin,
                              std::int64_t n_end) {
  quant_matmul_rows(f, w, K, M, workspace, x, ldx, y, ldy, n_begin, n_end, choose_quant_kernel(f, M));
}

/// The whole product on the calling thread: y[M, N] = x[M, K] · W[N, K]^T (row strides K and
/// N). Allocates its workspace; for tests and one-off calls.
inline void quant_matmul(quant_format f, const void* w, std::int64_t N, std::int64_t K, const float* x,
                         std::int64_t M, float* y, quant_kernel kernel) {
  std::vector<unsigned char> workspace(quant_workspace_bytes(f, M, K, kernel));
  prepare_activations(f, x, M, K, K, workspace.data(), kernel);
  quant_matmul_rows(f, w, K, M, workspace.data(), x, K, y, N, 0, N, kernel);
}
inline void quant_matmul(quant_format f, const void* w, std::int64_t N, std::int64_t K, const float* x,
                         std::int64_t M, float* y) {
  quant_matmul(f, w, N, K, x, M, y, choose_quant_kernel(f, M));
}

}  // namespace luminal
