// One full training step (forward, backward, Adam update) against PyTorch, against JAX
// `jit`, and against the GEMMs of that step alone.
//
//   mlp: 784-512-512-10, ReLU
//   cnn: the CNN of examples/fashion_mnist.cpp: Conv2d(1, 32, 3, 1, 1) ReLU MaxPool2d(2)
//        Conv2d(32, 64, 3, 1, 1) ReLU MaxPool2d(2) flatten Linear(3136, 128) ReLU
//        Linear(128, 10), on [Batch, 784] reshaped to [Batch, 1, 28, 28]
//   resnet: the ResNet of examples/fashion_mnist.cpp (fashion_models.hpp; bench_resnet.hpp):
//        Conv2d(1, 16, 3) BN ReLU, BasicBlock(16 -> 32, stride 2), BasicBlock(32 -> 64,
//        stride 2) (each with a 1x1 strided projection + BN on its shortcut), depthwise
//        Conv2d(64, 64, 3, groups 64) BN ReLU, global average pool, Linear(64, 10), on
//        "images" [Batch, 784]; BatchNorm in training mode, its running statistics updated
//        in the step (as fashion_mnist trains it). Only in a build with LUMINAL_BENCH_RESNET
//        (CMake: -DLUMINAL_BENCH_RESNET=ON): with it this file takes GCC ~2 CPU-minutes, 2 GB.
//        No JAX twin: the JAX peer is not run for it.
//   all: nn::cross_entropy on i32 labels, batch 128, f32, Adam (lr 1e-3)
//
//   (a) luminal: compile_train_step(loss, adam{.lr = 1e-3f}), parameters from the modules'
//       initialize(); step.run() is one step
//   (b) PyTorch eager, the same step (benchmarks/train_step.py): zero_grad(set_to_none=True),
//       forward, backward, torch.optim.Adam.step(), with luminal's thread count
//   (c) JAX: the same step as one jax.jit function (benchmarks/train_step_jax.py), XLA on
//       the CPU with luminal's thread count; `--install-jax` puts JAX into a virtual
//       environment beside this binary first
//   (d) the step's GEMMs alone in OpenBLAS, at the shapes of the step (weights [out, in],
//       forward x W^T, the weight gradient, the input gradient g W). A convolution is its
//       im2col GEMM [B Ho Wo, Cin K K] x [Cin K K, Cout] plus the two backward GEMMs: the
//       same FLOPs as luminal's per-image GEMMs (Conv2d multiplies [Cout, Cin K K] by each
//       image's [Cin K K, Ho Wo]), in one call each, the faster form. The first layer's
//       input gradient is not needed (x is data), so it is not counted. The ResNet's
//       depthwise convolution (groups 64) is 64 products of one channel each, [B Ho Wo, 9]
//       x [9, 1] and their backward GEMMs: one entry each, of 64 batches (64 sgemm calls).
//
// The project's goal for this step: faster than the fastest peer, and within 1.15x (MLP)
// or 1.5x (CNN) of the GEMMs alone; the ResNet's goal is the peer alone (no GEMM goal is
// set for it: its BatchNorms, im2col and elementwise work come on top of GEMMs that are
// about half of its step).
//
//     train_step_bench [--batch B] [--reps R] [--rounds N] [--no-torch] [--no-jax] [--install-jax]
//                      [--model mlp|cnn|both|resnet] [--profile]
//
// --model both is mlp and cnn; resnet runs alone.
//
// The step and (d) alternate in N rounds (3) of R steps (30) each; the ratio to the GEMMs
// is the median of the rounds' ratios, so that both sides see the same machine.
//
// --profile prints, after the timed steps, each luminal kernel's time and what it fuses.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_gemms.hpp"
#include "bench_models.hpp"
#ifdef LUMINAL_BENCH_RESNET
#include "bench_resnet.hpp"
#endif

using namespace luminal;

