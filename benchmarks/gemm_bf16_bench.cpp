// The bf16 GEMM (exec/gemm_bf16.hpp: vdpbf16ps where the CPU has AVX512_BF16) against
// OpenBLAS's sgemm on f32 copies of the same operands, at the character GPT's shapes and a
// square 1024: single-threaded (gemm_bf16 beside cblas_sgemm with one OpenBLAS thread) and
// on the host backend's pool (host::gemm<bf16> beside host::gemm<float>). Each round times
// every contender once, the rounds interleaved so that a busy neighbour slows them alike;
// the best round counts. Prints GFLOP/s and the ratio bf16 / sgemm per shape, and, built
// with -DGEMM_BENCH_WITH_DNNL -ldnnl where oneDNN's headers are found, its sgemm and bf16
// matmul (f32 output) beside them, on OMP_NUM_THREADS threads.
//
//     gemm_bf16_bench [--rounds 7] [--quick]
//
// OpenBLAS runs the kernels OPENBLAS_CORETYPE names (Haswell's AVX2 on the reference
// machine): keep it as the environment sets it, and say so beside the figures.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <luminal/backends/host.hpp>
#include <luminal/exec/gemm_bf16.hpp>

// oneDNN only on request (it needs -ldnnl): -DGEMM_BENCH_WITH_DNNL -ldnnl.
#if defined(GEMM_BENCH_WITH_DNNL) && __has_include(<oneapi/dnnl/dnnl.hpp>)
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#define GEMM_BENCH_HAVE_DNNL 1
#endif

extern "C" void openblas_set_num_threads(int);

namespace {
using namespace luminal;
using clock_type = std::chrono::steady_clock;

struct gemm_shape {
  index_t m, n, k;
  bool trans_a, trans_b;
  const char* what;
};

struct operands {
  gemm_shape s;
  std::vector<bf16> a, b, c;
  std::vector<float> af, bf, cf;
  index_t lda() const { return s.trans_a ? s.m : s.k; }
  index_t ldb() const { return s.trans_b ? s.k : s.n; }
  explicit operands(const gemm_shape& sh) : s(sh) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    a.resize(std::size_t(s.m * s.k));
    b.resize(std::size_t(s.k * s.n));
    for (auto& x : a) x = bf16(normal(rng));
    for (auto& x : b) x = bf16(normal(rng));
    af.resize(a.size());
    bf.resize(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) af[i] = float(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) bf[i] = float(b[i]);
    c.resize(std::size_t(s.m * s.n));
    cf.resize(c.size());
  }
};

/// Seconds per call of f, the mean of enough calls to fill about `seconds`.
template <class F>
double time_per_call(F&& f, double seconds) {
  f();  // warm: packing buffers, the pool's threads, caches
  index_t calls = 0;
  const auto start = clock_type::now();
  double elapsed = 0;
  do {
    f();
    ++calls;
    elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  } while (elapsed < seconds);
  return elapsed / double(calls);
}

