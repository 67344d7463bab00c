// LUMINAL_NUM_THREADS is read strictly (issue 63): the whole text a decimal integer from 1
// to thread_pool::max_threads() (4 per hardware thread); anything else names the variable.
#include <catch2/catch.hpp>

#include <luminal/backends/thread_pool.hpp>

using luminal::thread_pool;
using Catch::Matchers::Contains;

TEST_CASE("LUMINAL_NUM_THREADS takes whole numbers from 1 to 4 per hardware thread", "[backend][host]") {
  CHECK(thread_pool::threads_from_text("1") == 1);
  CHECK(thread_pool::threads_from_text(std::to_string(thread_pool::max_threads())) == thread_pool::max_threads());
  CHECK(thread_pool::max_threads() >= 4);
  for (const char* bad : {"", "0", "-1", "abc", "1e3", "2.5", " 4", "4 ", "+4", "100000", "99999999999999999999"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(thread_pool::threads_from_text(bad),
                      Contains("LUMINAL_NUM_THREADS must be an integer from 1 to") && Contains("not '"));
  }
  CHECK_THROWS_AS(thread_pool::threads_from_text(std::to_string(thread_pool::max_threads() + 1)),
                  luminal::thread_count_error);
}

TEST_CASE("a pool of the largest accepted size starts and runs", "[backend][host]") {
  thread_pool pool(thread_pool::max_threads());
  CHECK(pool.size() == thread_pool::max_threads());
  std::vector<int> seen(1000, 0);
  struct body_t {
    std::vector<int>* seen;
    static void run(const void* self, luminal::index_t begin, luminal::index_t end) {
      auto* s = static_cast<const body_t*>(self)->seen;
      for (auto i = begin; i < end; ++i) (*s)[std::size_t(i)] += 1;
    }
  } body{&seen};
  pool.run(1000, 10, &body_t::run, &body);
  for (int v : seen) CHECK(v == 1);
}
