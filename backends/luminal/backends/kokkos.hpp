// The Kokkos backend: any Kokkos execution space (Serial, OpenMP, Threads, CUDA, HIP).
// Kernels are the same functors the host backend runs, launched with parallel_for.
//
// GEMMs go to the vendor's library where the space has one:
//  - host spaces (Serial, OpenMP, Threads): the host backend's OpenBLAS calls
//    (host_gemm.hpp), single-threaded BLAS on parts of the output shared out over the
//    space's own threads. OpenBLAS's thread count is one per process (the host backend
//    sets it to 1), and a Kokkos space's threads are the ones the application gave it:
//    Serial means one thread (an MPI rank per core), OpenMP its OMP_NUM_THREADS;
//  - CUDA: cuBLAS on the space's stream, when LUMINAL_KOKKOS_CUBLAS is defined and the
//    program links cuBLAS (untested: no CUDA Kokkos is built here; see below);
//  - any other space (HIP, SYCL; CUDA without LUMINAL_KOKKOS_CUBLAS): a tiled kernel, a
//    team per 32x32 tile of C with A and B staged through team scratch 16 columns of k at a
//    time. kokkos<Space, kokkos_gemm_kernel::tiled> forces it on any space (the tests run it
//    on the host against BLAS).
// KokkosKernels (KokkosBlas::gemm) was considered: it calls the same vendor libraries (where
// it was built with them) and has a portable kernel of its own, but it is a compiled library
// that an HPC site must build against its own Kokkos (Debian's libtrilinos-kokkos-kernels is
// built for Trilinos' Serial Kokkos), so it would end this backend's header-only use for the
// sake of three GEMM entry points.
#pragma once
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <optional>
#include <stdexcept>
#include <string>
#if defined(KOKKOS_ENABLE_CUDA) && defined(LUMINAL_KOKKOS_CUBLAS)
#include <cublas_v2.h>
#endif

#include <luminal/core/backend.hpp>
#include <luminal/core/exceptions.hpp>

#include "host_gemm.hpp"

namespace luminal {

/// Which GEMM a kokkos backend runs: the vendor's where the space has one (BLAS on host
/// spaces, cuBLAS on CUDA), else the tiled kernel; or the tiled kernel everywhere.
enum class kokkos_gemm_kernel { vendor, tiled };

namespace detail {
template <class Body>
struct kokkos_chunked {
  Body body;
  index_t n, chunk;
  KOKKOS_INLINE_FUNCTION void operator()(index_t c) const {
    index_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
    body(begin, end);
  }
};

/// A host execution space as host_gemm.hpp's pool: its work items run on the space's threads.
template <class ExecSpace>
struct kokkos_host_threads {
  ExecSpace space;
  using chunk_fn = void (*)(const void* body, index_t begin, index_t end);
  struct item {  // a named functor: host-only code, never compiled for a device
    chunk_fn fn;
    const void* body;
    index_t n, grain;
    void operator()(index_t c) const { fn(body, c * grain, std::min(n, (c + 1) * grain)); }
  };
  unsigned size() const { return unsigned(std::max(1, int(space.concurrency()))); }
  void run(index_t n, index_t grain, chunk_fn fn, const void* body) const {
    Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_t>> items(space, 0, (n + grain - 1) / grain);
    Kokkos::parallel_for("luminal::gemm", items, item{fn, body, n, grain});
    space.fence();
  }
};

/// Row-major C[b] = op(A[b]) op(B[b]) (or, `summed`, C = their sum over b) on any space: a
/// team per tile x tile block of C (and per batch unless summed). Each step of k stages a
/// tile x depth block of A and a depth x tile block of B in team scratch, read along
/// memory's order; each thread then adds micro x micro products of them into the block of C,
/// which also lives in scratch, so that the kernel is right for any team size (64 threads
/// on a GPU, one on a host space).
template <class T, class ExecSpace>
struct kokkos_tiled_gemm {
  static constexpr int tile = 32, depth = 16, micro = 4, per_side = tile / micro;
  static constexpr int device_team = per_side * per_side;  // a micro-tile per thread
  using member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using scratch = Kokkos::View<T**, Kokkos::LayoutRight, typename ExecSpace::scratch_memory_space,
                               Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static std::size_t scratch_bytes() {
    return scratch::shmem_size(tile, depth) + scratch::shmem_size(depth, tile) + scratch::shmem_size(tile, tile);
  }

  host_gemm_batch<T> g;  // its fields only (block() is host code)
  index_t batches;
  bool summed;

