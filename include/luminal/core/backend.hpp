// The one concept every backend implements (as Kokkos specializes one concept per
// execution space): memory, a parallel loop over chunks of a range, and GEMM.
#pragma once
#include <concepts>
#include <cstddef>

#include "dtype.hpp"

namespace luminal {

struct host;  // the default backend, backends/luminal/backends/host.hpp

/// A chunked loop body: `f(begin, end)` handles flat indices [begin, end).
struct chunk_body_archetype {
  LUMINAL_HD void operator()(index_t, index_t) const {}
};

/// What the planner needs from a backend.
///  - allocate / deallocate: device memory (the arena, owned inputs, tables);
///  - to_device / to_host: copies at the program's edges; to_host returns with the data,
///    to_device once its source may be reused;
///  - device_copy: a copy within the backend's memory (a tape moving a program's output
///    into its own buffers);
///  - parallel_for(n, f): runs f over chunks covering [0, n);
///  - a backend may queue copies and loops rather than finish them before returning (the
///    GPU does), but every later copy, loop and GEMM through any object of the backend sees
///    their results (issue order is run order), and to_host waits for what came before;
///  - gemm: row-major C = op(A) op(B) (alpha 1, beta 0) for f32 and f64;
///  - host_accessible: whether the host may read device pointers directly (zero-copy).
/// Whether B is defined where it is used, not only declared: `host` is declared here, and
/// defined by <luminal/backends/host.hpp>, which luminal.hpp does not include.
template <class B>
concept defined_backend = requires { sizeof(B); };

/// The message of a program, store or tape whose backend is declared but not defined.
#define LUMINAL_BACKEND_DEFINED_MESSAGE                                                                  \
  "luminal: the backend is declared but not defined here; include its header: "                          \
  "#include <luminal/backends/host.hpp> for the default (luminal.hpp includes no backend)"

template <class B>
concept backend = requires(B& b, const B& cb, void* p, const void* cp, std::size_t bytes, index_t n,
                           const float* fa, float* fc, const double* da, double* dc) {
  { b.allocate(bytes) } -> std::same_as<void*>;
  b.deallocate(p);
  b.to_device(p, cp, bytes);
  b.to_host(p, cp, bytes);
  b.device_copy(p, cp, bytes);
  b.parallel_for(n, chunk_body_archetype{});
  b.gemm(false, false, n, n, n, fa, n, fa, n, fc, n);
  b.gemm(false, false, n, n, n, da, n, da, n, dc, n);
  { B::host_accessible } -> std::convertible_to<bool>;
  { B::name } -> std::convertible_to<const char*>;
};

/// Whether backend B also runs a GEMM summed over batches, an optional member:
/// gemm_batch_sum(trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc,
/// batches) sets row-major C = sum over i < batches of op(A + i stride_a) op(B + i stride_b).
/// A weight's gradient, summed over the images that share it, then needs no buffer of
/// per-image products (plan.hpp's sums_gemm).
template <class B>
inline constexpr bool sums_gemm_batches = requires(B& b, index_t n, const float* fa, float* fc) {
  b.gemm_batch_sum(false, false, n, n, n, fa, n, n, fa, n, n, fc, n, n);
};

/// Whether backend B's gemm, gemm_strided_batched and gemm_batch_sum take T's matrices as
/// they are: every backend for f32 and f64; for bf16 a backend that says so with
/// `static constexpr bool bf16_gemm = true` (host: the CPU's bf16 dot products, sums in
/// f32, each product rounded once). Other 16-bit operands are widened to f32 for an f32
/// GEMM and the product rounded (exec/kernels.hpp), which gives the same values slower.
template <class B, class T>
inline constexpr bool gemms_natively = !is_half_float<T> || (std::is_same_v<T, bf16> && requires { requires B::bf16_gemm; });

}  // namespace luminal
