// The communicator concept a data-parallel training step runs its gradient exchange on:
// sums across ranks that start, progress and finish while kernels run, a broadcast and a
// gather for the set-up checks. One implementation per transport (MPI in mpi.hpp, NCCL in
// nccl.hpp); this header needs none of them.
//
//     luminal::mpi_communicator comm(MPI_COMM_WORLD);            // distributed/mpi.hpp
//     auto step = compile_train_step(loss, adam{}, data_parallel{comm});
//     luminal::nccl_communicator gpus(nccl_comm);                 // distributed/nccl.hpp
//     auto on_gpu = compile_train_step<cuda>(loss, adam{}, data_parallel{gpus});
//
// local_communicator is the one-rank communicator: the exchange's path without a transport.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dtype.hpp"

namespace luminal {

/// An MPI (or other transport) failure, or ranks that do not agree (thrown on every rank alike).
class distributed_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A group of ranks that sum, broadcast and gather together. Every rank must make the same
/// calls in the same order (as with any collective).
class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts summing `count` elements of type `type` at `data` over the ranks, in place; the
  /// memory must stay valid and untouched until wait() on the returned handle.
  virtual std::uint64_t start_sum(void* data, std::size_t count, dtype_tag type) = 0;
  /// Lets sums in flight advance (a transport that progresses only inside its calls).
  virtual void progress() {}
  /// Returns when the sum that `handle` names has arrived in its memory.
  virtual void wait(std::uint64_t handle) = 0;

  /// Whether the communicator sums a GPU's memory in the GPU's stream order (NCCL): a
  /// data-parallel step on a GPU backend needs one, since its gradients never reach the host.
  virtual bool sums_device_memory() const { return false; }
  /// Starts summing `count` elements of device memory at `data` in place, after the work
  /// already queued on `stream` (a cudaStream_t); does not block the host.
  virtual std::uint64_t start_device_sum(void* /*data*/, std::size_t /*count*/, dtype_tag /*type*/,
                                         void* /*stream*/) {
    throw distributed_error("luminal: this communicator sums host memory only; a GPU backend's gradients need "
                            "one that sums device memory (nccl_communicator, luminal/distributed/nccl.hpp)");
  }
  /// Makes the work queued on `stream` after this call wait for the device sum `handle`.
  virtual void wait_on_stream(std::uint64_t /*handle*/, void* /*stream*/) {
    throw distributed_error("luminal: this communicator has no device sums to wait for");
  }

  /// Makes `bytes` bytes at `data` rank `root`'s on every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  /// Every rank's `text`, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& text) = 0;
  /// Whether `flag` is true on any rank.
  virtual bool any(bool flag) = 0;
};

/// One rank on its own: sums and broadcasts leave the data as it is.
class local_communicator final : public communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::uint64_t start_sum(void*, std::size_t, dtype_tag) override { return 0; }
  void wait(std::uint64_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& text) override { return {text}; }
  bool any(bool flag) override { return flag; }
};

/// Selects data-parallel training in compile_train_step: every parameter's gradient is
/// averaged over the communicator's ranks before the update. Gradients travel in buckets
/// of about BucketBytes (the last layers' first, as the backward produces them), and the
/// sum of one bucket runs while the backward computes the next.
///
///     auto step = compile_train_step(loss, adamw{}, data_parallel{comm});
///     auto fine = compile_train_step(loss, adamw{}, data_parallel<(64 << 10)>{comm});
template <std::size_t BucketBytes = (std::size_t(1) << 20)>
struct data_parallel {
  static_assert(BucketBytes > 0, "luminal: data_parallel: the bucket size must be positive");
  static constexpr std::size_t bucket_bytes = BucketBytes;
  communicator& comm;
};
data_parallel(communicator&) -> data_parallel<>;

namespace detail {
/// The first line where two texts differ ("(none)" past the end of one).
inline std::pair<std::string, std::string> first_different_line(const std::string& a, const std::string& b) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
      std::size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      out.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const auto la = lines(a), lb = lines(b);
  for (std::size_t k = 0; k < std::max(la.size(), lb.size()); ++k) {
    std::string x = k < la.size() ? la[k] : "(none)", y = k < lb.size() ? lb[k] : "(none)";
    if (x != y) return {x, y};
  }
  return {"", ""};
}
}  // namespace detail