  KOKKOS_INLINE_FUNCTION void operator()(const member& team) const {
    const index_t tiles_n = (g.n + tile - 1) / tile, tiles_m = (g.m + tile - 1) / tile;
    index_t league = team.league_rank();
    const index_t col0 = (league % tiles_n) * tile;
    league /= tiles_n;
    const index_t row0 = (league % tiles_m) * tile, batch = league / tiles_m;
    scratch as(team.team_scratch(0), tile, depth), bs(team.team_scratch(0), depth, tile),
        cs(team.team_scratch(0), tile, tile);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile * tile), [&](int e) { cs(e / tile, e % tile) = T(0); });
    const index_t first = summed ? 0 : batch, last = summed ? batches : batch + 1;
    for (index_t b = first; b < last; ++b) {
      const T* a = g.a + b * g.stride_a;
      const T* bm = g.b + b * g.stride_b;
      for (index_t p0 = 0; p0 < g.k; p0 += depth) {
        team.team_barrier();  // the previous step's reads of as and bs are done
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile * depth), [&](int e) {
          // Neighbouring threads take neighbouring addresses: along k unless A is transposed.
          const int i = g.trans_a ? e % tile : e / depth, p = g.trans_a ? e / tile : e % depth;
          const index_t row = row0 + i, kp = p0 + p;
          as(i, p) = row < g.m && kp < g.k ? (g.trans_a ? a[kp * g.lda + row] : a[row * g.lda + kp]) : T(0);
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, depth * tile), [&](int e) {
          const int j = g.trans_b ? e / depth : e % tile, p = g.trans_b ? e % depth : e / tile;
          const index_t col = col0 + j, kp = p0 + p;
          bs(p, j) = col < g.n && kp < g.k ? (g.trans_b ? bm[col * g.ldb + kp] : bm[kp * g.ldb + col]) : T(0);
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, per_side * per_side), [&](int t) {
          // Rows ti, ti + per_side, ...: a warp's threads read neighbouring columns of bs.
          const int ti = t / per_side, tj = t % per_side;
          T acc[micro][micro];
          for (int r = 0; r < micro; ++r)
            for (int c = 0; c < micro; ++c) acc[r][c] = cs(ti + r * per_side, tj + c * per_side);
          for (int p = 0; p < depth; ++p) {
            T av[micro], bv[micro];
            for (int r = 0; r < micro; ++r) av[r] = as(ti + r * per_side, p);
            for (int c = 0; c < micro; ++c) bv[c] = bs(p, tj + c * per_side);
            for (int r = 0; r < micro; ++r)
              for (int c = 0; c < micro; ++c) acc[r][c] += av[r] * bv[c];
          }
          for (int r = 0; r < micro; ++r)
            for (int c = 0; c < micro; ++c) cs(ti + r * per_side, tj + c * per_side) = acc[r][c];
        });
      }
    }
    team.team_barrier();
    T* out = g.c + (summed ? 0 : batch * g.stride_c);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tile * tile), [&](int e) {
      const index_t row = row0 + e / tile, col = col0 + e % tile;
      if (row < g.m && col < g.n) out[row * g.ldc + col] = cs(e / tile, e % tile);
    });
  }
};

template <class ExecSpace, class T>
void kokkos_tiled_gemm_run(const ExecSpace& space, const host_gemm_batch<T>& g, index_t batches, bool summed) {
  using kernel = kokkos_tiled_gemm<T, ExecSpace>;
  const index_t teams = ((g.m + kernel::tile - 1) / kernel::tile) * ((g.n + kernel::tile - 1) / kernel::tile) *
                        (summed ? 1 : batches);
  if (teams > index_t(INT32_MAX))
    throw std::length_error("luminal: kokkos gemm: " + std::to_string(teams) + " tiles exceed a Kokkos league");
  constexpr bool on_host = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
  Kokkos::TeamPolicy<ExecSpace> policy(space, int(teams), on_host ? 1 : kernel::device_team);
  Kokkos::parallel_for("luminal::tiled_gemm", policy.set_scratch_size(0, Kokkos::PerTeam(kernel::scratch_bytes())),
                       kernel{g, batches, summed});
  space.fence();
}

