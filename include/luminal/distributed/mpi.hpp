// The MPI communicator: data-parallel training over the ranks of the caller's MPI_Comm.
// luminal never initializes MPI: the caller owns MPI_Init, the communicator and
// MPI_Finalize. Link luminal::mpi.
//
//     MPI_Init(&argc, &argv);
//     luminal::mpi_communicator comm(MPI_COMM_WORLD);
//     auto step = compile_train_step(loss, adamw{}, data_parallel{comm});   // a compiled step
//     luminal::average_gradients(t.gradients(), comm);                      // or a tape's
//
// Ranks whose models differ (a parameter's name, element type or shape) are refused on
// every rank with a message naming the parameter and the ranks. A rank that dies makes
// the others fail through MPI's error handler (Open MPI's default, MPI_ERRORS_ARE_FATAL,
// ends the job: mpirun reports the rank that exited and stops the rest), not hang.
//
// The sums of a compiled step are nonblocking (MPI_Iallreduce): the step starts a bucket's
// sum as soon as its gradients exist and waits only where the update needs it. Open MPI
// advances a nonblocking collective only inside MPI calls, so the step calls MPI_Test
// between kernels (every call comes from the thread that runs the step: MPI_THREAD_SINGLE
// suffices). With LUMINAL_MPI_PROGRESS_THREAD=1 in the environment and MPI initialized
// with MPI_THREAD_MULTIPLE, a thread of the communicator calls MPI_Test instead while sums
// are in flight, sleeping between calls: for kernels long enough to hold a sum back. On
// the 2-core machine of benchmarks/README.md the kernels' own calls hid as much, and the
// thread took time from them; it is off by default.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "data_parallel.hpp"

namespace luminal {

/// The caller's communicator (not duplicated, not freed). MPI must be initialized.
class mpi_communicator final : public communicator {
 public:
  explicit mpi_communicator(MPI_Comm comm) : comm_(comm) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw distributed_error("luminal: mpi_communicator: MPI is not initialized; call MPI_Init first "
                              "(luminal never initializes MPI itself)");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    const bool wanted = progress_thread_wanted();
    if (level == MPI_THREAD_MULTIPLE && size_ > 1 && wanted) progress_thread_ = std::thread([this] { progress_loop(); });
  }
  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;
  ~mpi_communicator() override {
    if (progress_thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;
      }
      wake_.notify_one();
      progress_thread_.join();
    }
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);  // never leave a sum writing into freed memory
  }

  /// Whether a thread of this communicator advances sums in flight (MPI_THREAD_MULTIPLE).
  bool progress_thread() const { return progress_thread_.joinable(); }
  /// Whether the environment asks for the progress thread (LUMINAL_MPI_PROGRESS_THREAD=1).
  static bool progress_thread_wanted() {
    const char* knob = std::getenv("LUMINAL_MPI_PROGRESS_THREAD");
    return knob != nullptr && std::string_view(knob) == "1";
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm get() const { return comm_; }

  std::uint64_t start_sum(void* data, std::size_t count, dtype_tag type) override {
    if (count > std::size_t(INT_MAX))
      throw distributed_error("luminal: a sum of " + std::to_string(count) + " elements exceeds MPI's int count");
    if (type != dtype_tag::f32 && type != dtype_tag::f64 && type != dtype_tag::i32)
      throw distributed_error("luminal: sums over ranks take f32, f64 or i32, not " + std::string(dtype_name(type)));
    const MPI_Datatype t = type == dtype_tag::f32 ? MPI_FLOAT : type == dtype_tag::f64 ? MPI_DOUBLE : MPI_INT;
    std::unique_lock lock(mutex_);
    std::size_t slot = 0;
    while (slot < claimed_.size() && claimed_[slot]) ++slot;
    if (slot == claimed_.size()) requests_.push_back(MPI_REQUEST_NULL), claimed_.push_back(false);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), t, MPI_SUM, comm_, &requests_[slot]), "MPI_Iallreduce");
    claimed_[slot] = true;  // until wait(): a request that MPI_Test completed keeps its handle
    lock.unlock();
    wake_.notify_one();
    return slot;
  }
  void progress() override {
    if (progress_thread()) return;  // it calls MPI_Test itself
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) {
        int done = 0;
        check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");  // sets a completed request to NULL
      }
  }
  void wait(std::uint64_t handle) override {
    if (handle >= claimed_.size() || !claimed_[handle])
      throw distributed_error("luminal: mpi_communicator::wait: no sum in flight has handle " + std::to_string(handle));
    std::lock_guard lock(mutex_);
    check(MPI_Wait(&requests_[handle], MPI_STATUS_IGNORE), "MPI_Wait");
    claimed_[handle] = false;
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (std::size_t at = 0; at < bytes; at += std::size_t(INT_MAX))
      check(MPI_Bcast(p + at, int(std::min<std::size_t>(bytes - at, INT_MAX)), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    if (text.size() > std::size_t(INT_MAX)) throw distributed_error("luminal: all_gather: the text is too long");
    const int length = int(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(lengths.size());
    check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    long long total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) offsets[r] = int(total), total += lengths[r];
    if (total > INT_MAX) throw distributed_error("luminal: all_gather: the ranks' texts are too long together");
    std::string all(std::size_t(total), '\0');
    check(MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm_),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r)
      out.push_back(all.substr(std::size_t(offsets[r]), std::size_t(lengths[r])));
    return out;
  }
  bool any(bool flag) override {
    int mine = flag ? 1 : 0, result = 0;
    check(MPI_Allreduce(&mine, &result, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
    return result != 0;
  }

  /// Throws distributed_error naming `what` when an MPI call did not succeed.
  static void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw distributed_error(std::string("luminal: ") + what + " failed: " + std::string(text, std::size_t(length)));
  }

 private:
  /// While sums are in flight: MPI_Test on each, then a short sleep (the compute threads
  /// keep the cores); otherwise asleep until start_sum() wakes it.
  void progress_loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      bool in_flight = false;
      for (MPI_Request& r : requests_)
        if (r != MPI_REQUEST_NULL) {
          int done = 0;
          MPI_Test(&r, &done, MPI_STATUS_IGNORE);  // an error ends the job (MPI_ERRORS_ARE_FATAL)
          in_flight = in_flight || !done;
        }
      if (!in_flight) {
        wake_.wait(lock);
        continue;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;  // by handle; MPI_REQUEST_NULL once complete
  std::vector<bool> claimed_;          // by handle: started and not yet waited for
  std::mutex mutex_;                   // guards requests_ and claimed_ against the progress thread
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread progress_thread_;
};

/// Runs `body(comm)` on MPI_COMM_WORLD between MPI_Init_thread (MPI_THREAD_MULTIPLE when
/// the progress thread is asked for) and MPI_Finalize, for a program's
/// main(): an exception on one of several ranks is printed with its rank and ends the job
/// (MPI_Abort), since the other ranks would wait for that rank forever. Returns body's
/// result, or 1 after an exception.
///
///     if (luminal::mpirun_ranks() > 0)
///       return luminal::run_on_mpi_world(argc, argv, "trainer", [&](luminal::communicator& comm) { ... });
template <class Body>
int run_on_mpi_world(int& argc, char**& argv, const char* program, Body body) {
  int provided = 0;
  const int level = mpi_communicator::progress_thread_wanted() ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, level, &provided);
  int code = 1;
  {
    mpi_communicator comm(MPI_COMM_WORLD);
    try {
      code = body(static_cast<communicator&>(comm));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "\n%s: error on rank %d: %s\n", program, comm.rank(), e.what());
      if (comm.size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return code;
}

}  // namespace luminal
