// Forward + backward of the convolutions that are not plain im2col: a depthwise Conv2d
// (groups = channels, the group axis a batch axis of the one GEMM) and a dilated Conv2d
// (a step inside the unfold view), at batch 32, against PyTorch CPU (conv_bench.py); a
// plain Conv2d of the same shape is the reference row.
//
// Each case times one run of the compiled gradients of sum(conv(x) * r) with respect to x,
// weight and bias (the forward is inside it), and torch's conv forward plus backward()
// on the same shapes.
//
//     conv_bench [--reps R] [--no-torch]
//
// Threads: LUMINAL_NUM_THREADS, else std::thread::hardware_concurrency(); torch is given
// the same number. The interpreter for the torch side is $LUMINAL_BENCH_PYTHON, else
// /usr/bin/python3 when it exists, else python3 on PATH.
#include <cstdio>
#include <cstdlib>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <map>
#include <string>
#include <tuple>

#include "bench_common.hpp"

using namespace luminal;

namespace {
constexpr std::int64_t batch = 32, channels = 32, side = 32;

/// Median milliseconds of one forward + backward of module m on [32, 32, 32, 32].
template <class Module>
double time_case(Module m, int reps) {
  auto x = input<"x", f32>(shape<batch, channels, side, side>);
  auto y = m(x);
  auto r = input<"r", f32>(shape_t<decltype(y)>{});
  auto prog = std::apply([](auto... g) { return compile(g...); }, grad(sum(y * r), x, m.weight, m.bias));
  tensor_store store;
  m.initialize(store, 1);
  store.bind(prog);
  prog.bind("x", bench::random_values({batch, channels, side, side}, 1));
  auto extents = shape_t<decltype(y)>::dims;
  prog.bind("r", bench::random_values({std::size_t(extents[0].offset), std::size_t(extents[1].offset),
                                std::size_t(extents[2].offset), std::size_t(extents[3].offset)},
                               2));
  return bench::median_ms([&] { prog.run(); }, reps);
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  bool torch_too = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--no-torch") torch_too = false;
    else {
      std::fprintf(stderr, "usage: conv_bench [--reps R] [--no-torch]\n");
      return 2;
    }
  }
  const double plain_ms = time_case(nn::Conv2d<"plain", channels, channels, 3, 1, 1>{}, reps);
  const double depthwise_ms = time_case(nn::Conv2d<"dw", channels, channels, 3, 1, 1, true, f32, 1, channels>{}, reps);
  const double dilated_ms = time_case(nn::Conv2d<"dil", channels, channels, 3, 1, 2, true, f32, 2>{}, reps);
  const unsigned threads = thread_pool::instance().size();
  std::map<std::string, std::string> torch;
  std::string command;
  if (torch_too)
    torch = bench::run_torch("conv_bench.py", "--reps " + std::to_string(reps) + " --threads " + std::to_string(threads),
                             command);
  std::printf("Conv2d forward + backward (d/dx, d/dweight, d/dbias), x [32, 32, 32, 32], 3 x 3, median of %d\n", reps);
  std::printf("  threads: luminal %u, torch %s\n", threads, torch.count("torch_threads") ? torch["torch_threads"].c_str() : "-");
  std::printf("  %-44s %12s %12s %10s\n", "case", "luminal ms", "torch ms", "torch/lum");
  auto row = [&](const char* name, const char* key, double ms) {
    if (torch.count(key)) {
      const double t = std::stod(torch[key]);
      std::printf("  %-44s %12.3f %12.3f %10.2f\n", name, ms, t, t / ms);
    } else {
      std::printf("  %-44s %12.3f %12s %10s\n", name, ms, "-", "-");
    }
  };
  row("plain (for reference), padding 1", "torch_plain_ms", plain_ms);
  row("depthwise (groups 32), padding 1", "torch_depthwise_ms", depthwise_ms);
  row("dilation 2, padding 2", "torch_dilated_ms", dilated_ms);
  if (torch_too && !torch.count("torch_depthwise_ms"))
    std::printf("  torch not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
}
