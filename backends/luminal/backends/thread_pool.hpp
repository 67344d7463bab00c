// A persistent pool for the host backend. Dispatch stores a function pointer and an
// object pointer (no std::function), so a parallel loop allocates nothing.
//
// A thread with nothing to do polls for a short while before it sleeps: the workers
// waiting for the next loop, and the caller waiting for the last chunk of its loop. A
// training step is a run of loops tens of microseconds long, and waking a sleeping thread
// (a futex, and on a virtual machine an interrupt to an idle virtual CPU) can take longer
// than such a loop.
//
// The pool's size comes from LUMINAL_NUM_THREADS when it is set: a whole decimal number
// from 1 to thread_pool::max_threads() (4 times the hardware's threads), read strictly;
// anything else (abc, 0, -1, 1e3, 100000) is a thread_count_error naming the variable,
// never ignored.
//
//     LUMINAL_NUM_THREADS=4 ./train     # 4 threads; unset: one per hardware thread
#pragma once
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <luminal/core/dtype.hpp>

namespace luminal {

/// LUMINAL_NUM_THREADS is not a thread count this machine can use, or the threads could
/// not be started; the message names the variable and its value.
class thread_count_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class thread_pool {
 public:
  using chunk_fn = void (*)(const void* body, index_t begin, index_t end);

  /// How long an idle thread polls before it sleeps. Long enough to span the gap between
  /// two kernels of a program, short enough that an idle pool costs nothing.
  static constexpr std::chrono::microseconds poll_before_sleep{200};

  /// Threads from LUMINAL_NUM_THREADS, else one per hardware thread. Throws
  /// thread_count_error for a bad LUMINAL_NUM_THREADS (and again at the next call).
  static thread_pool& instance() {
    static thread_pool pool(default_threads());
    return pool;
  }
  /// The most threads a pool takes: 4 per hardware thread (oversubscribed runs are
  /// for experiments; more only costs memory and switches), 256 where the hardware's
  /// count is unknown.
  static unsigned max_threads() {
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware == 0 ? 256u : 4u * hardware;
  }
  /// LUMINAL_NUM_THREADS, checked (threads_from_text), or one per hardware thread when unset.
  static unsigned default_threads() {
    if (const char* env = std::getenv("LUMINAL_NUM_THREADS")) return threads_from_text(env);
    return std::max(1u, std::thread::hardware_concurrency());
  }
  /// `text` as a thread count: the whole text a decimal integer from 1 to max_threads().
  /// Throws thread_count_error naming LUMINAL_NUM_THREADS, the text and the range.
  static unsigned threads_from_text(std::string_view text) {
    unsigned long long n = 0;
    const char* end = text.data() + text.size();
    const auto [stop, ec] = std::from_chars(text.data(), end, n);
    if (text.empty() || ec != std::errc() || stop != end || n < 1 || n > max_threads()) {
      std::string shown(text.substr(0, 40));
      throw thread_count_error("LUMINAL_NUM_THREADS must be an integer from 1 to " + std::to_string(max_threads()) +
                               " (4 per hardware thread), not '" + shown + (text.size() > 40 ? "...'" : "'"));
    }
    return unsigned(n);
  }

