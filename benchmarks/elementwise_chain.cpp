// Fused vs op-by-op vs PyTorch eager: a 6-op elementwise chain over 16M floats.
//
//     t1 = x * y;  t2 = t1 + x;  t3 = t2 * 0.5;  t4 = t3 - y;  t5 = relu(t4);  t6 = t5 * t5
//
// In luminal's primitive ops that is 7 maps: mul, add, mul, add(t3, neg(y)) (sub is add +
// neg), max(t4, 0) (relu is max), mul — plus expand views that broadcast the two scalar
// constants, which cost no memory traffic.
//
//  (a) fused:     compile(t6)                     -> 1 kernel: reads x, y, writes t6
//  (b) op-by-op:  compile(t1, t2, t3, t4, t5, t6) -> 6 kernels, every t_k written to memory
//                 (neg(y) is inlined into t4's kernel, as torch's `sub` does in one op)
//  (c) PyTorch eager on the same inputs (benchmarks/elementwise_chain.py), 6 ops, same
//      thread count; also, for information, the same 6 ops with out= into preallocated
//      buffers, which leaves out the cost of allocating each fresh 64 MiB result.
//
// Both luminal programs are checked against a plain C++ loop before anything is timed;
// the program exits 1 if they disagree. Inputs are bound with bind_view (no copy).
//
//     elementwise_chain [--n ELEMENTS] [--reps R] [--no-torch]
//
// Threads: LUMINAL_NUM_THREADS, else std::thread::hardware_concurrency(); torch is given
// the same number. The interpreter for the torch side is $LUMINAL_BENCH_PYTHON, else
// /usr/bin/python3 when it exists (Debian's python3-torch), else python3 on PATH.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <map>
#include <string>
#include <vector>

#include "bench_common.hpp"


using namespace luminal;

constexpr Dim N{"N"};

namespace {

/// The chain as a plain loop: the reference, and a single-thread baseline.
void reference_chain(const float* x, const float* y, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float t1 = x[i] * y[i];
    float t2 = t1 + x[i];
    float t3 = t2 * 0.5f;
    float t4 = t3 - y[i];
    // relu with NaN propagation, as two selects: GCC 12 turns the single select
    // `t4 > 0 ? t4 : 0` followed by `t5 * t5` into a branch and leaves the loop scalar.
    float positive = t4 > 0.0f ? t4 : 0.0f;
    float t5 = t4 != t4 ? t4 : positive;
    out[i] = t5 * t5;
  }
}

/// The memory floor: out[i] = x[i] + y[i] on the host backend's threads, a plain loop that
/// moves the same bytes as the fused chain (reads x and y, writes one array).
struct sum_kernel {
  const float* x;
  const float* y;
  float* out;
  void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = x[i] + y[i];
  }
};

