// cumsum (ops/cumulative.hpp) over 1M float32 elements as one row, and over a
// [1024, 1024] matrix along each axis, against torch.cumsum (CPU) and jax.numpy.cumsum
// (jax.jit on the CPU) in cumsum_bench.py. Each row times one run of the compiled
// program, median of R; GB/s counts the bytes read and written once (8 per element).
//
//     cumsum_bench [--reps R] [--no-peers]
//
// Threads: LUMINAL_NUM_THREADS, else std::thread::hardware_concurrency(); the peers are
// given the same number. The interpreter for torch is $LUMINAL_BENCH_PYTHON (else
// /usr/bin/python3 or python3), for JAX $LUMINAL_BENCH_JAX_PYTHON (else the same).
#include <cstdio>
#include <cstdlib>
#include <luminal/backends/host.hpp>
#include <luminal/luminal.hpp>
#include <map>
#include <string>

#include "bench_common.hpp"

using namespace luminal;

namespace {
constexpr std::size_t million = std::size_t(1) << 20, side = 1024;

/// Median milliseconds of one run of y = cumsum over x.
template <class X, class Y>
double time_case(X, Y y, std::vector<std::size_t> shape, int reps) {
  auto prog = compile(y);
  prog.bind("x", bench::random_values(shape, 1));
  return bench::median_ms([&] { prog.run(); }, reps);
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  bool peers = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--no-peers") peers = false;
    else {
      std::fprintf(stderr, "usage: cumsum_bench [--reps R] [--no-peers]\n");
      return 2;
    }
  }
  auto row_input = input<"x", f32>(shape<million>);
  auto matrix = input<"x", f32>(shape<side, side>);
  const double row_ms = time_case(row_input, cumsum<0>(row_input), {million}, reps);
  const double axis0_ms = time_case(matrix, cumsum<0>(matrix), {side, side}, reps);
  const double axis1_ms = time_case(matrix, cumsum<1>(matrix), {side, side}, reps);
  const unsigned threads = thread_pool::instance().size();
  std::map<std::string, std::string> torch, jax;
  std::string command;
  const std::string arguments = "--reps " + std::to_string(reps) + " --threads " + std::to_string(threads);
  if (peers) {
    torch = bench::run_torch("cumsum_bench.py", "--peer torch " + arguments, command);
    jax = bench::run_peer("jax", bench::jax_interpreter(), "cumsum_bench.py", "--peer jax " + arguments, command);
  }
  std::printf("cumsum, float32, median of %d runs; GB/s = 8 bytes per element / time\n", reps);
  std::printf("  threads: luminal %u, torch %s, jax %s\n", threads,
              torch.count("torch_threads") ? torch["torch_threads"].c_str() : "-",
              jax.count("jax_threads") ? jax["jax_threads"].c_str() : "-");
  std::printf("  %-28s %10s %8s %10s %8s %10s %8s\n", "case", "luminal ms", "GB/s", "torch ms", "GB/s", "jax ms", "GB/s");
  auto row = [&](const char* name, const char* key, double ms) {
    const double bytes = 8.0 * double(million);
    auto peer = [&](std::map<std::string, std::string>& p, const std::string& prefix) {
      if (!p.count(prefix + key)) return std::printf(" %10s %8s", "-", "-");
      const double t = std::stod(p[prefix + key]);
      return std::printf(" %10.3f %8.2f", t, bytes / (t * 1e6));
    };
    std::printf("  %-28s %10.3f %8.2f", name, ms, bytes / (ms * 1e6));
    peer(torch, "torch_");
    peer(jax, "jax_");
    std::printf("\n");
  };
  row("[1M], axis 0 (one row)", "row_ms", row_ms);
  row("[1024, 1024], axis 0", "axis0_ms", axis0_ms);
  row("[1024, 1024], axis 1", "axis1_ms", axis1_ms);
  if (peers && !torch.count("torch_row_ms"))
    std::printf("  torch not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
  if (peers && !jax.count("jax_row_ms")) std::printf("  jax not measured: %s\n", jax["_output"].c_str());
}