  /// A pool of `threads` threads, the caller's included. Throws thread_count_error if the
  /// system will not start them (the ones started are stopped again).
  explicit thread_pool(unsigned threads) : thread_count_(std::max(1u, threads)) {
    try {
      workers_.reserve(thread_count_ - 1);
      for (unsigned t = 1; t < thread_count_; ++t) workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::exception& e) {
      const std::size_t started = workers_.size();
      stop_workers();
      throw thread_count_error("luminal: cannot start the host backend's " + std::to_string(thread_count_ - 1) +
                               " worker threads (" + std::to_string(started) + " started): " + e.what() +
                               "; set LUMINAL_NUM_THREADS lower");
    }
  }
  ~thread_pool() { stop_workers(); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  unsigned size() const { return thread_count_; }

  /// Runs fn over [0, n) split into chunks; the calling thread works too.
  void run(index_t n, index_t grain, chunk_fn fn, const void* body) {
    std::lock_guard serial(dispatch_mutex_);  // one loop at a time across programs
    index_t chunks = std::min<index_t>((n + grain - 1) / grain, index_t(thread_count_) * 4);
    job current{fn, body, n, chunks};
    bool wake = false;
    for (;;) {
      // A worker still holding the previous job must leave before the job and counters
      // change; workers take a job under mutex_, so no active one there means none.
      caller_waits([&] { return active_.load() == 0; });
      std::lock_guard lock(mutex_);
      if (active_.load() != 0) continue;  // one took the last job late, after the poll
      job_ = current;
      next_chunk_.store(0);
      done_chunks_.store(0);
      generation_.fetch_add(1);
      wake = workers_asleep_ > 0;  // a worker that sleeps later sees the new generation first
      break;
    }
    if (wake) wake_.notify_all();
    work_on(current);
    caller_waits([&] { return done_chunks_.load() == chunks; });
  }

 private:
  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1);  // ends the workers' polling
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  struct job {
    chunk_fn fn = nullptr;
    const void* body = nullptr;
    index_t n = 0, chunks = 0;
  };

  /// Polls `ready` for up to poll_before_sleep; false if it never held.
  template <class Ready>
  static bool poll(const Ready& ready) {
    const auto until = std::chrono::steady_clock::now() + poll_before_sleep;
    for (unsigned polls = 1;; ++polls) {
      if (ready()) return true;
      if (polls % 64 == 0 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#else
      std::this_thread::yield();
#endif
    }
  }

  /// The caller's wait for its workers: poll, then sleep on done_. The caller announces its
  /// sleep before it checks `ready` a last time, and a worker changes what `ready` reads
  /// before it looks for a sleeper: one of the two sees the other.
  template <class Ready>
  void caller_waits(const Ready& ready) {
    if (poll(ready)) return;
    std::unique_lock lock(mutex_);
    caller_asleep_.store(true);
    done_.wait(lock, ready);
    caller_asleep_.store(false);
  }
  void wake_caller() {
    if (!caller_asleep_.load()) return;
    std::lock_guard lock(mutex_);
    done_.notify_all();
  }

  void work_on(const job& j) {
    index_t finished_here = 0;
    for (index_t c; (c = next_chunk_.fetch_add(1)) < j.chunks; ++finished_here)
      j.fn(j.body, j.n * c / j.chunks, j.n * (c + 1) / j.chunks);
    if (finished_here && done_chunks_.fetch_add(finished_here) + finished_here == j.chunks) wake_caller();
  }

  void worker_loop() {
    unsigned long seen = 0;
    for (;;) {
      poll([&] { return generation_.load() != seen; });
      job j;
      {
        std::unique_lock lock(mutex_);
        auto ready = [&] { return stopping_ || generation_.load() != seen; };
        if (!ready()) {
          ++workers_asleep_;
          wake_.wait(lock, ready);
          --workers_asleep_;
        }
        if (stopping_) return;
        seen = generation_.load();
        j = job_;
        active_.fetch_add(1);
      }
      work_on(j);
      if (active_.fetch_sub(1) == 1) wake_caller();
    }
  }

  unsigned thread_count_;
  std::vector<std::thread> workers_;
  std::mutex mutex_, dispatch_mutex_;
  std::condition_variable wake_, done_;
  job job_;                             // written under mutex_ while no worker is active
  std::atomic<unsigned long> generation_{0};  // one more per job; changed under mutex_
  std::atomic<int> active_{0};          // workers between taking a job and leaving it
  std::atomic<bool> caller_asleep_{false};
  int workers_asleep_ = 0;              // under mutex_
  bool stopping_ = false;               // under mutex_
  std::atomic<index_t> next_chunk_{0}, done_chunks_{0};
};

}  // namespace luminal
