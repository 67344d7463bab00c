// The Kokkos backend: any Kokkos execution space (Serial, OpenMP, Threads, CUDA, HIP).
// Kernels are the same functors the host backend runs, launched with parallel_for.
#pragma once
#include <Kokkos_Core.hpp>
#include <optional>

#include <luminal/core/backend.hpp>

namespace luminal {

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
template <class T>
struct kokkos_gemm_body {
  bool trans_a, trans_b;
  index_t n, k;
  const T* a;
  index_t lda;
  const T* b;
  index_t ldb;
  T* c;
  index_t ldc;
  index_t batches = 1, stride_a = 0, stride_b = 0;  // C is the sum of `batches` products
  KOKKOS_INLINE_FUNCTION void operator()(index_t flat) const {
    index_t i = flat / n, j = flat % n;
    T acc = 0;
    for (index_t batch = 0; batch < batches; ++batch) {
      const T* ab = a + batch * stride_a;
      const T* bb = b + batch * stride_b;
      for (index_t p = 0; p < k; ++p) {
        T av = trans_a ? ab[p * lda + i] : ab[i * lda + p];
        T bv = trans_b ? bb[j * ldb + p] : bb[p * ldb + j];
        acc += av * bv;
      }
    }
    c[i * ldc + j] = acc;
  }
};
}  // namespace detail

/// Runs kernels on a Kokkos execution space: `compile<kokkos<Kokkos::Serial>>(y)`.
/// Kokkos must be initialized (Kokkos::ScopeGuard) before a program is built.
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
struct kokkos {
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  static constexpr bool host_accessible =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;
  static constexpr const char* name = "kokkos";

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

  template <class T>
  void gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda, const T* b,
            index_t ldb, T* c, index_t ldc) {
    Kokkos::parallel_for("luminal::gemm",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_t>>(space(), 0, m * n),
                         detail::kokkos_gemm_body<T>{trans_a, trans_b, n, k, a, lda, b, ldb, c, ldc});
    space().fence();
  }
  /// C = the sum of `batches` products at fixed strides (backend.hpp's sums_gemm_batches).
  template <class T>
  void gemm_batch_sum(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t lda,
                      index_t stride_a, const T* b, index_t ldb, index_t stride_b, T* c, index_t ldc, index_t batches) {
    Kokkos::parallel_for(
        "luminal::gemm_batch_sum", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_t>>(space(), 0, m * n),
        detail::kokkos_gemm_body<T>{trans_a, trans_b, n, k, a, lda, b, ldb, c, ldc, batches, stride_a, stride_b});
    space().fence();
  }

 private:
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

}  // namespace luminal
