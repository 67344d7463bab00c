// A persistent pool for the host backend. Dispatch stores a function pointer and an
// object pointer (no std::function), so a parallel loop allocates nothing.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <luminal/dtype.hpp>

namespace luminal {

class thread_pool {
 public:
  using chunk_fn = void (*)(const void* body, index_t begin, index_t end);

  /// Threads from LUMINAL_NUM_THREADS, else one per hardware thread.
  static thread_pool& instance() {
    static thread_pool pool(default_threads());
    return pool;
  }
  static unsigned default_threads() {
    if (const char* env = std::getenv("LUMINAL_NUM_THREADS")) {
      int n = std::atoi(env);
      if (n > 0) return unsigned(n);
    }
    return std::max(1u, std::thread::hardware_concurrency());
  }

  explicit thread_pool(unsigned threads) : thread_count_(std::max(1u, threads)) {
    for (unsigned t = 1; t < thread_count_; ++t) workers_.emplace_back([this] { worker_loop(); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  unsigned size() const { return thread_count_; }

  /// Runs fn over [0, n) split into chunks; the calling thread works too.
  void run(index_t n, index_t grain, chunk_fn fn, const void* body) {
    std::lock_guard serial(dispatch_mutex_);  // one loop at a time across programs
    index_t chunks = std::min<index_t>((n + grain - 1) / grain, index_t(thread_count_) * 4);
    job current{fn, body, n, chunks};
    std::unique_lock lock(mutex_);
    // A worker still holding the previous job must leave before the counters reset.
    idle_.wait(lock, [&] { return active_ == 0; });
    job_ = current;
    next_chunk_.store(0);
    done_chunks_.store(0);
    ++generation_;
    lock.unlock();
    wake_.notify_all();
    work_on(current);
    lock.lock();
    finished_.wait(lock, [&] { return done_chunks_.load() == chunks; });
  }

 private:
  struct job {
    chunk_fn fn = nullptr;
    const void* body = nullptr;
    index_t n = 0, chunks = 0;
  };

  void work_on(const job& j) {
    index_t finished_here = 0;
    for (;;) {
      index_t c = next_chunk_.fetch_add(1);
      if (c >= j.chunks) break;
      index_t begin = j.n * c / j.chunks, end = j.n * (c + 1) / j.chunks;
      j.fn(j.body, begin, end);
      ++finished_here;
    }
    if (finished_here && done_chunks_.fetch_add(finished_here) + finished_here == j.chunks) {
      std::lock_guard lock(mutex_);
      finished_.notify_all();
    }
  }

  void worker_loop() {
    unsigned long seen = 0;
    for (;;) {
      job j;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        j = job_;
        ++active_;
      }
      work_on(j);
      std::lock_guard lock(mutex_);
      if (--active_ == 0) idle_.notify_all();
    }
  }

  unsigned thread_count_;
  std::vector<std::thread> workers_;
  std::mutex mutex_, dispatch_mutex_;
  std::condition_variable wake_, finished_, idle_;
  job job_;
  unsigned long generation_ = 0;
  int active_ = 0;
  bool stopping_ = false;
  std::atomic<index_t> next_chunk_{0}, done_chunks_{0};
};

}  // namespace luminal
