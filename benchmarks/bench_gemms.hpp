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

#include <random>
#include <string>
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

/// Median time of all the GEMMs run back to back, each on its own buffers, and of each alone.
inline gemm_result time_gemms(const std::vector<gemm_shape>& shapes, int reps) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto filled = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& e : v) e = uniform(rng);
    return v;
  };
  std::vector<gemm_call> calls;
  for (const auto& s : shapes)
    calls.push_back({s, filled(std::size_t(s.m) * s.k), filled(std::size_t(s.k) * s.n), filled(std::size_t(s.m) * s.n)});
  gemm_result r;
  luminal::host pool;  // its GEMMs set OpenBLAS to one thread per call
  double pooled_total = bench::median_ms([&] { for (auto& c : calls) c.on_pool(pool); }, reps);
  std::vector<double> pooled;
  for (auto& c : calls) pooled.push_back(bench::median_ms([&] { c.on_pool(pool); }, reps));
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(int(luminal::thread_pool::instance().size()));
#endif
  r.total_ms = std::min(pooled_total, bench::median_ms([&] { for (auto& c : calls) c(); }, reps));
  for (std::size_t i = 0; i < calls.size(); ++i)
    r.each.emplace_back(calls[i].s, std::min(pooled[i], bench::median_ms(calls[i], reps)));
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(1);  // back to what luminal's host backend runs with
#endif
  return r;
}

}  // namespace bench
