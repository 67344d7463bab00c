// The CUDA backend: device memory, every fused group launched as a kernel instantiated by
// nvcc from the same functors the host runs, block-level reductions, cuBLAS for GEMM
// (strided-batched where the batch is), one stream per device that every luminal object
// launches on in order, and optional CUDA Graph replay so that a compiled training step is
// one graph launch.
//
//     // app.cu, compiled by nvcc (CMake: link luminal::cuda)
//     #include <luminal/luminal.hpp>
//     #include <luminal/backends/cuda.hpp>
//     auto prog = luminal::compile<luminal::cuda>(y);          // or cuda_graph
//     prog.bind("x", images);                // host -> device, once per bind
//     prog.run();                            // queues the kernels; does not wait
//     xt::xarray<float> out = prog.output<0>();  // device -> host, waits for them
//     if (luminal::cuda::device_count() == 0) { /* no GPU: use luminal::host */ }
//
// Memory is not host-accessible: bind() copies, bind_view() of host memory throws, and
// outputs are copied out. Every CUDA and cuBLAS call is checked; a failure throws
// luminal::cuda_error naming the call and CUDA's own message.
#pragma once
#if !defined(__CUDACC__)
#error "luminal/backends/cuda.hpp must be compiled by nvcc (a .cu file, or LANGUAGE CUDA in CMake)"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <luminal/core/backend.hpp>

#include <luminal/exec/kernels.hpp>

#include "cuda_kernels.hpp"
#include "cuda_launch_settings.hpp"

namespace luminal {

/// A CUDA or cuBLAS call failed; what() names the call and the error.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline void cuda_check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw cuda_error(std::string("luminal: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
                     cudaGetErrorString(status) + ")");
}
inline void cublas_check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw cuda_error(std::string("luminal: ") + call + " failed: " + cublasGetStatusName(status) + " (" +
                     cublasGetStatusString(status) + ")");
}
#define LUMINAL_CUDA_CHECK(call) ::luminal::detail::cuda_check((call), #call)
#define LUMINAL_CUBLAS_CHECK(call) ::luminal::detail::cublas_check((call), #call)

/// The stream that every luminal object on one device launches on. One stream orders all
/// of their work: a program reads what a parameter_store, a tape or another program wrote
/// before it without the host waiting in between, and only a copy to the host waits. It
/// lives while any backend object uses it.
class device_stream {
 public:
  explicit device_stream(cudaStream_t s) : stream_(s) {}
  device_stream(const device_stream&) = delete;
  device_stream& operator=(const device_stream&) = delete;
  ~device_stream() {  // no throwing here; errors at exit (driver shutting down) are ignored
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

  /// The stream of `device`, created on first use.
  static std::shared_ptr<device_stream> of(int device) {
    static std::mutex mutex;
    static std::map<int, std::weak_ptr<device_stream>> streams;
    std::lock_guard lock(mutex);
    if (auto held = streams[device].lock()) return held;
    cudaStream_t s = nullptr;
    // Non-blocking: the legacy default stream (other libraries' work) does not serialize it.
    LUMINAL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    auto made = std::make_shared<device_stream>(s);
    streams[device] = made;
    return made;
  }

 private:
  cudaStream_t stream_;
};

/// What one backend object owns: its cuBLAS handle (created at the first GEMM) and its
/// captured graphs, with a share of its device's stream. Shared by copies of the object.
struct cuda_state {
  struct captured {
    std::vector<std::byte> key;  // the launch parameters the graph was captured with
    cudaGraphExec_t exec = nullptr;  // null: seen once, not captured yet
  };
  int device = 0;
  int multiprocessors = 1;
  int compute_major = 0;  // the device's compute capability, major version
  std::shared_ptr<device_stream> shared_stream;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<captured> graphs;  // most recently used last
  // The partial results of reductions to few outputs (basic_cuda::parallel_reduce): a
  // fixed size, allocated with the state, so that no capture allocates and no captured
  // graph holds an address that is later freed.
  void* reduce_parts = nullptr;
  static constexpr std::size_t reduce_parts_bytes = 1 << 16;
  std::size_t bytes_to_device = 0, bytes_to_host = 0, graph_captures = 0, graph_launches = 0;

