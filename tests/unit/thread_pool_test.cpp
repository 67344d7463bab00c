// The host backend's thread pool: every index of every loop runs exactly once, whatever
// the thread count and chunk size, when loops follow each other closely (the workers
// still polling) and after pauses long enough for them to sleep.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <luminal/backends/thread_pool.hpp>
#include <thread>
#include <vector>

using luminal::index_t;

namespace {
struct hit_counts {
  std::atomic<int>* hits;
  static void count(const void* self, index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i) static_cast<const hit_counts*>(self)->hits[i].fetch_add(1);
  }
};
}  // namespace

TEST_CASE("the thread pool runs every index of each loop once, polling or after its workers slept", "[backend][host]") {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    luminal::thread_pool pool(threads);
    REQUIRE(pool.size() == threads);
    std::vector<std::atomic<int>> hits(3000);
    hit_counts counts{hits.data()};
    int wrong = 0;
    for (int run = 0; run < 1500; ++run) {
      const index_t n = 1 + index_t(run) * 7919 % 3000, grain = 1 + run % 257;
      pool.run(n, grain, &hit_counts::count, &counts);
      for (index_t i = 0; i < n; ++i) wrong += hits[std::size_t(i)].exchange(0) != 1;
      // Longer than the pool polls: the next loop wakes sleeping workers.
      if (run % 300 == 0) std::this_thread::sleep_for(luminal::thread_pool::poll_before_sleep * 5);
    }
    INFO("threads: " << threads);
    CHECK(wrong == 0);
  }
}