namespace {

/// luminal / GEMMs at most this; 0: no goal (the ResNet's goal is the fastest peer alone).
double goal_vs_gemms(const std::string& model) { return model == "mlp" ? 1.15 : model == "cnn" ? 1.5 : 0; }

// ---- the models (bench_models.hpp) ---------------------------------------------------------

bench::mlp mlp_model;
bench::cnn cnn_model;
#ifdef LUMINAL_BENCH_RESNET
bench::resnet resnet_model;  // bench_resnet.hpp: examples/fashion_models.hpp's ResNet
#endif

// ---- luminal's step --------------------------------------------------------------------------

struct luminal_result {
  double step_ms = 0;   // the median over the rounds of the step's median
  double gemm_ms = 0;   // likewise the GEMM floor's
  double vs_gemms = 0;  // the median over the rounds of luminal / GEMMs
  std::vector<std::pair<double, double>> rounds;  // (luminal ms, GEMMs ms) of each round
  int last_step = 0;    // steps taken, the last of them after the rounds
  float first_loss = 0, last_loss = 0;
  int kernels = 0;
  std::size_t parameters = 0;  // tensors
  std::size_t buffers = 0;     // BatchNorm's running statistics, updated by the step
  double compile_s = 0;        // compile_train_step and set-up, at run time
};

bool print_profile = false;  // --profile: each luminal kernel's time, after the timed steps

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// Compiles the step and times it in `rounds` rounds of `reps` steps, each followed by a
/// timing of the GEMM floor: this VM's speed drifts by a third over minutes, and a ratio
/// taken from two timings minutes apart moves with it. `x_name`: the model's [Batch, 784]
/// input ("x", or the ResNet's "images").
template <class Loss, class... Modules>
luminal_result time_luminal(Loss loss, const std::string& x_name, const xt::xarray<float>& x,
                            const xt::xarray<std::int32_t>& labels, int reps, int rounds, bench::gemm_floor& floor,
                            const Modules&... modules) {
  luminal_result r;
  auto t0 = std::chrono::steady_clock::now();
  auto step = compile_train_step(loss, adam{.lr = 1e-3f});
  using step_type = decltype(step);
  tensor_store initial;
  (modules.initialize(initial, 1), ...);
  r.parameters = step_type::parameter_count;
  r.buffers = boost::mp11::mp_size<typename step_type::buffers>::value;
  const std::size_t assigned = step.store().assign(initial);
  // Adam: each parameter has 2 state tensors; the buffers (BatchNorm's running statistics)
  // are initialized by the modules too.
  if (assigned != r.parameters + r.buffers || step_type::slot_count != 3 * r.parameters)
    throw std::runtime_error("train_step_bench: initialized " + std::to_string(assigned) +
                             " tensors, but the step has " + std::to_string(r.parameters) + " parameters, " +
                             std::to_string(step_type::slot_count) + " parameter and state tensors and " +
                             std::to_string(r.buffers) + " buffers");
  step.bind(x_name, x);
  step.bind("labels", labels);
  r.kernels = step.kernel_count();
  r.first_loss = step.run();
  r.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> steps, floors, ratios;
  for (int k = 0; k < rounds; ++k) {
    steps.push_back(bench::median_ms([&] { step.run(); }, reps));
    floors.push_back(floor.total_ms(reps));
    ratios.push_back(steps.back() / floors.back());
    r.rounds.emplace_back(steps.back(), floors.back());
  }
  r.step_ms = median(steps);
  r.gemm_ms = median(floors);
  r.vs_gemms = median(ratios);
  r.last_loss = step.run();
  r.last_step = 2 + rounds * (3 + reps);  // median_ms warms up with 3
  if (print_profile) {  // after the timing: profiling waits after every kernel
    step.set_profiling(true);
    for (int k = 0; k < reps; ++k) step.run();
    std::fputs(step.profile().c_str(), stdout);
    std::fputs(step.describe().c_str(), stdout);
  }
  return r;
}

// ---- the GEMM floor --------------------------------------------------------------------------

using bench::add_linear;
using bench::gemm_result;
using bench::gemm_shape;
using bench::time_gemms;

std::vector<gemm_shape> mlp_gemms(int b) {
  std::vector<gemm_shape> list;
  add_linear(list, "fc1", b, 784, 512, false);
  add_linear(list, "fc2", b, 512, 512, true);
  add_linear(list, "fc3", b, 512, 10, true);
  return list;
}

std::vector<gemm_shape> cnn_gemms(int b) {
  std::vector<gemm_shape> list;
  add_linear(list, "conv1 (im2col)", b * 28 * 28, 1 * 9, 32, false);
  add_linear(list, "conv2 (im2col)", b * 14 * 14, 32 * 9, 64, true);
  add_linear(list, "fc1", b, 64 * 7 * 7, 128, true);
  add_linear(list, "fc2", b, 128, 10, true);
  return list;
}

/// The ResNet's convolutions as im2col GEMMs (as cnn_gemms), its 1x1 strided projections
/// (k = Cin) and its head. The depthwise convolution (groups 64) is what it is: 64 products
/// of one channel each, [B 7 7, 9] x [9, 1] forward, [1, B 7 7] x [B 7 7, 9] weight grad and
/// [B 7 7, 1] x [1, 9] input grad: one entry each with batches = 64, that is 64 sgemm calls
/// (luminal's graph: weight [64, 1, 9] times the columns [B, 64, 9, 49], a batched matmul).
std::vector<gemm_shape> resnet_gemms(int b) {
  std::vector<gemm_shape> list;
  add_linear(list, "conv1 stem (im2col)", b * 28 * 28, 1 * 9, 16, false);
  add_linear(list, "layer1.0.conv1 (im2col, stride 2)", b * 14 * 14, 16 * 9, 32, true);
  add_linear(list, "layer1.0.conv2 (im2col)", b * 14 * 14, 32 * 9, 32, true);
  add_linear(list, "layer1.0.downsample.0 (1x1, stride 2)", b * 14 * 14, 16, 32, true);
  add_linear(list, "layer2.0.conv1 (im2col, stride 2)", b * 7 * 7, 32 * 9, 64, true);
  add_linear(list, "layer2.0.conv2 (im2col)", b * 7 * 7, 64 * 9, 64, true);
  add_linear(list, "layer2.0.downsample.0 (1x1, stride 2)", b * 7 * 7, 32, 64, true);
  const std::size_t depthwise = list.size();
  add_linear(list, "depthwise (im2col, 1 channel)", b * 7 * 7, 9, 1, true);
  for (std::size_t i = depthwise; i < list.size(); ++i) list[i].batches = 64;
  add_linear(list, "fc", b, 64, 10, true);
  return list;
}

// ---- printing --------------------------------------------------------------------------------

struct summary {
  std::string model;
  double vs_peer = 0;   // the fastest peer's time / luminal's; 0 when no peer ran
  std::string peer;     // which peer that was
  double vs_gemms = 0;  // luminal / GEMMs
};

summary report(const std::string& key, const std::string& title, const luminal_result& lum, const gemm_result& gemms,
               std::map<std::string, std::string>& torch, std::map<std::string, std::string>& jax, int reps) {
  summary s{key, 0, "", lum.vs_gemms};
  std::printf("%s\n", title.c_str());
  const std::string buffers = lum.buffers ? " (+ " + std::to_string(lum.buffers) + " buffers)" : "";
  std::printf("  luminal: %zu parameter tensors%s, %d kernels per step; compile_train_step + first step %.2f s\n",
              lum.parameters, buffers.c_str(), lum.kernels, lum.compile_s);
  std::printf("  %-60s %10s\n",
              ("variant (median of " + std::to_string(lum.rounds.size()) + " rounds' medians of " +
               std::to_string(reps) + " steps)").c_str(),
              "ms");
  std::printf("  %-60s %10.3f\n", "luminal training step", lum.step_ms);
  const bool have_torch = torch.count("torch_" + key + "_step_ms") > 0;
  double torch_ms = 0;
  if (have_torch) {
    torch_ms = std::stod(torch["torch_" + key + "_step_ms"]);
    std::printf("  %-60s %10.3f\n",
                ("torch " + torch["torch_version"] + " training step, " + torch["torch_" + key + "_threads"] + " thread(s)").c_str(),
                torch_ms);
    s.vs_peer = torch_ms / lum.step_ms;
    s.peer = "torch";
  } else if (torch.count("torch_version")) {  // torch ran, but measured no step of this model
    const std::string& out = torch["_output"];
    std::printf("  torch %s: no %s step measured (%s); its output ends:\n    %s\n", torch["torch_version"].c_str(),
                key.c_str(), torch["_status"].c_str(), out.substr(out.size() > 600 ? out.size() - 600 : 0).c_str());
  }
  const bool have_jax = jax.count("jax_" + key + "_step_ms") > 0;
  if (have_jax) {
    double jax_ms = std::stod(jax["jax_" + key + "_step_ms"]);
    std::printf("  %-60s %10.3f\n",
                ("JAX " + jax["jax_version"] + " jit training step, " + jax["jax_" + key + "_threads"] + " thread(s)").c_str(),
                jax_ms);
    if (s.peer.empty() || jax_ms < s.vs_peer * lum.step_ms) {
      s.vs_peer = jax_ms / lum.step_ms;
      s.peer = "JAX";
    }
  }
  std::printf("  %-60s %10.3f\n",
              ("OpenBLAS: the step's " + std::to_string(gemms.each.size()) + " GEMMs alone, [m x n x k]:").c_str(),
              lum.gemm_ms);
  std::printf("    each alone (timed once, after the rounds):\n");
  for (const auto& [g, ms] : gemms.each) {
    char label[128];
    const std::string times = g.batches > 1 ? " x" + std::to_string(g.batches) : "";
    std::snprintf(label, sizeof label, "%s [%d x %d x %d]%s%s%s", g.what.c_str(), g.m, g.n, g.k,
                  g.trans_a ? " A^T" : "", g.trans_b ? " B^T" : "", times.c_str());
    std::printf("    %-58s %10.3f\n", label, ms);
  }
  // Each side trains on one fixed batch: the peers take 1 + 3 warm-up + reps + 1 steps,
  // luminal as many per round.
  std::printf("  loss at the first / last step: luminal %.4f / %.4f (step %d)", lum.first_loss, lum.last_loss,
              lum.last_step);
  if (have_torch)
    std::printf("; torch %s / %s (step %d)", torch["torch_" + key + "_first_loss"].c_str(),
                torch["torch_" + key + "_last_loss"].c_str(), reps + 5);
  if (have_jax)
    std::printf("; JAX %s / %s (step %d)", jax["jax_" + key + "_first_loss"].c_str(),
                jax["jax_" + key + "_last_loss"].c_str(), reps + 5);
  std::printf("\n");
  if (have_torch) std::printf("  torch / luminal:  %.2fx (>1: luminal faster)\n", torch_ms / lum.step_ms);
  if (have_jax)
    std::printf("  JAX / luminal:    %.2fx (>1: luminal faster)\n", std::stod(jax["jax_" + key + "_step_ms"]) / lum.step_ms);
  std::printf("  luminal / GEMMs:  %.2fx, the median of the rounds:", s.vs_gemms);
  for (const auto& [step_ms, gemm_ms] : lum.rounds) std::printf(" %.1f/%.1f", step_ms, gemm_ms);
  std::printf(" ms\n\n");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 128, reps = 30, rounds = 3;
  bool with_torch = true, with_jax = true, install = false;
  std::string model = "both";
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--batch" && a + 1 < argc) batch = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--reps" && a + 1 < argc) reps = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--rounds" && a + 1 < argc) rounds = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--no-torch") with_torch = false;
    else if (arg == "--no-jax") with_jax = false;
    else if (arg == "--install-jax") install = true;
    else if (arg == "--profile") print_profile = true;
    else if (arg == "--model" && a + 1 < argc) model = argv[++a];
    else {
      std::cerr << "usage: " << argv[0]
                << " [--batch B] [--reps R] [--rounds N] [--no-torch] [--no-jax] [--install-jax]"
                   " [--model mlp|cnn|both|resnet] [--profile]\n";
      return 2;
    }
  }
  if (model != "mlp" && model != "cnn" && model != "both" && model != "resnet") {
    std::cerr << "train_step_bench: --model must be mlp, cnn, both (mlp and cnn) or resnet, not '" << model << "'\n";
    return 2;
  }