  cuda_state() {
    LUMINAL_CUDA_CHECK(cudaGetDevice(&device));
    LUMINAL_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    LUMINAL_CUDA_CHECK(cudaDeviceGetAttribute(&compute_major, cudaDevAttrComputeCapabilityMajor, device));
    shared_stream = device_stream::of(device);
    stream = shared_stream->get();
    LUMINAL_CUDA_CHECK(cudaMalloc(&reduce_parts, reduce_parts_bytes));
  }
  cuda_state(const cuda_state&) = delete;
  cuda_state& operator=(const cuda_state&) = delete;
  ~cuda_state() {  // no throwing here; errors at exit (driver shutting down) are ignored
    cudaStreamSynchronize(stream);
    for (auto& g : graphs)
      if (g.exec) cudaGraphExecDestroy(g.exec);
    if (blas) cublasDestroy(blas);
    cudaFree(reduce_parts);
  }
  cublasHandle_t handle() {
    if (!blas) {
      LUMINAL_CUBLAS_CHECK(cublasCreate(&blas));
      LUMINAL_CUBLAS_CHECK(cublasSetStream(blas, stream));
    }
    return blas;
  }
};

inline cublasOperation_t cublas_op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

inline int cublas_int(index_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw cuda_error(std::string("luminal: cuda gemm: ") + what + " = " + std::to_string(v) +
                     " does not fit cuBLAS's 32-bit int");
  return int(v);
}

}  // namespace detail

/// Runs programs on the current CUDA device: `compile<cuda>(y)`. Every luminal object on
/// a device launches its kernels, GEMMs and copies on that device's one stream, in the
/// order the host issues them, and the host does not wait for them: a training step
/// queues its programs' work back to back. Copies to the host wait for everything queued
/// before them, so results are complete when they are read. (Drive a device from one host
/// thread at a time: threads would interleave their work on its stream.)
/// With Graphs, a program's kernels are captured once per set of buffers and extents into
/// a CUDA Graph and replayed with one launch (see cuda_graph).
template <bool Graphs>
struct basic_cuda {
  static constexpr bool host_accessible = false;
  static constexpr const char* name = Graphs ? "cuda_graph" : "cuda";
  static constexpr bool graphs = Graphs;
  /// Reductions over at least this many elements use a block per output (shared-memory
  /// tree); shorter ones one thread per output, which keeps neighbouring threads on
  /// neighbouring memory when the reduced axis is not the last.
  static constexpr index_t block_reduce_from = 128;
  /// The fewest elements of a reduced axis that a block takes when the axis is split
  /// (eight per thread).
  static constexpr index_t split_reduce_slice = 8 * detail::cuda_block;
  /// Graphs kept per backend object (a program's own, unless it was given a copy of one
  /// already in use): a training step alternates between two buffer sets, and a tape runs
  /// a block's programs once per layer a step, each call on buffers of its own. Past this
  /// many, the least recently used graph goes, and a key seen again after that is run
  /// uncaptured first.
  static constexpr std::size_t graph_cache = 16;

  basic_cuda() : settings_(cuda_launch_settings::from_environment()) {}
  explicit basic_cuda(const cuda_launch_settings& settings) : settings_(settings) {}
  const cuda_launch_settings& launch_settings() const { return settings_; }