#if defined(KOKKOS_ENABLE_CUDA) && defined(LUMINAL_KOKKOS_CUBLAS)
// cuBLAS on a Kokkos::Cuda instance's stream. Never run: no CUDA Kokkos is built here, and
// tests/kokkos/check_cuda_kokkos.sh does not define LUMINAL_KOKKOS_CUBLAS. Only this block
// was compiled and linked on its own, outside Kokkos, against cuBLAS's headers.
inline void kokkos_cublas_check(cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("luminal: kokkos gemm: cuBLAS status " + std::to_string(int(status)));
}
inline int kokkos_cublas_int(index_t v) {
  if (v < 0 || v > INT32_MAX)
    throw std::length_error("luminal: kokkos gemm: extent " + std::to_string(v) + " does not fit cuBLAS's int");
  return int(v);
}
/// A handle per host thread, kept to the process's end (destroying it at exit could come
/// after the CUDA driver's own shutdown).
inline cublasHandle_t kokkos_cublas_handle(cudaStream_t stream) {
  static thread_local cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    kokkos_cublas_check(cublasCreate(&h));
    return h;
  }();
  kokkos_cublas_check(cublasSetStream(handle, stream));
  return handle;
}
/// Row-major through column-major cuBLAS, as cuda.hpp: C^T = op(B)^T op(A)^T.
template <class T>
void kokkos_cublas_gemm(cudaStream_t stream, const host_gemm_batch<T>& g, index_t batches, bool summed) {
  cublasHandle_t h = kokkos_cublas_handle(stream);
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = kokkos_cublas_int(g.m), n = kokkos_cublas_int(g.n), k = kokkos_cublas_int(g.k);
  const int lda = kokkos_cublas_int(g.lda), ldb = kokkos_cublas_int(g.ldb), ldc = kokkos_cublas_int(g.ldc);
  const T one = 1, zero = 0;
  auto one_gemm = [&](const T* a, const T* b, T* c, const T* beta) {
    if constexpr (std::is_same_v<T, float>)
      kokkos_cublas_check(cublasSgemm(h, tb, ta, n, m, k, &one, b, ldb, a, lda, beta, c, ldc));
    else
      kokkos_cublas_check(cublasDgemm(h, tb, ta, n, m, k, &one, b, ldb, a, lda, beta, c, ldc));
  };
  if (summed) {  // beta 1 after the first batch: the sum grows in C
    for (index_t b = 0; b < batches; ++b) one_gemm(g.a + b * g.stride_a, g.b + b * g.stride_b, g.c, b ? &one : &zero);
  } else if (batches == 1) {
    one_gemm(g.a, g.b, g.c, &zero);
  } else if constexpr (std::is_same_v<T, float>) {
    kokkos_cublas_check(cublasSgemmStridedBatched(h, tb, ta, n, m, k, &one, g.b, ldb, g.stride_b, g.a, lda, g.stride_a,
                                                  &zero, g.c, ldc, g.stride_c, kokkos_cublas_int(batches)));
  } else {
    kokkos_cublas_check(cublasDgemmStridedBatched(h, tb, ta, n, m, k, &one, g.b, ldb, g.stride_b, g.a, lda, g.stride_a,
                                                  &zero, g.c, ldc, g.stride_c, kokkos_cublas_int(batches)));
  }
}
#endif
}  // namespace detail

/// Runs kernels on a Kokkos execution space: `compile<kokkos<Kokkos::Serial>>(y)`.
/// Kokkos must be initialized (Kokkos::ScopeGuard) before a program is built. `Gemm`:
/// kokkos_gemm_kernel::tiled runs luminal's own tiled GEMM even where a vendor's exists.
template <class ExecSpace = Kokkos::DefaultExecutionSpace, kokkos_gemm_kernel Gemm = kokkos_gemm_kernel::vendor>
struct kokkos {
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  static constexpr bool host_accessible =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;
  static constexpr const char* name = "kokkos";
  /// GEMMs through the host backend's BLAS: the space runs on the host, on host memory.
  static constexpr bool blas_gemm = Gemm == kokkos_gemm_kernel::vendor && host_accessible &&
                                    Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
  /// bf16 GEMMs as the host backend runs them (host_gemm.hpp: AVX512_BF16 where the CPU
  /// has it); other spaces widen bf16 operands to f32 (core/backend.hpp's gemms_natively).
  static constexpr bool bf16_gemm = blas_gemm;
#if defined(KOKKOS_ENABLE_CUDA) && defined(LUMINAL_KOKKOS_CUBLAS)
  static constexpr bool cublas_gemm = Gemm == kokkos_gemm_kernel::vendor && std::is_same_v<ExecSpace, Kokkos::Cuda>;
#else
  static constexpr bool cublas_gemm = false;
#endif

  void* allocate(std::size_t bytes) {
    if (!Kokkos::is_initialized())
      throw std::logic_error("luminal: the kokkos backend needs Kokkos::initialize (or a Kokkos::ScopeGuard) first");
    return Kokkos::kokkos_malloc<memory_space>("luminal", bytes > 0 ? bytes : 1);
  }
  void deallocate(void* p) { Kokkos::kokkos_free<memory_space>(p); }
  void to_device(void* dst, const void* src, std::size_t bytes) { copy<memory_space, Kokkos::HostSpace>(dst, src, bytes); }
  void to_host(void* dst, const void* src, std::size_t bytes) { copy<Kokkos::HostSpace, memory_space>(dst, src, bytes); }
  void device_copy(void* dst, const void* src, std::size_t bytes) { copy<memory_space, memory_space>(dst, src, bytes); }

