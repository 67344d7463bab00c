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
// every rank with a message naming the parameter and the ranks; check_same_settings
// (data_parallel.hpp) does the same for a program's options.
//
// Nothing waits forever. Every collective (sums, broadcasts, gathers) is nonblocking and
// waited for by polling with a deadline: a collective that another rank never joins (it
// finished early, failed, or hangs) throws distributed_error after the timeout, which is
// LUMINAL_MPI_TIMEOUT seconds (a whole number from 1 to 604800) or 300 s when unset. The
// wait polls MPI_Test for a millisecond, then sleeps between polls (up to a millisecond),
// so a rank that waits long costs no CPU. MPI cannot cancel a collective: after a timeout
// the communicator refuses further calls, and the job should end with MPI_Abort, as
// run_on_mpi_world does. Under run_on_mpi_world a rank that returns (or fails) tells the
// others, so a rank still waiting for it in a collective fails at once, naming it,
// instead of after the timeout. A rank that dies makes the others fail through MPI's
// error handler (Open MPI's default, MPI_ERRORS_ARE_FATAL, ends the job).
//
// The sums of a compiled step are nonblocking (MPI_Iallreduce): the step starts a bucket's
// sum as soon as its gradients exist and waits only where the update needs it. Open MPI
// advances a nonblocking collective only inside MPI calls, so the step calls MPI_Test
// between kernels (every call comes from the thread that runs the step: MPI_THREAD_SINGLE
// suffices). With LUMINAL_MPI_PROGRESS_THREAD=1 in the environment and MPI initialized
// with MPI_THREAD_MULTIPLE, a thread of the communicator calls MPI_Test instead while sums
// are in flight, sleeping between calls: for kernels long enough to hold a sum back. It
// is off by default (0 or unset: off, 1: on): where cores are few, the kernels' own calls
// hide as much, and the thread takes a core's time from them.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "data_parallel.hpp"

namespace luminal {

/// The wait of a collective before it fails when LUMINAL_MPI_TIMEOUT is unset.
inline constexpr std::chrono::seconds default_mpi_timeout{300};
/// The longest LUMINAL_MPI_TIMEOUT accepted: a week.
inline constexpr std::chrono::seconds max_mpi_timeout{604800};

/// LUMINAL_MPI_TIMEOUT (whole seconds, 1 to 604800), or default_mpi_timeout when unset.
/// Throws distributed_error naming the variable for any other value.
inline std::chrono::seconds mpi_timeout_from_environment() {
  const char* env = std::getenv("LUMINAL_MPI_TIMEOUT");
  if (!env) return default_mpi_timeout;
  const std::string_view text(env);
  long long seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || seconds < 1 ||
      seconds > max_mpi_timeout.count())
    throw distributed_error("LUMINAL_MPI_TIMEOUT must be a whole number of seconds from 1 to " +
                            std::to_string(max_mpi_timeout.count()) + ", not '" + std::string(text.substr(0, 40)) + "'");
  return std::chrono::seconds(seconds);
}

/// The caller's communicator (not duplicated, not freed). MPI must be initialized.
/// `timeout`: how long a collective waits for the other ranks (see the file comment);
/// by default LUMINAL_MPI_TIMEOUT's, else 300 s.
class mpi_communicator final : public communicator {
 public:
  explicit mpi_communicator(MPI_Comm comm, std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : comm_(comm), timeout_(timeout ? *timeout : std::chrono::milliseconds(mpi_timeout_from_environment())) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw distributed_error("luminal: mpi_communicator: MPI is not initialized; call MPI_Init first "
                              "(luminal never initializes MPI itself)");
    if (timeout_ <= std::chrono::milliseconds(0))
      throw distributed_error("luminal: mpi_communicator: the timeout must be positive");
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
    // Never leave a sum writing into freed memory; after a timeout nothing can be waited
    // for, and the job is about to end (MPI_Abort).
    if (!abandoned_)
      for (MPI_Request& r : requests_)
        if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
  }

