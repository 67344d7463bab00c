// Data parallelism for named tensors (a tape's parameters and gradients) over any
// communicator: every rank starts from rank 0's parameters, and before each update the
// gradients are averaged across ranks, so that every rank applies the same update and the
// parameters stay bit-identical. (A compiled training step does this itself: see
// compile_train_step with data_parallel.)
//
//     luminal::mpi_communicator comm(MPI_COMM_WORLD);    // distributed/mpi.hpp
//     luminal::broadcast_parameters(params, comm);       // checks that the models agree first
//     for (...) {                                         // each rank: its own shard of the batch
//       tape<> t(params); ... t.backward(loss);
//       luminal::average_gradients(t.gradients(), comm);
//       optimizer.step(params, t.gradients());
//     }
//
// A tape whose gradients live in the backend's memory (device_gradients(), a
// parameter_store) averages them the same way: average_gradients(t.device_gradients(), comm).
#pragma once
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "../train/gradient_listener.hpp"
#include "../io/run_settings.hpp"
#include "../io/tensor_store.hpp"
#include "../runtime/parameter_store.hpp"
#include "../core/communicator.hpp"

namespace luminal {

/// `value` summed over the ranks (a loss or a count of correct predictions).
inline double sum_over_ranks(communicator& comm, double value) {
  comm.wait(comm.start_sum(&value, 1, dtype_tag::f64));
  return value;
}

/// How many processes mpirun started, from the environment its launcher sets (Open MPI,
/// MPICH, PMIx), or 0 when this process was not started by mpirun: a program can then
/// initialize MPI only when it runs under mpirun.
inline int mpirun_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) {
      int ranks = 0;  // the launcher's own variable: anything but a count means one rank
      const std::string_view text(v);
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ranks);
      return ec == std::errc() && end == text.data() + text.size() ? std::max(1, ranks) : 1;
    }
  return 0;
}

/// For a program built without MPI: refuses to run when mpirun started it on several
/// ranks, where each rank would otherwise train alone on all the data. One rank is fine.
///     if (mpirun_ranks() > 0) return run_on_mpi_world(...);   // only where MPI is built in
///     refuse_mpirun_without_mpi("char_gpt");
inline void refuse_mpirun_without_mpi(std::string_view program) {
  if (const int ranks = mpirun_ranks(); ranks > 1)
    throw distributed_error(std::string(program) + ": started by mpirun on " + std::to_string(ranks) +
                            " ranks, but built without MPI (install libopenmpi-dev and reconfigure)");
}

/// Throws distributed_error on every rank unless every rank's `settings` are rank 0's (the
/// same names, in the same order, with the same values): a program's options and its
/// data's length, checked before training, so that ranks started with different options
/// fail at once instead of drifting apart or waiting for each other. The message names
/// the first setting that differs and both values:
///   "the ranks' settings differ: --epochs is 1 on rank 0, 2 on rank 1 (every rank must
///    run with the same settings)"
///
///     luminal::run_settings run("--");
///     run.set("epochs", opt.epochs);  run.set("lr", opt.lr);  run.set("images", train.size());
///     luminal::check_same_settings(run, comm);
inline void check_same_settings(const run_settings& settings, communicator& comm) {
  const auto all = comm.all_gather(settings.serialized());
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const run_settings first = run_settings::parse_serialized(all[0], settings.display_prefix()),
                       other = run_settings::parse_serialized(all[r], settings.display_prefix());
    const auto& a = first.items();
    const auto& b = other.items();
    std::string which, mine = "(not set)", theirs = "(not set)";
    for (std::size_t k = 0; k < std::max(a.size(), b.size()) && which.empty(); ++k) {
      if (k < a.size() && k < b.size() && a[k].name == b[k].name) {
        if (a[k].value != b[k].value) which = a[k].name, mine = a[k].value, theirs = b[k].value;
        continue;
      }
      which = k < a.size() ? a[k].name : b[k].name;  // a setting that one of them lacks
      if (const std::string* v = first.find(which)) mine = *v;
      if (const std::string* v = other.find(which)) theirs = *v;
    }
    const std::string shown = first.find(which) ? first.display(which) : other.display(which);
    throw distributed_error("luminal: the ranks' settings differ: " + shown + " is " +
                            run_settings::shown(mine) + " on rank 0, " + run_settings::shown(theirs) + " on rank " +
                            std::to_string(r) + " (every rank must run with the same settings)");
  }
}

namespace detail {
/// One line per tensor ("name: f32 [2, 3]"): what the ranks must agree on.
inline std::string describe_entries(const tensor_store& store) {
  std::string out;
  for (const auto& [name, e] : store) out += tensor_line(name, e.dtype, e.shape);
  return out;
}
}  // namespace detail

