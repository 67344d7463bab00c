// The NCCL communicator: data-parallel training on GPUs, with the gradients summed in
// device memory on the GPUs' own links. The caller creates the ncclComm_t (usually one rank
// per GPU, the unique id sent over MPI) and destroys it after this object; luminal never
// initializes NCCL or MPI behind the caller's back. Link luminal::nccl.
//
//     ncclUniqueId id;                                    // rank 0: ncclGetUniqueId(&id)
//     MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
//     cudaSetDevice(local_rank);
//     ncclComm_t nc;  ncclCommInitRank(&nc, world_size, id, world_rank);
//     luminal::nccl_communicator comm(nc);
//     auto step = compile_train_step<cuda_graph>(loss, adamw{}, data_parallel{comm});
//
//     luminal::nccl_communicator one(luminal::nccl_communicator::one_rank);  // this GPU alone
//
// A compiled step's sums run on the communicator's own stream: each waits for the
// gradients on the program's stream (an event), and the update waits for the sum (another
// event), so the host never blocks and a CUDA Graph captures the whole exchange. The
// set-up calls (broadcast, all_gather, any) and start_sum() also take host memory, staged
// through the device, and block until done. An NCCL error, or a rank that died (NCCL
// reports it as a remote error or a timeout, ncclCommGetAsyncError), throws
// distributed_error naming the call.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data_parallel.hpp"

namespace luminal {

namespace detail {
inline void nccl_check(ncclResult_t result, const char* call, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string message = std::string("luminal: ") + call + " failed: " + ncclGetErrorString(result);
  if (comm)
    if (const char* last = ncclGetLastError(comm); last && *last) message += std::string(" (") + last + ")";
  throw distributed_error(message);
}
inline void nccl_cuda_check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw distributed_error(std::string("luminal: nccl_communicator: ") + call + " failed: " +
                            cudaGetErrorString(status));
}
inline ncclDataType_t nccl_type(dtype_tag type) {
  switch (type) {
    case dtype_tag::f32: return ncclFloat32;
    case dtype_tag::f64: return ncclFloat64;
    case dtype_tag::i32: return ncclInt32;
    case dtype_tag::boolean: return ncclUint8;
    case dtype_tag::bf16: return ncclBfloat16;
    case dtype_tag::f16: return ncclFloat16;
    case dtype_tag::quantized: break;
  }
  throw distributed_error("luminal: nccl_communicator: no NCCL type for this element type");
}
}  // namespace detail

/// A communicator over the caller's ncclComm_t, on the CUDA device that is current when it
/// is constructed (the one the ncclComm_t was made on).
class nccl_communicator final : public communicator {
 public:
  /// Selects the constructor that makes (and owns) a communicator of this GPU alone.
  struct one_rank_t {};
  static constexpr one_rank_t one_rank{};

  /// Uses `comm` (not duplicated, not destroyed).
  explicit nccl_communicator(ncclComm_t comm) : comm_(comm) { set_up(); }
  /// A communicator of one rank on the current device: NCCL's whole path, nothing to exchange.
  explicit nccl_communicator(one_rank_t) {
    int device = 0;
    detail::nccl_cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    detail::nccl_check(ncclCommInitAll(&comm_, 1, &device), "ncclCommInitAll");
    owned_ = true;
    set_up();
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() override {  // no throwing; errors at exit are ignored
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (scratch_) cudaFree(scratch_);
    cudaStreamDestroy(stream_);
    if (owned_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ncclComm_t native() const { return comm_; }

  bool sums_device_memory() const override { return true; }
  std::uint64_t start_device_sum(void* data, std::size_t count, dtype_tag type, void* stream) override {
    auto compute = static_cast<cudaStream_t>(stream);
    const std::uint64_t ready = take_event(), done = take_event();
    check(cudaEventRecord(events_[ready], compute), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, events_[ready], 0), "cudaStreamWaitEvent");
    give_back(ready);  // its wait is queued: the event may be recorded again
    detail::nccl_check(ncclAllReduce(data, data, count, detail::nccl_type(type), ncclSum, comm_, stream_),
                       "ncclAllReduce", comm_);
    check(cudaEventRecord(events_[done], stream_), "cudaEventRecord");
    return done + 1;  // 0 is no sum
  }
  void wait_on_stream(std::uint64_t handle, void* stream) override {
    if (handle == 0) return;
    check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[handle - 1], 0), "cudaStreamWaitEvent");
    give_back(handle - 1);
  }