#ifndef LUMINAL_BENCH_RESNET
  if (model == "resnet") {
    std::cerr << "train_step_bench: --model resnet is not compiled into this build: build it with "
                 "-DLUMINAL_BENCH_RESNET (CMake: -DLUMINAL_BENCH_RESNET=ON; with its training step this benchmark "
                 "takes the compiler about 2 CPU-minutes and 2 GB)\n";
    return 2;
  }
#endif
  const bool run_mlp = model == "mlp" || model == "both", run_cnn = model == "cnn" || model == "both";
  const bool run_resnet = model == "resnet";
  if (run_resnet && with_jax) {  // train_step_jax.py has no ResNet
    std::printf("JAX: not run for the ResNet (train_step_jax.py has no twin of it)\n");
    with_jax = false;
  }

  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t b = std::size_t(batch);
  xt::xarray<float> x = xt::xarray<float>::from_shape({b, std::size_t(784)});
  for (auto& v : x) v = normal(rng);
  xt::xarray<std::int32_t> labels = xt::xarray<std::int32_t>::from_shape({b});
  for (std::size_t i = 0; i < b; ++i) labels(i) = std::int32_t(i % 10);

  const unsigned threads = thread_pool::instance().size();
  std::map<std::string, std::string> torch;
  std::string command;
  auto peer_arguments = [&](unsigned peer_threads) {
    return "--model " + model + " --batch " + std::to_string(batch) + " --reps " + std::to_string(reps) +
           " --threads " + std::to_string(peer_threads);
  };
  // Each peer at 1 thread and at luminal's count, model by model the faster.
  if (with_torch) {
    torch = bench::run_torch("train_step.py", peer_arguments(threads), command);
    if (threads > 1) torch = bench::faster_of("torch", torch, bench::run_torch("train_step.py", peer_arguments(1), command));
  }
  const bool have_torch = torch.count("torch_version") > 0;
  if (install && !bench::install_jax()) std::fprintf(stderr, "train_step_bench: installing JAX failed\n");
  std::map<std::string, std::string> jax;
  std::string jax_command;
  if (with_jax) {
    jax = bench::run_peer("jax", bench::jax_interpreter(), "train_step_jax.py", peer_arguments(threads), jax_command);
    if (threads > 1)
      jax = bench::faster_of(
          "jax", jax, bench::run_peer("jax", bench::jax_interpreter(), "train_step_jax.py", peer_arguments(1), jax_command));
  }
  const bool have_jax = jax.count("jax_version") > 0;

  std::printf("One training step (forward + backward + Adam update), cross-entropy on i32 labels, batch %d, f32\n",
              batch);