  /// Whether a thread of this communicator advances sums in flight (MPI_THREAD_MULTIPLE).
  bool progress_thread() const { return progress_thread_.joinable(); }
  /// Whether the environment asks for the progress thread: LUMINAL_MPI_PROGRESS_THREAD=1
  /// (0 or unset: no). Throws distributed_error for any other value.
  static bool progress_thread_wanted() {
    const char* knob = std::getenv("LUMINAL_MPI_PROGRESS_THREAD");
    if (knob == nullptr || std::string_view(knob) == "0") return false;
    if (std::string_view(knob) == "1") return true;
    throw distributed_error("LUMINAL_MPI_PROGRESS_THREAD must be 0 or 1, not '" + std::string(knob).substr(0, 40) + "'");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm get() const { return comm_; }
  /// How long a collective waits for the other ranks before it throws.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Whether a collective was given up (a timeout, or a rank that finished while this one
  /// waited for it): MPI cannot cancel it, so the job must end with MPI_Abort.
  bool abandoned() const { return abandoned_; }
  /// Makes waits fail at once, naming the rank, when a status message (tag `tag`, an int:
  /// the rank's exit code) arrives on `notices` from a rank that has finished its part:
  /// run_on_mpi_world's way to end a collective that rank will never join.
  void watch_for_finished_ranks(MPI_Comm notices, int tag) {
    notices_ = notices;
    notice_tag_ = tag;
  }

  std::uint64_t start_sum(void* data, std::size_t count, dtype_tag type) override {
    require_usable();
    if (count > std::size_t(INT_MAX))
      throw distributed_error("luminal: a sum of " + std::to_string(count) + " elements exceeds MPI's int count");
    if (type != dtype_tag::f32 && type != dtype_tag::f64 && type != dtype_tag::i32)
      throw distributed_error("luminal: sums over ranks take f32, f64 or i32, not " + std::string(dtype_name(type)));
    const MPI_Datatype t = type == dtype_tag::f32 ? MPI_FLOAT : type == dtype_tag::f64 ? MPI_DOUBLE : MPI_INT;
    std::unique_lock lock(mutex_);
    std::size_t slot = 0;
    while (slot < claimed_.size() && claimed_[slot]) ++slot;
    if (slot == claimed_.size()) requests_.push_back(MPI_REQUEST_NULL), claimed_.push_back(false), what_.emplace_back();
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), t, MPI_SUM, comm_, &requests_[slot]), "MPI_Iallreduce");
    claimed_[slot] = true;  // until wait(): a request that MPI_Test completed keeps its handle
    what_[slot] = "a sum of " + std::to_string(count) + " " + std::string(dtype_name(type)) + " values (MPI_Iallreduce)";
    lock.unlock();
    wake_.notify_one();
    return slot;
  }
  void progress() override {
    if (progress_thread() || abandoned_) return;  // the thread calls MPI_Test itself
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) {
        int done = 0;
        check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");  // sets a completed request to NULL
      }
  }
  void wait(std::uint64_t handle) override {
    require_usable();
    if (handle >= claimed_.size() || !claimed_[handle])
      throw distributed_error("luminal: mpi_communicator::wait: no sum in flight has handle " + std::to_string(handle));
    await(
        [&] {
          std::lock_guard lock(mutex_);
          int done = 0;
          check(MPI_Test(&requests_[handle], &done, MPI_STATUS_IGNORE), "MPI_Test");
          return done != 0;
        },
        what_[handle]);
    claimed_[handle] = false;
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    require_usable();
    auto* p = static_cast<char*>(data);
    for (std::size_t at = 0; at < bytes; at += std::size_t(INT_MAX)) {
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Ibcast(p + at, int(std::min<std::size_t>(bytes - at, INT_MAX)), MPI_BYTE, root, comm_, &request),
            "MPI_Ibcast");
      complete(request, "a broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root) +
                            " (MPI_Ibcast)");
    }
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    require_usable();
    if (text.size() > std::size_t(INT_MAX)) throw distributed_error("luminal: all_gather: the text is too long");
    const int length = int(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(lengths.size());
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_, &request), "MPI_Iallgather");
    complete(request, "a gather of the ranks' descriptions (MPI_Iallgather)");
    long long total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) offsets[r] = int(total), total += lengths[r];
    if (total > INT_MAX) throw distributed_error("luminal: all_gather: the ranks' texts are too long together");
    std::string all(std::size_t(total), '\0');
    check(MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm_,
                          &request),
          "MPI_Iallgatherv");
    complete(request, "a gather of the ranks' descriptions (MPI_Iallgatherv)");
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r)
      out.push_back(all.substr(std::size_t(offsets[r]), std::size_t(lengths[r])));
    return out;
  }
  bool any(bool flag) override {
    require_usable();
    int mine = flag ? 1 : 0, result = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&mine, &result, 1, MPI_INT, MPI_MAX, comm_, &request), "MPI_Iallreduce");
    complete(request, "a vote of the ranks (MPI_Iallreduce)");
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
  void require_usable() const {
    if (abandoned_)
      throw distributed_error("luminal: mpi_communicator: an earlier collective was given up (see its error); "
                              "MPI cannot cancel it, so this communicator takes no more calls: end the job");
  }
  /// Waits for a request of this call alone (not shared with the progress thread).
  void complete(MPI_Request& request, const std::string& what) {
    await(
        [&] {
          int done = 0;
          check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
          return done != 0;
        },
        what);
  }
  /// Polls `done` until it holds: for a millisecond without pause, then with sleeps that
  /// double up to a millisecond. Throws distributed_error (and marks the communicator
  /// abandoned) after the timeout, or as soon as a finished rank's notice arrives.
  template <class Done>
  void await(const Done& done, const std::string& what) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto pause = std::chrono::microseconds(0);
    auto next_notice_check = start;
    int finished_rank = -1;  // a rank whose notice arrived during this wait
    auto finished_since = start;
    for (;;) {
      if (done()) return;
      const auto now = clock::now();
      if (notices_ != MPI_COMM_NULL && finished_rank < 0 && now >= next_notice_check) {
        next_notice_check = now + std::chrono::milliseconds(10);
        int arrived = 0;
        MPI_Status status;
        check(MPI_Iprobe(MPI_ANY_SOURCE, notice_tag_, notices_, &arrived, &status), "MPI_Iprobe");
        if (arrived) finished_rank = status.MPI_SOURCE, finished_since = now;
      }
      // A rank that completed its part of this collective may finish before this rank
      // has seen the collective complete (its data still in transit): a second's grace.
      if (finished_rank >= 0 && now - finished_since >= std::chrono::seconds(1)) {
        abandoned_ = true;
        throw distributed_error("luminal: rank " + std::to_string(finished_rank) + " has ended its run while rank " +
                                std::to_string(rank_) + " waits for it in " + what +
                                ": the ranks did not make the same calls (were they started with the same options "
                                "and data?)");
      }
      if (now - start >= timeout_) {
        abandoned_ = true;
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", std::chrono::duration<double>(timeout_).count());
        throw distributed_error("luminal: rank " + std::to_string(rank_) + " waited " + seconds +
                                " s for the other ranks in " + what +
                                ": one of them finished, failed or hangs, so it cannot complete (were the ranks "
                                "started with the same options and data?). LUMINAL_MPI_TIMEOUT sets this wait in "
                                "seconds");
      }
      if (now - start > std::chrono::milliseconds(1)) {
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2 + std::chrono::microseconds(10),
                                                    std::chrono::microseconds(1000));
      }
    }
  }

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
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;  // by handle; MPI_REQUEST_NULL once complete
  std::vector<bool> claimed_;          // by handle: started and not yet waited for
  std::vector<std::string> what_;      // by handle: the sum, for a timeout's message
  std::mutex mutex_;                   // guards requests_ and claimed_ against the progress thread
  std::condition_variable wake_;
  bool stop_ = false;
  bool abandoned_ = false;             // a collective was given up: no more calls, no waits at exit
  MPI_Comm notices_ = MPI_COMM_NULL;   // finished ranks' notices (run_on_mpi_world)
  int notice_tag_ = 0;
  std::thread progress_thread_;
};