  template <class Body>
  void parallel_for(index_t n, const Body& body) {
    if (n <= 0) return;
    launch(n, body);  // kernel bodies name their graph by number (flat.hpp): small under nvcc too
  }

  /// Row-major C = op(A) op(B).
  template <class T>
  void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda, const T* b,
            index_t ldb, T* c, index_t ldc) {
    run_gemm(detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0}, 1, false);
  }
  /// `batches` GEMMs whose operands lie at fixed strides (0: one matrix for every batch).
  template <class T>
  void gemm_strided_batched(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda,
                            index_t stride_a, const T* b, index_t ldb, index_t stride_b, T* c, index_t ldc,
                            index_t stride_c, index_t batches) {
    run_gemm(
        detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c},
        batches, false);
  }
  /// C = the sum of `batches` products at fixed strides (backend.hpp's sums_gemm_batches).
  template <class T>
  void gemm_batch_sum(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda,
                      index_t stride_a, const T* b, index_t ldb, index_t stride_b, T* c, index_t ldc, index_t batches) {
    run_gemm(detail::host_gemm_batch<T>{trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, 0},
             batches, true);
  }

 private:
  template <class T>
  void run_gemm(const detail::host_gemm_batch<T>& g, index_t batches, bool summed) {
    if (g.m <= 0 || g.n <= 0 || batches <= 0) return;
    if constexpr (blas_gemm) {
      detail::kokkos_host_threads<ExecSpace> threads{space()};
      if (summed) detail::host_gemm_batch_sum(g, batches, threads);
      else detail::host_gemm(g, batches, threads);
    } else if constexpr (cublas_gemm) {
#if defined(KOKKOS_ENABLE_CUDA) && defined(LUMINAL_KOKKOS_CUBLAS)
      detail::kokkos_cublas_gemm(space().cuda_stream(), g, batches, summed);
#endif
    } else {
      detail::kokkos_tiled_gemm_run(space(), g, batches, summed);
    }
  }

  template <class Body>
  void launch(index_t n, const Body& body) {
    // Host spaces get a few large chunks (tight inner loops); devices one index each.
    index_t chunk = host_accessible ? std::max<index_t>(1, n / (4 * index_t(space().concurrency()))) : 1;
    index_t chunks = (n + chunk - 1) / chunk;
    Kokkos::parallel_for("luminal::kernel",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_t>>(space(), 0, chunks),
                         detail::kokkos_chunked<Body>{body, n, chunk});
    space().fence();
  }

  // One instance, made at the first launch (Kokkos must be initialized by then) and
  // copied into every policy: a Kokkos::Cuda() made per launch allocated on the host heap
  // (Kokkos 3.4 keeps its instance in a std::shared_ptr with a custom deleter), twice per
  // kernel of every run.
  ExecSpace& space() {
    if (!space_) space_.emplace();
    return *space_;
  }
  std::optional<ExecSpace> space_;

  template <class To, class From>
  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    Kokkos::View<char*, To, Kokkos::MemoryTraits<Kokkos::Unmanaged>> to(static_cast<char*>(dst), bytes);
    Kokkos::View<const char*, From, Kokkos::MemoryTraits<Kokkos::Unmanaged>> from(static_cast<const char*>(src), bytes);
    Kokkos::deep_copy(to, from);
  }
};

/// Binds a Kokkos::View as input `name` of a program or a training step, without copying:
/// the View's memory is read where it lies, its extents are the input's shape. The View
/// must be row-major (LayoutRight, or of rank 0 or 1) and contiguous, in memory the
/// program's backend reads (its memory space), and stay unchanged until run() returns.
/// Outputs go the other way with write_output_to<I>(view.data()).
///
///     Kokkos::View<float**> u("u", n, 1);                 // the application's field
///     luminal::bind_view(step, "u", u);                    // the step reads u in place
///     eval.write_output_to<0>(source.data());              // and writes into a View
template <class Target, class Data, class... Properties>
void bind_view(Target& target, std::string_view name, const Kokkos::View<Data, Properties...>& view) {
  using V = Kokkos::View<Data, Properties...>;
  static_assert(V::rank <= 1 || std::is_same_v<typename V::array_layout, Kokkos::LayoutRight>,
                "luminal: bind_view needs a row-major View (Kokkos::LayoutRight) of rank 2 or more");
  if (!view.span_is_contiguous())
    throw input_error("luminal: bind_view: the View '" + view.label() + "' bound to '" + std::string(name) +
                      "' is not contiguous (a subview with strides); copy it into a contiguous View first");
  std::array<index_t, V::rank> shape{};
  for (std::size_t k = 0; k < V::rank; ++k) shape[k] = index_t(view.extent(k));
  target.bind_device(name, view.data(), std::span<const index_t>(shape.data(), shape.size()));
}

}  // namespace luminal