#ifdef OPENBLAS_VERSION
  const std::string blas_threads = std::to_string(openblas_get_num_threads());
#else
  const std::string blas_threads = "its default";
#endif
  std::printf("threads: luminal %u, OpenBLAS %s; each peer at 1 and %u thread(s), the faster shown\n\n", threads,
              blas_threads.c_str(), threads);

  std::vector<summary> summaries;
  try {
    if (run_mlp) {
      bench::gemm_floor floor(mlp_gemms(batch));
      luminal_result lum = time_luminal(mlp_model.loss(), "x", x, labels, reps, rounds, floor, mlp_model);
      gemm_result gemms{lum.gemm_ms, floor.each_ms(reps)};
      summaries.push_back(report("mlp", "MLP 784-512-512-10, ReLU", lum, gemms, torch, jax, reps));
    }
    if (run_cnn) {
      bench::gemm_floor floor(cnn_gemms(batch));
      luminal_result lum = time_luminal(cnn_model.loss(), "x", x, labels, reps, rounds, floor, cnn_model);
      gemm_result gemms{lum.gemm_ms, floor.each_ms(reps)};
      summaries.push_back(report("cnn",
                                 "CNN of examples/fashion_mnist.cpp: conv3x3(1->32) relu maxpool2 conv3x3(32->64) relu "
                                 "maxpool2 fc(3136->128) relu fc(128->10)",
                                 lum, gemms, torch, jax, reps));
    }
#ifdef LUMINAL_BENCH_RESNET
    if (run_resnet) {
      bench::gemm_floor floor(resnet_gemms(batch));
      luminal_result lum =
          time_luminal(resnet_model.loss(), bench::resnet::images, x, labels, reps, rounds, floor, resnet_model);
      gemm_result gemms{lum.gemm_ms, floor.each_ms(reps)};
      summaries.push_back(report("resnet",
                                 "ResNet of examples/fashion_mnist.cpp: conv3x3(1->16) bn relu, BasicBlock(16->32, "
                                 "stride 2), BasicBlock(32->64, stride 2), depthwise conv3x3(64, groups 64) bn relu, "
                                 "global avg pool, fc(64->10); BatchNorm in training mode",
                                 lum, gemms, torch, jax, reps));
    }
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: error: %s\n", e.what());
    return 1;
  }

  std::printf("Goal: a training step faster than the fastest peer (peer / luminal > 1) and within 1.15x (MLP)\n"
              "or 1.5x (CNN) of its GEMMs alone (the ResNet: the peer alone).\n");
  for (const auto& s : summaries) {
    std::printf("  %s: ", s.model.c_str());
    if (s.vs_peer > 0)
      std::printf("fastest peer (%s) / luminal %.2fx (%s), ", s.peer.c_str(), s.vs_peer,
                  s.vs_peer > 1 ? "met" : "not met");
    else
      std::printf("no peer measured, ");
    if (double goal = goal_vs_gemms(s.model); goal > 0)
      std::printf("luminal / GEMMs %.2fx (goal %.2f: %s)\n", s.vs_gemms, goal, s.vs_gemms <= goal ? "met" : "not met");
    else
      std::printf("luminal / GEMMs %.2fx (no goal)\n", s.vs_gemms);
  }
  if (with_torch && !have_torch)
    std::printf("\nPyTorch figures unavailable (%s): %s\nInstall with `apt-get install python3-torch` or "
                "`pip install torch`. Command was:\n  %s\n",
                torch["_status"].c_str(), torch["_output"].c_str(), command.c_str());
  if (with_jax && !have_jax)
    std::printf("\nJAX figures unavailable (%s): %s\nRun with --install-jax (a virtual environment beside this "
                "binary) or set LUMINAL_BENCH_JAX_PYTHON. Command was:\n  %s\n",
                jax["_status"].c_str(), jax["_output"].c_str(), jax_command.c_str());
  return 0;
}