/// Checks that every rank holds the same tensor names, element types and shapes; otherwise
/// throws distributed_error on every rank, naming the first tensor that differs and the
/// ranks: "rank 0 has 'fc.weight: f32 [4, 3]', rank 1 'fc.weight: f32 [5, 3]'".
inline void check_same_parameters(const tensor_store& store, communicator& comm) {
  check_same_model(detail::describe_entries(store), comm);
}

/// Makes every rank's tensors rank `root`'s (after check_same_parameters).
inline void broadcast_parameters(tensor_store& store, communicator& comm, int root = 0) {
  check_same_parameters(store, comm);
  for (const std::string& name : store.names()) {
    auto& e = store.at(name);
    comm.broadcast(e.data.data(), e.data.size(), root);
  }
}

/// Replaces every f32 and f64 tensor with its mean over the ranks, in place. Tensors travel
/// in buckets of about `bucket_bytes` (one sum per bucket, not per tensor, as PyTorch DDP's
/// 25 MB buckets). Every rank must hold the same names and shapes (checked).
inline void average_gradients(tensor_store& gradients, communicator& comm,
                              std::size_t bucket_bytes = std::size_t(25) << 20) {
  // Checked every call (one small gather): a rank whose tensors changed alone must be
  // refused, not left waiting in a sum the others never start.
  check_same_parameters(gradients, comm);
  if (comm.size() == 1) return;
  for (dtype_tag type : {dtype_tag::f32, dtype_tag::f64}) {
    const std::size_t width = dtype_size(type);
    std::vector<std::byte> bucket;
    std::vector<tensor_store::entry*> members;
    auto flush = [&] {
      if (members.empty()) return;
      comm.wait(comm.start_sum(bucket.data(), bucket.size() / width, type));
      std::size_t at = 0;
      for (tensor_store::entry* e : members) {
        const std::size_t n = e->data.size() / width;
        if (type == dtype_tag::f32) {
          const auto* sum = reinterpret_cast<const float*>(bucket.data() + at);
          auto* out = reinterpret_cast<float*>(e->data.data());
          for (std::size_t k = 0; k < n; ++k) out[k] = sum[k] / float(comm.size());
        } else {
          const auto* sum = reinterpret_cast<const double*>(bucket.data() + at);
          auto* out = reinterpret_cast<double*>(e->data.data());
          for (std::size_t k = 0; k < n; ++k) out[k] = sum[k] / double(comm.size());
        }
        at += e->data.size();
      }
      bucket.clear();
      members.clear();
    };
    for (const std::string& name : gradients.names()) {
      auto& e = gradients.at(name);
      if (e.dtype != type) continue;
      bucket.insert(bucket.end(), e.data.begin(), e.data.end());
      members.push_back(&e);
      if (bucket.size() >= bucket_bytes) flush();
    }
    flush();
  }
}

/// The gradients' mean over the ranks on a tape, overlapped with its backward: each
/// gradient is copied into a bucket as soon as it is final, and a bucket's sum starts when
/// its last member is, while the backward computes the earlier layers' gradients (DDP's
/// overlap, for a tape over a tensor_store). finish() waits and writes the means.
///
///     overlapped_gradient_mean exchange(comm);
///     t.backward(loss, &exchange);
///     exchange.finish();                       // t.gradients() now holds the means
///     optimizer.step(params, t.gradients());
///
/// At the start of every backward the ranks check that they will exchange the same
/// parameters in the same order (one small gather; ranks whose recordings differ are
/// refused on every rank, naming the parameter), so no rank waits in a sum the others
/// never start. The buckets close at `bucket_bytes` or where the element type changes.
class overlapped_gradient_mean final : public gradient_listener {
 public:
  explicit overlapped_gradient_mean(communicator& comm, std::size_t bucket_bytes = std::size_t(1) << 20)
      : comm_(comm), bucket_bytes_(bucket_bytes) {}