/// Largest |a - b| relative to 1 + |b|; prints the first mismatch.
bool agrees(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    float tol = 1e-5f * (1.0f + std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      std::fprintf(stderr, "MISMATCH: %s[%zu] = %.9g, reference %.9g\n", what, i, double(got[i]), double(want[i]));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 16u * 1024u * 1024u;
  int reps = 20;
  bool with_torch = true;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--n" && a + 1 < argc) n = std::stoull(argv[++a]);
    else if (arg == "--reps" && a + 1 < argc) reps = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--no-torch") with_torch = false;
    else {
      std::cerr << "usage: " << argv[0] << " [--n ELEMENTS] [--reps R] [--no-torch]\n";
      return 2;
    }
  }

  // ---- the chain ------------------------------------------------------------------------
  auto x = input<"x", f32>(shape<N>);
  auto y = input<"y", f32>(shape<N>);
  auto t1 = x * y;
  auto t2 = t1 + x;
  auto t3 = t2 * 0.5_c;
  auto t4 = t3 - y;
  auto t5 = relu(t4);
  auto t6 = t5 * t5;

  auto fused = compile(t6);
  auto op_by_op = compile(t1, t2, t3, t4, t5, t6);
  static_assert(decltype(fused)::kernel_count() == 1, "the chain should fuse into one kernel");
  static_assert(decltype(op_by_op)::kernel_count() == 6, "op-by-op should run one kernel per op");

  // ---- inputs: the same deterministic values the torch script builds ----------------------
  std::vector<float> xs(n), ys(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto k = static_cast<std::int64_t>(i);
    xs[i] = float((k * 7919) % 2001 - 1000) / 500.0f;
    ys[i] = float((k * 104729) % 1999 - 999) / 400.0f;
  }
  fused.bind_view("x", xs.data(), {index_t(n)});
  fused.bind_view("y", ys.data(), {index_t(n)});
  op_by_op.bind_view("x", xs.data(), {index_t(n)});
  op_by_op.bind_view("y", ys.data(), {index_t(n)});

  // ---- correctness first ------------------------------------------------------------------
  std::vector<float> want(n), got(n);
  reference_chain(xs.data(), ys.data(), want.data(), n);
  fused.run();
  fused.read_output<0>(got);
  if (!agrees("fused t6", got, want)) return 1;
  op_by_op.run();
  op_by_op.read_output<5>(got);
  if (!agrees("op-by-op t6", got, want)) return 1;
  double checksum = 0;
  for (float v : want) checksum += v;

  // ---- timing -----------------------------------------------------------------------------
  unsigned threads = thread_pool::instance().size();
  double fused_ms = bench::median_ms([&] { fused.run(); }, reps);
  double op_ms = bench::median_ms([&] { op_by_op.run(); }, reps);
  double loop_ms = bench::median_ms([&] { reference_chain(xs.data(), ys.data(), want.data(), n); }, reps);
  host pool_backend;
  double copy_ms = bench::median_ms(
      [&] { pool_backend.parallel_for(index_t(n), sum_kernel{xs.data(), ys.data(), got.data()}); }, reps);

  std::map<std::string, std::string> torch;
  std::string command;
  if (with_torch)
    torch = bench::run_torch("elementwise_chain.py",
                             "--n " + std::to_string(n) + " --reps " + std::to_string(reps) + " --threads " +
                                 std::to_string(threads),
                             command);
  bool have_torch = torch.count("torch_eager_ms") > 0;
  double torch_ms = have_torch ? std::stod(torch["torch_eager_ms"]) : 0.0;

  // ---- report -----------------------------------------------------------------------------
  double mib = double(n) * sizeof(float) / (1024.0 * 1024.0);
  auto gbps = [&](double arrays, double ms) { return arrays * double(n) * sizeof(float) / (ms * 1e-3) / 1e9; };
  std::printf("elementwise chain: t1=x*y; t2=t1+x; t3=t2*0.5; t4=t3-y; t5=relu(t4); t6=t5*t5\n");
  std::printf("  %zu f32 elements per array (%.0f MiB), median of %d runs after 3 warm-up runs\n", n, mib, reps);
  std::printf("  luminal: 7 primitive maps (sub = add+neg, relu = max); fused = %d kernel, op-by-op = %d kernels\n",
              decltype(fused)::kernel_count(), decltype(op_by_op)::kernel_count());
  std::printf("  threads: luminal %u (%s), torch %s\n", threads,
              std::getenv("LUMINAL_NUM_THREADS") ? "LUMINAL_NUM_THREADS" : "hardware_concurrency",
              have_torch ? torch["torch_threads"].c_str() : "-");
  std::printf("  results agree with a plain C++ loop (fused and op-by-op)\n\n");

  std::printf("  %-34s %10s %10s %12s\n", "variant", "ms", "vs fused", "eff. GB/s");
  std::printf("  %-34s %10.3f %10.2fx %12.1f\n", "luminal fused (1 kernel)", fused_ms, 1.0, gbps(3, fused_ms));
  std::printf("  %-34s %10.3f %10.2fx %12.1f\n", "luminal op-by-op (6 kernels)", op_ms, op_ms / fused_ms,
              gbps(15, op_ms));
  if (have_torch)
    std::printf("  %-34s %10.3f %10.2fx %12.1f\n", ("torch " + torch["torch_version"] + " eager (6 ops)").c_str(),
                torch_ms, torch_ms / fused_ms, gbps(15, torch_ms));
  if (torch.count("torch_eager_out_ms")) {
    double out_ms = std::stod(torch["torch_eager_out_ms"]);
    std::printf("  %-34s %10.3f %10.2fx %12.1f\n", "torch eager, out= (no allocation)", out_ms, out_ms / fused_ms,
                gbps(15, out_ms));
  }
  std::printf("  %-34s %10.3f %10.2fx %12.1f\n", "plain C++ loop, 1 thread", loop_ms, loop_ms / fused_ms,
              gbps(3, loop_ms));
  std::printf("  %-34s %10.3f %10.2fx %12.1f\n", "memory floor: out = x + y, threads", copy_ms, copy_ms / fused_ms,
              gbps(3, copy_ms));
  std::printf("\n  (eff. GB/s counts the bytes each variant must move: fused and the loop read x, y and\n"
              "   write t6 = 3 arrays; op-by-op and torch read 9 and write 6 arrays = 15 arrays)\n");
  std::printf("\n  op-by-op / fused: %.2fx\n", op_ms / fused_ms);
  std::printf("  fused bandwidth / memory floor's: %.0f%% (goal >= 80%%: %s)\n", 100.0 * copy_ms / fused_ms,
              copy_ms / fused_ms >= 0.8 ? "met" : "not met");
  if (have_torch) {
    std::printf("  torch eager / fused: %.2fx\n", torch_ms / fused_ms);
    if (torch.count("torch_checksum")) {
      double theirs = std::stod(torch["torch_checksum"]);
      bool same = std::fabs(theirs - checksum) <= 1e-9 * (1.0 + std::fabs(checksum));
      std::printf("  torch result checksum %s luminal's (%.10g vs %.10g)\n", same ? "matches" : "DIFFERS FROM", theirs,
                  checksum);
    }
  } else if (with_torch) {
    std::printf("\n  PyTorch figures unavailable: ");
    if (torch.count("torch_unavailable"))
      std::printf("torch cannot be imported by %s (%s).\n", bench::python_interpreter().c_str(),
                  torch["torch_unavailable"].c_str());
    else
      std::printf("the torch script failed (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
    std::printf("  Install it with `apt-get install python3-torch` (Debian/Ubuntu) or `pip install torch`,\n"
                "  or point LUMINAL_BENCH_PYTHON at an interpreter that has it. Command was:\n    %s\n",
                command.c_str());
  }
  return 0;
}