#ifdef GEMM_BENCH_HAVE_DNNL
/// oneDNN's bf16 matmul (f32 output) on one gemm_shape, its primitive made once.
struct dnnl_bf16_matmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
  explicit dnnl_bf16_matmul(operands& o) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const auto& s = o.s;
    dnnl::memory::desc a_md({s.m, s.k}, dt::bf16, s.trans_a ? tag::ba : tag::ab);
    dnnl::memory::desc b_md({s.k, s.n}, dt::bf16, s.trans_b ? tag::ba : tag::ab);
    dnnl::memory::desc c_md({s.m, s.n}, dt::f32, tag::ab);
    prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine));
    args = {{DNNL_ARG_SRC, dnnl::memory(a_md, engine, o.a.data())},
            {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine, o.b.data())},
            {DNNL_ARG_DST, dnnl::memory(c_md, engine, o.cf.data())}};
  }
  void operator()() {
    prim.execute(stream, args);
    stream.wait();
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  double seconds = 0.15;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) rounds = 2, seconds = 0.05;
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("bf16 GEMM (%s) vs OpenBLAS sgemm (OPENBLAS_CORETYPE=%s); best of %d interleaved rounds\n",
              gemm_bf16_native() ? "AVX512_BF16 kernel" : "portable fallback", coretype ? coretype : "unset", rounds);
  const std::vector<gemm_shape> shapes = {
      {4096, 256, 256, false, true, "attn proj  x W^T"},   {4096, 768, 256, false, true, "qkv        x W^T"},
      {4096, 1024, 256, false, true, "fc1        x W^T"},  {4096, 256, 1024, false, true, "fc2        x W^T"},
      {256, 256, 4096, true, false, "wgrad      g^T x"},   {4096, 65, 256, false, true, "head       x W^T"},
      {1024, 1024, 1024, false, false, "square     A B"},
  };
  host pool_backend;
  const unsigned threads = thread_pool::instance().size();
  std::printf("%-18s %5s %5s %5s | %28s | %28s\n", "", "m", "n", "k", "1 thread: bf16  sgemm  ratio",
              "pool: bf16  sgemm  ratio");
  for (const gemm_shape& s : shapes) {
    operands o(s);
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    double best[4] = {1e30, 1e30, 1e30, 1e30};  // bf16 1t, sgemm 1t, bf16 pool, sgemm pool
    [[maybe_unused]] double best_dnnl[2] = {1e30, 1e30};
    auto sgemm = [&] {
      cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                  int(s.m), int(s.n), int(s.k), 1.0f, o.af.data(), int(o.lda()), o.bf.data(), int(o.ldb()), 0.0f,
                  o.cf.data(), int(s.n));
    };
#ifdef GEMM_BENCH_HAVE_DNNL
    dnnl_bf16_matmul dnnl_bf16(o);
    auto dnnl_f32 = [&] {
      dnnl_sgemm(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.m, s.n, s.k, 1.0f, o.af.data(), o.lda(), o.bf.data(),
                 o.ldb(), 0.0f, o.cf.data(), s.n);
    };
#endif
    for (int round = 0; round < rounds; ++round) {
      openblas_set_num_threads(1);
      best[0] = std::min(best[0], time_per_call([&] {
        gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, o.a.data(), o.lda(), o.b.data(), o.ldb(), o.c.data(), s.n);
      }, seconds));
      best[1] = std::min(best[1], time_per_call(sgemm, seconds));
      best[2] = std::min(best[2], time_per_call([&] {
        pool_backend.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, o.a.data(), o.lda(), o.b.data(), o.ldb(), o.c.data(),
                          s.n);
      }, seconds));
      best[3] = std::min(best[3], time_per_call([&] {
        pool_backend.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, o.af.data(), o.lda(), o.bf.data(), o.ldb(),
                          o.cf.data(), s.n);
      }, seconds));
#ifdef GEMM_BENCH_HAVE_DNNL
      best_dnnl[0] = std::min(best_dnnl[0], time_per_call(dnnl_f32, seconds));
      best_dnnl[1] = std::min(best_dnnl[1], time_per_call(dnnl_bf16, seconds));
#endif
    }
    auto gflops = [&](double t) { return flops / t * 1e-9; };
    std::printf("%-18s %5lld %5lld %5lld | %10.1f %6.1f %6.2fx    | %10.1f %6.1f %6.2fx\n", s.what, (long long)s.m,
                (long long)s.n, (long long)s.k, gflops(best[0]), gflops(best[1]), best[1] / best[0], gflops(best[2]),
                gflops(best[3]), best[3] / best[2]);
#ifdef GEMM_BENCH_HAVE_DNNL
    std::printf("%-18s oneDNN (OMP_NUM_THREADS=%s): sgemm %.1f, bf16 matmul %.1f GFLOP/s\n", "",
                std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset", gflops(best_dnnl[0]),
                gflops(best_dnnl[1]));
#endif
  }
  std::printf("GFLOP/s: 2 m n k / time; pool: %u threads; bf16 output rounded from f32 sums\n", threads);
  return 0;
}