namespace detail {
/// "fc.weight: f32 [4, 3]\n": one tensor's line in a model's description.
template <class Extents>
std::string tensor_line(std::string_view name, dtype_tag dtype, const Extents& shape) {
  std::string line = std::string(name) + ": " + std::string(dtype_name(dtype)) + " [";
  for (std::size_t k = 0; k < shape.size(); ++k) line += (k ? ", " : "") + std::to_string(shape[k]);
  return line + "]\n";
}
}  // namespace detail

/// Throws distributed_error on every rank unless every rank's `description` (one line per
/// tensor: "fc.weight: f32 [4, 3]") is rank 0's; the message names the first line that
/// differs and the ranks: "rank 0 has 'fc.weight: f32 [4, 3]', rank 1 'fc.weight: f32 [5, 3]'".
inline void check_same_model(const std::string& description, communicator& comm) {
  const auto all = comm.all_gather(description);
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      auto [mine, theirs] = detail::first_different_line(all[0], all[r]);
      throw distributed_error("luminal: the ranks' models differ: rank 0 has '" + mine + "', rank " +
                              std::to_string(r) + " '" + theirs + "' (every rank must build the same model)");
    }
}

namespace detail {
/// What a program's exchange kernels share during one run: the communicator, and per
/// bucket its staging memory (gradients gathered into one block, summed in place) and the
/// handle of its sum while in flight. On a GPU backend the staging memory is the backend's
/// (`device_staging`), and sums are ordered on the program's stream instead of waited for.
struct exchange_state {
  communicator* comm = nullptr;
  std::vector<std::vector<std::byte>> staging;
  std::vector<std::shared_ptr<void>> device_staging;
  std::vector<std::size_t> device_bytes;
  std::vector<std::uint64_t> handles;
  std::vector<bool> in_flight;
  int pending = 0;
  double waited_seconds = 0;  // inside wait(): the exchange time the kernels did not hide

  std::byte* bucket(int b, std::size_t bytes) {
    grow(b);
    if (staging[std::size_t(b)].size() < bytes) staging[std::size_t(b)].resize(bytes);
    return staging[std::size_t(b)].data();
  }
  /// Bucket b's staging memory from `backend` (kept, and freed by it, with the program).
  template <class Backend>
  void* device_bucket(int b, std::size_t bytes, Backend& backend) {
    grow(b);
    if (device_bytes[std::size_t(b)] < bytes) {
      device_staging[std::size_t(b)] = std::shared_ptr<void>(backend.allocate(bytes), [backend](void* p) mutable {
        backend.deallocate(p);
      });
      device_bytes[std::size_t(b)] = bytes;
    }
    return device_staging[std::size_t(b)].get();
  }
  void start(int b, std::size_t count, dtype_tag type) {
    handles[std::size_t(b)] = comm->start_sum(staging[std::size_t(b)].data(), count, type);
    in_flight[std::size_t(b)] = true;
    ++pending;
  }
  /// Starts bucket b's sum in device memory after the work queued on `stream`.
  void start_on_device(int b, std::size_t count, dtype_tag type, void* stream) {
    handles[std::size_t(b)] = comm->start_device_sum(device_staging[std::size_t(b)].get(), count, type, stream);
    in_flight[std::size_t(b)] = true;
  }
  void finish(int b) {
    if (!in_flight[std::size_t(b)]) return;
    const auto begin = std::chrono::steady_clock::now();
    comm->wait(handles[std::size_t(b)]);
    waited_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    in_flight[std::size_t(b)] = false;
    --pending;
  }
  /// Orders the work queued on `stream` after bucket b's device sum (the host does not wait).
  void finish_on_device(int b, void* stream) {
    if (!in_flight[std::size_t(b)]) return;
    comm->wait_on_stream(handles[std::size_t(b)], stream);
    in_flight[std::size_t(b)] = false;
  }

 private:
  void grow(int b) {
    const std::size_t n = std::max(staging.size(), std::size_t(b) + 1);
    staging.resize(n), device_staging.resize(n), device_bytes.resize(n), handles.resize(n), in_flight.resize(n);
  }
};
}  // namespace detail

}  // namespace luminal