  /// Host or device memory; blocks until the sum is there (returns a finished handle).
  std::uint64_t start_sum(void* data, std::size_t count, dtype_tag type) override {
    const std::size_t bytes = count * dtype_size(type);
    void* on_device = staged(data, bytes);
    detail::nccl_check(ncclAllReduce(on_device, on_device, count, detail::nccl_type(type), ncclSum, comm_, stream_),
                       "ncclAllReduce", comm_);
    unstage(data, on_device, bytes);
    return 0;
  }
  void wait(std::uint64_t) override {}

  void broadcast(void* data, std::size_t bytes, int root) override {
    void* on_device = staged(data, bytes);
    detail::nccl_check(ncclBroadcast(on_device, on_device, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast",
                       comm_);
    unstage(data, on_device, bytes);
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    // The lengths first, then every text padded to the longest.
    const std::int64_t mine = std::int64_t(text.size());
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(size_));
    gather_bytes(&mine, sizeof mine, lengths.data());
    std::int64_t longest = 1;
    for (std::int64_t n : lengths) longest = std::max(longest, n);
    std::vector<char> padded(std::size_t(longest), '\0'), all(std::size_t(longest) * std::size_t(size_));
    std::copy(text.begin(), text.end(), padded.begin());
    gather_bytes(padded.data(), padded.size(), all.data());
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.emplace_back(all.data() + std::ptrdiff_t(longest) * r, std::size_t(lengths[std::size_t(r)]));
    return out;
  }
  bool any(bool flag) override {
    std::int32_t v = flag ? 1 : 0;
    start_sum(&v, 1, dtype_tag::i32);
    return v != 0;
  }

 private:
  void set_up() {
    detail::nccl_check(ncclCommCount(comm_, &size_), "ncclCommCount", comm_);
    detail::nccl_check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", comm_);
    // Non-blocking: other libraries' work on the legacy default stream does not hold it back.
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  void check(cudaError_t status, const char* call) {
    if (status == cudaSuccess) return;
    ncclResult_t async = ncclSuccess;  // a dead rank shows here rather than in CUDA's message
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess)
      detail::nccl_check(async, "an NCCL collective", comm_);
    detail::nccl_cuda_check(status, call);
  }
  std::uint64_t take_event() {
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      events_.push_back(e);
      free_.push_back(events_.size() - 1);
    }
    const std::uint64_t k = free_.back();
    free_.pop_back();
    return k;
  }
  void give_back(std::uint64_t k) { free_.push_back(k); }

  static bool on_device(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  /// `data` itself when it is device memory, else a device copy of it (after the work
  /// already on the device: `data` may be the program's).
  void* staged(void* data, std::size_t bytes) {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (on_device(data)) return data;
    void* scratch = scratch_for(bytes);
    check(cudaMemcpyAsync(scratch, data, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    return scratch;
  }
  /// Every rank's `bytes` bytes at `mine` (host memory), in rank order, into `all` (host).
  void gather_bytes(const void* mine, std::size_t bytes, void* all) {
    const std::size_t total = bytes * std::size_t(size_);
    char* scratch = static_cast<char*>(scratch_for(total + bytes));
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemcpyAsync(scratch + total, mine, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    detail::nccl_check(ncclAllGather(scratch + total, scratch, bytes, ncclUint8, comm_, stream_), "ncclAllGather",
                       comm_);
    check(cudaMemcpyAsync(all, scratch, total, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void* scratch_for(std::size_t bytes) {
    if (scratch_bytes_ < bytes) {
      if (scratch_) check(cudaFree(scratch_), "cudaFree");
      scratch_ = nullptr;
      check(cudaMalloc(&scratch_, std::max<std::size_t>(bytes, 256)), "cudaMalloc");
      scratch_bytes_ = std::max<std::size_t>(bytes, 256);
    }
    return scratch_;
  }
  void unstage(void* data, void* on_device_copy, std::size_t bytes) {
    if (on_device_copy != data)
      check(cudaMemcpyAsync(data, on_device_copy, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  ncclComm_t comm_ = nullptr;
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<std::uint64_t> free_;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace luminal
