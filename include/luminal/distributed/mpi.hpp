// Data-parallel training over MPI for named tensors (a tape's parameters and gradients):
// every rank starts from rank 0's parameters, and before each update the gradients are
// averaged across ranks, so that every rank applies the same update and the parameters
// stay bit-identical. luminal never initializes MPI: the caller owns MPI_Init, the
// communicator and MPI_Finalize.
//
//     MPI_Init(&argc, &argv);
//     luminal::mpi_communicator comm(MPI_COMM_WORLD);
//     luminal::broadcast_parameters(params, comm);      // checks that the models agree first
//     for (...) {                                        // each rank: its own shard of the batch
//       tape<> t(params); ... t.backward(loss);
//       luminal::average_gradients(t.gradients(), comm);
//       optimizer.step(params, t.gradients());
//     }
//
// Ranks whose models differ (a parameter's name, element type or shape) are refused on
// every rank with a message naming the parameter and the ranks. A rank that dies makes
// the others fail through MPI's error handler (Open MPI's default, MPI_ERRORS_ARE_FATAL,
// ends the job), not hang. Link luminal::mpi.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../io/tensor_store.hpp"

namespace luminal {

/// An MPI failure, or ranks that do not agree (thrown on every rank alike).
class distributed_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller's communicator (not duplicated, not freed). MPI must be initialized.
class mpi_communicator {
 public:
  explicit mpi_communicator(MPI_Comm comm) : comm_(comm) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw distributed_error("luminal: mpi_communicator: MPI is not initialized; call MPI_Init first "
                              "(luminal never initializes MPI itself)");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return comm_; }

  /// Throws distributed_error naming `what` when an MPI call did not succeed.
  static void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw distributed_error(std::string("luminal: ") + what + " failed: " + std::string(text, std::size_t(length)));
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

namespace detail {
/// "name: f32 [2, 3]" for every entry, one a line: what the ranks must agree on.
inline std::string describe_entries(const tensor_store& store) {
  std::string out;
  for (const auto& [name, e] : store) {
    out += name + ": " + std::string(dtype_name(e.dtype)) + " [";
    for (std::size_t k = 0; k < e.shape.size(); ++k) out += (k ? ", " : "") + std::to_string(e.shape[k]);
    out += "]\n";
  }
  return out;
}

/// Every rank's `text`, gathered on every rank.
inline std::vector<std::string> all_gather_text(const std::string& text, const mpi_communicator& comm) {
  const int length = int(text.size());
  std::vector<int> lengths(std::size_t(comm.size())), offsets(std::size_t(comm.size()));
  mpi_communicator::check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm.get()), "MPI_Allgather");
  int total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) offsets[r] = total, total += lengths[r];
  std::string all(std::size_t(total), '\0');
  mpi_communicator::check(MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                                         MPI_CHAR, comm.get()),
                          "MPI_Allgatherv");
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) out.push_back(all.substr(std::size_t(offsets[r]), std::size_t(lengths[r])));
  return out;
}

/// The first line where two descriptions differ ("(none)" past the end of one).
inline std::pair<std::string, std::string> first_difference(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (true) {
    const std::size_t ei = a.find('\n', i), ej = b.find('\n', j);
    const std::string la = ei == std::string::npos ? "(none)" : a.substr(i, ei - i);
    const std::string lb = ej == std::string::npos ? "(none)" : b.substr(j, ej - j);
    if (la != lb) return {la, lb};
    i = ei + 1, j = ej + 1;
  }
}
}  // namespace detail

/// Checks that every rank holds the same parameter names, element types and shapes;
/// otherwise throws distributed_error on every rank, naming the first parameter that
/// differs and the ranks: "rank 0 has 'fc.weight: f32 [4, 3]', rank 1 'fc.weight: f32 [5, 3]'".
inline void check_same_parameters(const tensor_store& store, const mpi_communicator& comm) {
  const auto all = detail::all_gather_text(detail::describe_entries(store), comm);
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      auto [mine, theirs] = detail::first_difference(all[0], all[r]);
      throw distributed_error("luminal: the ranks' models differ: rank 0 has '" + mine + "', rank " + std::to_string(r) +
                              " '" + theirs + "' (every rank must build the same model)");
    }
}

/// Makes every rank's parameters rank `root`'s (after check_same_parameters).
inline void broadcast_parameters(tensor_store& store, const mpi_communicator& comm, int root = 0) {
  check_same_parameters(store, comm);
  for (const std::string& name : store.names()) {
    auto& e = store.at(name);
    mpi_communicator::check(MPI_Bcast(e.data.data(), int(e.data.size()), MPI_BYTE, root, comm.get()), "MPI_Bcast");
  }
}

/// Replaces every f32 and f64 gradient with its mean over the ranks, in place. Gradients
/// travel in buckets of about `bucket_bytes` (one allreduce per bucket, not per tensor,
/// as PyTorch DDP's 25 MB buckets). Every rank must hold the same names and shapes
/// (checked: see check_same_parameters).
inline void average_gradients(tensor_store& gradients, const mpi_communicator& comm,
                              std::size_t bucket_bytes = std::size_t(25) << 20) {
  check_same_parameters(gradients, comm);
  if (comm.size() == 1) return;
  for (dtype_tag type : {dtype_tag::f32, dtype_tag::f64}) {
    const std::size_t width = dtype_size(type);
    std::vector<std::byte> bucket;
    std::vector<tensor_store::entry*> members;
    auto flush = [&] {
      if (members.empty()) return;
      const int count = int(bucket.size() / width);
      mpi_communicator::check(MPI_Allreduce(MPI_IN_PLACE, bucket.data(), count,
                                            type == dtype_tag::f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, comm.get()),
                              "MPI_Allreduce");
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

}  // namespace luminal
