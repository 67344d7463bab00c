// The GEMM floor of a benchmarked step: its matrix products alone in OpenBLAS, at the
// shapes and transpositions luminal passes to cblas_sgemm, timed back to back. Each is
// timed twice, and the faster counts: OpenBLAS with its own threads (as many as luminal
// has), and luminal's host GEMM (single-threaded OpenBLAS on each thread of luminal's
// pool), so that the floor is the best either way of running the same products.
//
//     std::vector<bench::gemm_shape> list;
//     bench::add_linear(list, "fc1", 128, 784, 512, false);
//     bench::gemm_result floor = bench::time_gemms(list, 30);
#pragma once
#include <cblas.h>

#include <luminal/backends/host.hpp>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.hpp"

namespace bench {

struct gemm_shape {
  bool trans_a, trans_b;
  int m, n, k;
  std::string what;
  int batches = 1;  // the same product this many times (a batched matmul)
};

/// C[m, n] = op(A) op(B), row-major, as the host backend calls OpenBLAS.
struct gemm_call {
  gemm_shape s;
  std::vector<float> a, b, c;
  void operator()() {
    for (int i = 0; i < s.batches; ++i)
      cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.m,
                  s.n, s.k, 1.0f, a.data(), s.trans_a ? s.m : s.k, b.data(), s.trans_b ? s.k : s.n, 0.0f, c.data(), s.n);
  }
  /// The same products through luminal's host backend (one batched call).
  void on_pool(luminal::host& h) {
    h.gemm_strided_batched(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), s.trans_a ? s.m : s.k, 0, b.data(),
                           s.trans_b ? s.k : s.n, 0, c.data(), s.n, 0, s.batches);
  }
};
/// The GEMMs of y = x W^T with x [rows, in], W [out, in], as luminal runs them: forward
/// (x W^T), weight gradient (g^T x, written as [out, in]) and, when the input needs a
/// gradient, the input gradient g W.
inline void add_linear(std::vector<gemm_shape>& list, const std::string& name, int rows, int in, int out,
                       bool input_grad) {
  list.push_back({false, true, rows, out, in, name + " forward x W^T"});
  list.push_back({true, false, out, in, rows, name + " weight grad g^T x"});
  if (input_grad) list.push_back({false, false, rows, in, out, name + " input grad g W"});
}

/// Floating-point operations of the GEMMs in `list`.
inline double gemm_flops(const std::vector<gemm_shape>& list) {
  double flops = 0;
  for (const auto& g : list) flops += 2.0 * g.m * g.n * g.k * g.batches;
  return flops;
}

struct gemm_result {
  double total_ms = 0;
  std::vector<std::pair<gemm_shape, double>> each;  // shape, median ms
};

/// The GEMMs of `shapes`, each on its own buffers, ready to be timed again and again (a
/// benchmark alternates them with the step they are the floor of).
class gemm_floor {
  /// f() with OpenBLAS on as many threads as luminal's pool, then back to one (what
  /// luminal's host backend runs with). OpenBLAS's threads poll for a while after a call
  /// before they sleep: that is waited out, so that what is timed next has the cores.
  template <class F>
  static auto with_blas_threads(F&& f) {
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(int(luminal::thread_pool::instance().size()));
#endif
    auto result = f();
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
#endif
    return result;
  }

 public:
  explicit gemm_floor(const std::vector<gemm_shape>& shapes) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    auto filled = [&](std::size_t n) {
      std::vector<float> v(n);
      for (auto& e : v) e = uniform(rng);
      return v;
    };
    for (const auto& s : shapes)
      calls_.push_back(
          {s, filled(std::size_t(s.m) * s.k), filled(std::size_t(s.k) * s.n), filled(std::size_t(s.m) * s.n)});
  }
  /// Median time of all the GEMMs back to back: the faster of luminal's pool and OpenBLAS's
  /// own threads.
  double total_ms(int reps) {
    double pooled = bench::median_ms([&] { for (auto& c : calls_) c.on_pool(pool_); }, reps);
    return std::min(pooled, with_blas_threads([&] { return bench::median_ms([&] { for (auto& c : calls_) c(); }, reps); }));
  }
  /// Each GEMM alone, the faster way.
  std::vector<std::pair<gemm_shape, double>> each_ms(int reps) {
    std::vector<std::pair<gemm_shape, double>> each;
    for (auto& c : calls_) each.emplace_back(c.s, bench::median_ms([&] { c.on_pool(pool_); }, reps));
    with_blas_threads([&] {
      for (std::size_t i = 0; i < calls_.size(); ++i)
        each[i].second = std::min(each[i].second, bench::median_ms(calls_[i], reps));
      return 0;
    });
    return each;
  }

 private:
  std::vector<gemm_call> calls_;
  luminal::host pool_;  // its GEMMs set OpenBLAS to one thread per call
};

/// Median time of all the GEMMs run back to back, and of each alone.
inline gemm_result time_gemms(const std::vector<gemm_shape>& shapes, int reps) {
  gemm_floor floor(shapes);
  gemm_result r;
  r.total_ms = floor.total_ms(reps);
  r.each = floor.each_ms(reps);
  return r;
}

}  // namespace bench