namespace detail {
/// Polls `request` for up to `limit`, sleeping a millisecond between polls; whether it completed.
inline bool completes_within(MPI_Request& request, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace detail

/// Runs `body(comm)` on MPI_COMM_WORLD between MPI_Init_thread (MPI_THREAD_MULTIPLE when
/// the progress thread is asked for) and MPI_Finalize, for a program's main(). Returns
/// body's result, or 1 after an exception, which is printed with its rank.
///
///     if (luminal::mpirun_ranks() > 0)
///       return luminal::run_on_mpi_world(argc, argv, "trainer", [&](luminal::communicator& comm) { ... });
///
/// When a rank is done (returned or failed), it tells every other rank (an MPI message on
/// a communicator of its own), and a rank still waiting for it in a collective fails at
/// once, naming it. Then each rank waits for every other rank's word: all of them there,
/// and no collective given up, it finalizes MPI and returns, so an error thrown on every
/// rank alike (ranks that disagree on their options, say) is printed by every rank and
/// exits 1 on each. Otherwise (a rank that failed alone, or that went silent for the
/// timeout) it ends the job with MPI_Abort, since the others would wait for it forever.
template <class Body>
int run_on_mpi_world(int& argc, char**& argv, const char* program, Body body) {
  int provided = 0;
  bool progress_thread = false;
  try {
    progress_thread = mpi_communicator::progress_thread_wanted();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  MPI_Init_thread(&argc, &argv, progress_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm notices = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &notices);
  constexpr int notice_tag = 7;
  int code = 1;
  bool failed = false, abandoned = false;
  std::chrono::milliseconds timeout = default_mpi_timeout;
  {
    std::optional<mpi_communicator> comm;
    try {
      comm.emplace(MPI_COMM_WORLD);
      timeout = comm->timeout();
      comm->watch_for_finished_ranks(notices, notice_tag);
      code = body(static_cast<communicator&>(*comm));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "\n%s: error on rank %d: %s\n", program, rank, e.what());
      std::fflush(stderr);
      failed = true;
      code = 1;
    }
    abandoned = comm && comm->abandoned();
    if (abandoned || size == 1) comm.reset();
    if (size > 1 && !abandoned) {
      // Every rank's word: sent to all, then received from all, within the timeout after
      // a success (the others may still be finishing their part), or a few seconds after
      // a failure (ranks that fail alike arrive here together).
      std::vector<MPI_Request> sends, receives;
      std::vector<int> codes(std::size_t(size), 0);
      for (int r = 0; r < size; ++r)
        if (r != rank) {
          sends.push_back(MPI_REQUEST_NULL);
          MPI_Isend(&code, 1, MPI_INT, r, notice_tag, notices, &sends.back());
        }
      comm.reset();  // sums still in flight finish first (none after an error on every rank)
      for (int r = 0; r < size; ++r)
        if (r != rank) {
          receives.push_back(MPI_REQUEST_NULL);
          MPI_Irecv(&codes[std::size_t(r)], 1, MPI_INT, r, notice_tag, notices, &receives.back());
        }
      const auto limit = failed ? std::min(timeout, std::chrono::milliseconds(10000)) : timeout;
      for (MPI_Request& r : receives)
        if (!detail::completes_within(r, limit)) {
          abandoned = true;
          if (!failed)
            std::fprintf(stderr, "\n%s: rank %d finished, but another rank did not within %lld s\n", program, rank,
                         (long long)std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
          break;
        }
      if (!abandoned)
        for (MPI_Request& r : sends) detail::completes_within(r, limit);
    }
  }
  if (size > 1 && abandoned) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Comm_free(&notices);
  MPI_Finalize();
  return failed ? 1 : code;
}

}  // namespace luminal