  void begin(tensor_store& gradients, const std::vector<parameter>& order) override {
    if (pending_) throw distributed_error("luminal: overlapped_gradient_mean: begin() again before finish()");
    std::string description;
    for (const parameter& p : order) description += detail::tensor_line(p.name, p.dtype, p.shape);
    check_same_model(description, comm_);
    gradients_ = &gradients;
    order_ = order;
    // Buckets: consecutive parameters of one element type up to bucket_bytes.
    bucket_of_.assign(order.size(), 0);
    offset_of_.assign(order.size(), 0);
    buckets_.clear();
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t bytes = element_count(order[i].shape) * dtype_size(order[i].dtype);
      if (buckets_.empty() || buckets_.back().type != order[i].dtype || buckets_.back().bytes >= bucket_bytes_)
        buckets_.push_back({order[i].dtype, 0, i, i, {}, 0, false});
      bucket& b = buckets_.back();
      bucket_of_[i] = buckets_.size() - 1;
      offset_of_[i] = b.bytes;
      b.bytes += bytes;
      b.last = i;
    }
    for (bucket& b : buckets_) b.staging.resize(b.bytes);
    pending_ = true;
  }

  void final(std::size_t index) override {
    bucket& b = buckets_[bucket_of_[index]];
    const auto& data = gradients_->at(order_[index].name).data;
    std::memcpy(b.staging.data() + offset_of_[index], data.data(), data.size());
    if (index == b.last && comm_.size() > 1) {
      b.handle = comm_.start_sum(b.staging.data(), b.bytes / dtype_size(b.type), b.type);
      b.started = true;
    }
    comm_.progress();  // let the buckets already sent advance
  }

  /// Waits for every bucket and writes each gradient's mean into the store. Seconds spent
  /// waiting (the exchange the backward did not hide) add up in waited_seconds().
  void finish() {
    if (!pending_) throw distributed_error("luminal: overlapped_gradient_mean: finish() without a backward");
    pending_ = false;
    const auto begin = std::chrono::steady_clock::now();
    for (bucket& b : buckets_)
      if (b.started) comm_.wait(b.handle), b.started = false;
    waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (comm_.size() == 1) return;
    for (std::size_t i = 0; i < order_.size(); ++i) {
      const bucket& b = buckets_[bucket_of_[i]];
      auto& out = gradients_->at(order_[i].name).data;
      const std::byte* sum = b.staging.data() + offset_of_[i];
      if (b.type == dtype_tag::f32) scaled(reinterpret_cast<float*>(out.data()), reinterpret_cast<const float*>(sum), out.size() / 4);
      else if (b.type == dtype_tag::f64) scaled(reinterpret_cast<double*>(out.data()), reinterpret_cast<const double*>(sum), out.size() / 8);
    }
  }
  double waited_seconds() const { return waited_; }

 private:
  struct bucket {
    dtype_tag type;
    std::size_t bytes, first, last;
    std::vector<std::byte> staging;
    std::uint64_t handle;
    bool started;
  };
  template <class T>
  void scaled(T* out, const T* sum, std::size_t n) const {
    for (std::size_t k = 0; k < n; ++k) out[k] = sum[k] / T(comm_.size());
  }
  static std::size_t element_count(const std::vector<index_t>& shape) {
    std::size_t n = 1;
    for (index_t e : shape) n *= std::size_t(e);
    return n;
  }

  communicator& comm_;
  std::size_t bucket_bytes_;
  tensor_store* gradients_ = nullptr;
  std::vector<parameter> order_;
  std::vector<std::size_t> bucket_of_, offset_of_;
  std::vector<bucket> buckets_;
  bool pending_ = false;
  double waited_ = 0;
};

/// The parameter_store form, for a tape's device_gradients(): every f32 and f64 tensor
/// replaced with its mean over the ranks. The sums run on host copies (through the
/// backend's transfers on a GPU), in buckets of about `bucket_bytes`.
template <class B>
void average_gradients(parameter_store<B>& gradients, communicator& comm,
                       std::size_t bucket_bytes = std::size_t(25) << 20) {
  std::string description;
  for (const auto& [name, s] : gradients) description += detail::tensor_line(name, s.dtype, s.shape);
  check_same_model(description, comm);  // every call, as for a tensor_store
  if (comm.size() == 1) return;
  auto mean_of = [&]<class T>(std::type_identity<T>) {
    std::vector<T> bucket;
    std::vector<std::pair<std::string, std::size_t>> members;  // name, element count
    auto flush = [&] {
      if (members.empty()) return;
      comm.wait(comm.start_sum(bucket.data(), bucket.size(), dtype_of<T>()));
      std::size_t at = 0;
      for (const auto& [name, count] : members) {
        xt::xarray<T> mean = gradients.template get<T>(name);
        for (std::size_t k = 0; k < count; ++k) mean.flat(k) = bucket[at + k] / T(comm.size());
        gradients.set(name, mean);
        at += count;
      }
      bucket.clear();
      members.clear();
    };
    for (const auto& [name, s] : gradients) {
      if (s.dtype != dtype_of<T>()) continue;
      const xt::xarray<T> values = gradients.template get<T>(name);
      bucket.insert(bucket.end(), values.begin(), values.end());
      members.emplace_back(name, values.size());
      if (bucket.size() * sizeof(T) >= bucket_bytes) flush();
    }
    flush();
  };
  mean_of(std::type_identity<float>{});
  mean_of(std::type_identity<double>{});
}

}  // namespace luminal