  /// CUDA devices this process can use; 0 without a GPU or driver (never throws).
  static int device_count() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error
      return 0;
    }
    return n;
  }

  void* allocate(std::size_t bytes) {
    state();  // the device must work before memory is handed out
    void* p = nullptr;
    LUMINAL_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    return p;
  }
  /// Waits for all streams first: memory of a parameter_store may be in use by a
  /// program's stream. Errors are ignored (this runs in destructors, also at exit).
  void deallocate(void* p) noexcept {
    if (!p) return;
    cudaDeviceSynchronize();
    cudaFree(p);
  }
  /// Queued on the stream; the source may be reused as soon as this returns. CUDA takes
  /// ordinary (pageable) host memory in before returning; from page-locked memory, which
  /// the GPU would read later, the copy is waited for.
  void to_device(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    auto& s = state();
    LUMINAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.stream));
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, src) != cudaSuccess) cudaGetLastError();
    else if (attributes.type != cudaMemoryTypeUnregistered) LUMINAL_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    s.bytes_to_device += bytes;
  }
  /// Waits for everything queued before it, then copies.
  void to_host(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    auto& s = state();
    LUMINAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.stream));
    LUMINAL_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    s.bytes_to_host += bytes;
  }
  /// Queued on the stream.
  void device_copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    LUMINAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state().stream));
  }

  /// Launches body over [0, n) on the stream, a chunk of consecutive indices per thread
  /// (cuda_launch_settings); does not wait.
  template <class Body>
  void parallel_for(index_t n, const Body& body) {
    if (n <= 0) return;
    auto& s = state();
    const index_t per_thread = detail::walks_rows<Body> ? settings_.row_elements : settings_.flat_elements;
    // Kernel bodies name their graph by number (flat.hpp), so the kernel's type stays small.
    launch_kernel(s, detail::for_each_kernel<Body>, grid((n + per_thread - 1) / per_thread, s), body, n, per_thread);
  }

  /// A reduction of `outputs` values over `extent` elements each (loop_kernels.hpp's
  /// reduce_kernel): block-level for long axes, one thread per output for short ones.
  /// Fewer outputs than it takes to fill the GPU (a gradient's norm is one) split each
  /// axis into parts, a block each, and a second kernel combines the parts in order: one
  /// block alone would wait on its loads one after the other.
  template <class Body>
  void parallel_reduce(index_t outputs, index_t extent, const Body& body) {
    using T = typename Body::value_type;
    if (outputs <= 0) return;
    if (extent < block_reduce_from) return parallel_for(outputs, body);
    auto& s = state();
    const index_t busy = index_t(s.multiprocessors) * 4;  // blocks that keep every SM loaded
    const index_t parts = std::min((busy + outputs - 1) / outputs, extent / split_reduce_slice);
    if (outputs < busy && parts > 1 &&
        std::size_t(outputs * parts) * sizeof(T) <= detail::cuda_state::reduce_parts_bytes) {
      T* parts_memory = static_cast<T*>(s.reduce_parts);
      launch_kernel(s, detail::partial_reduce_kernel<Body>, unsigned(outputs * parts), body, extent, parts,
                    parts_memory);
      launch_kernel(s, detail::combine_parts_kernel<Body>, grid(outputs, s), body, outputs, parts,
                    static_cast<const T*>(parts_memory));
      return;
    }
    if constexpr (detail::shuffles<T>) {
      // A warp per output only where the outputs alone fill the GPU: few outputs over a
      // long axis (an MLP's bias gradients: 512 sums of a batch) keep a block each, whose
      // threads share each output's loads.
      if (extent < settings_.warp_reduce_below && outputs >= busy) {
        constexpr index_t warps_per_block = detail::cuda_block / 32;
        index_t blocks = std::min<index_t>((outputs + warps_per_block - 1) / warps_per_block,
                                           index_t(s.multiprocessors) * 64);
        launch_kernel(s, detail::warp_reduce_kernel<Body>, unsigned(blocks), body, outputs, extent);
        return;
      }
    }
    index_t blocks = std::min<index_t>(outputs, index_t(s.multiprocessors) * 64);
    launch_kernel(s, detail::block_reduce_kernel<Body>, unsigned(blocks), body, outputs, extent);
  }

  /// Row-major C = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T, i.e.
  /// the operands swap and each row-major matrix is read as its column-major transpose.
  void gemm(bool ta, bool tb, index_t m, index_t n, index_t k, const float* a, index_t lda, const float* b,
            index_t ldb, float* c, index_t ldc) {
    const float one = 1, zero = 0;
    LUMINAL_CUBLAS_CHECK(cublasSgemm(state().handle(), detail::cublas_op(tb), detail::cublas_op(ta),
                                     detail::cublas_int(n, "n"), detail::cublas_int(m, "m"), detail::cublas_int(k, "k"),
                                     &one, b, detail::cublas_int(ldb, "ldb"), a, detail::cublas_int(lda, "lda"), &zero,
                                     c, detail::cublas_int(ldc, "ldc")));
  }
  void gemm(bool ta, bool tb, index_t m, index_t n, index_t k, const double* a, index_t lda, const double* b,
            index_t ldb, double* c, index_t ldc) {
    const double one = 1, zero = 0;
    LUMINAL_CUBLAS_CHECK(cublasDgemm(state().handle(), detail::cublas_op(tb), detail::cublas_op(ta),
                                     detail::cublas_int(n, "n"), detail::cublas_int(m, "m"), detail::cublas_int(k, "k"),
                                     &one, b, detail::cublas_int(ldb, "ldb"), a, detail::cublas_int(lda, "lda"), &zero,
                                     c, detail::cublas_int(ldc, "ldc")));
  }
  /// `batches` GEMMs whose operands lie at fixed strides (0: the same matrix every time).
  void gemm_strided_batched(bool ta, bool tb, index_t m, index_t n, index_t k, const float* a, index_t lda,
                            index_t stride_a, const float* b, index_t ldb, index_t stride_b, float* c, index_t ldc,
                            index_t stride_c, index_t batches) {
    const float one = 1, zero = 0;
    LUMINAL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        state().handle(), detail::cublas_op(tb), detail::cublas_op(ta), detail::cublas_int(n, "n"),
        detail::cublas_int(m, "m"), detail::cublas_int(k, "k"), &one, b, detail::cublas_int(ldb, "ldb"), stride_b, a,
        detail::cublas_int(lda, "lda"), stride_a, &zero, c, detail::cublas_int(ldc, "ldc"), stride_c,
        detail::cublas_int(batches, "batches")));
  }
  void gemm_strided_batched(bool ta, bool tb, index_t m, index_t n, index_t k, const double* a, index_t lda,
                            index_t stride_a, const double* b, index_t ldb, index_t stride_b, double* c, index_t ldc,
                            index_t stride_c, index_t batches) {
    const double one = 1, zero = 0;
    LUMINAL_CUBLAS_CHECK(cublasDgemmStridedBatched(
        state().handle(), detail::cublas_op(tb), detail::cublas_op(ta), detail::cublas_int(n, "n"),
        detail::cublas_int(m, "m"), detail::cublas_int(k, "k"), &one, b, detail::cublas_int(ldb, "ldb"), stride_b, a,
        detail::cublas_int(lda, "lda"), stride_a, &zero, c, detail::cublas_int(ldc, "ldc"), stride_c,
        detail::cublas_int(batches, "batches")));
  }

  /// Runs `launches` (a program's kernels; they must only launch work on this stream).
  /// With Graphs, the first call for a key runs them directly (a warm-up: cuBLAS and the
  /// driver set themselves up outside any capture), the second captures them into a CUDA
  /// Graph, and that and every later call launch the graph: one launch per run. `key` must
  /// hold every value the launches depend on (program.hpp passes the buffer addresses and
  /// the extents). Rerunning a program's kernels is harmless: each reads only inputs and
  /// what earlier kernels of the same run wrote.
  template <class F>
  void launch(std::span<const std::byte> key, F&& launches) {
    if constexpr (!Graphs) {
      launches();
    } else {
      auto& s = state();
      auto hit = std::find_if(s.graphs.begin(), s.graphs.end(), [&](const auto& g) {
        return g.key.size() == key.size() && std::memcmp(g.key.data(), key.data(), key.size()) == 0;
      });
      if (hit == s.graphs.end()) {
        if (s.graphs.size() == graph_cache) {
          if (s.graphs.front().exec) cudaGraphExecDestroy(s.graphs.front().exec);
          s.graphs.erase(s.graphs.begin());
        }
        s.graphs.push_back({std::vector<std::byte>(key.begin(), key.end()), nullptr});
        launches();  // first sight: warm-up, uncaptured
        return;
      }
      if (hit != s.graphs.end() - 1) std::rotate(hit, hit + 1, s.graphs.end());  // most recently used last
      auto& entry = s.graphs.back();
      if (!entry.exec) {
        s.handle();  // cuBLAS is set up before the capture, never inside it
        entry.exec = capture(s, launches);
        ++s.graph_captures;
      }
      LUMINAL_CUDA_CHECK(cudaGraphLaunch(entry.exec, s.stream));
      ++s.graph_launches;
    }
  }

  /// Waits for everything launched on the device's stream.
  void synchronize() {
    if (state_) LUMINAL_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
  }
  /// The stream kernels run on (the device's, shared by every luminal object on it).
  cudaStream_t stream() { return state().stream; }

  /// Bytes copied host -> device and device -> host through this backend object so far.
  std::size_t bytes_to_device() const { return state_ ? state_->bytes_to_device : 0; }
  std::size_t bytes_to_host() const { return state_ ? state_->bytes_to_host : 0; }
  /// Graphs captured and graph launches so far (cuda_graph).
  std::size_t graph_captures() const { return state_ ? state_->graph_captures : 0; }
  std::size_t graph_launches() const { return state_ ? state_->graph_launches : 0; }

 private:
  // Created at first use, so that building a program type or listing tests touches no GPU.
  detail::cuda_state& state() {
    if (!state_) state_ = std::make_shared<detail::cuda_state>();
    return *state_;
  }
  /// Launches kernel(args...) on `blocks` blocks of cuda_block threads, on the stream;
  /// with programmatic dependent launch where the settings and the GPU allow it.
  template <class... Params, class... Args>
  void launch_kernel(detail::cuda_state& s, void (*kernel)(Params...), unsigned blocks, const Args&... args) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(detail::cuda_block);
    config.dynamicSmemBytes = 0;
    config.stream = s.stream;
    cudaLaunchAttribute dependent{};
    dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    dependent.val.programmaticStreamSerializationAllowed = 1;
    if (settings_.dependent_launch && s.compute_major >= 9) {
      config.attrs = &dependent;
      config.numAttrs = 1;
    }
    LUMINAL_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, Params(args)...));
  }
  static unsigned grid(index_t n, const detail::cuda_state& s) {
    index_t blocks = (n + detail::cuda_block - 1) / detail::cuda_block;
    return unsigned(std::min<index_t>(blocks, index_t(s.multiprocessors) * 32));  // grid-stride beyond
  }
  template <class F>
  static cudaGraphExec_t capture(detail::cuda_state& s, F& launches) {
    LUMINAL_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      launches();
    } catch (...) {
      cudaStreamEndCapture(s.stream, &graph);  // ends the capture; the error is the one thrown
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    LUMINAL_CUDA_CHECK(cudaStreamEndCapture(s.stream, &graph));
    cudaGraphExec_t exec = nullptr;
    cudaError_t status = cudaGraphInstantiate(&exec, graph, 0ull);
    cudaGraphDestroy(graph);
    LUMINAL_CUDA_CHECK(status);
    return exec;
  }

  cuda_launch_settings settings_;
  std::shared_ptr<detail::cuda_state> state_;
};

/// Kernels and cuBLAS launched one by one on the program's stream.
using cuda = basic_cuda<false>;
/// The same, captured into a CUDA Graph per set of buffers and extents and replayed: a
/// compiled training step is one graph launch. Per-kernel profiling runs uncaptured.
using cuda_graph = basic_cuda<true>;

static_assert(backend<cuda>);
static_assert(backend<cuda_graph>);

}  // namespace luminal
