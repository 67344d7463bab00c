// Training throughput (tokens/s) of the character GPT of examples/char_gpt run on the
// tape: 4 layers, width 256, 4 heads, context 128, AdamW with global-norm clipping, one
// step = forward, backward and update. The same model in PyTorch eager (char_gpt.py) and
// as one JAX `jit` step (char_gpt_jax.py; train_step_bench --install-jax installs JAX)
// runs in the same process tree right after, each at 1 and at luminal's thread count, and
// the step's GEMMs alone in OpenBLAS give the floor. The goals: tokens/s above the fastest
// peer's, and a step within 1.3x of its GEMMs.
//
//     char_gpt_bench [--batch B] [--reps N] [--layers L] [--threads T] [--precision f32|bf16|both]
//                    [--profile] [--no-peers]
//
// --precision: luminal's step with f32 matmuls, with bf16 ones (nn::GPT's autocast: f32
// parameters and optimizer, matmuls in bf16, as torch.autocast), or both (the default; then
// PyTorch runs under torch.autocast(cpu, bf16) as well). The goals for bf16: 1.4x luminal's
// f32 step, and faster than PyTorch's autocast.
//
// --no-peers measures luminal and the GEMMs alone, without PyTorch and JAX. --profile prints, after the timed steps, each kernel's time in the layer block's forward
// and backward programs (summed over the layers of a step) and what they fuse.
//
// benchmarks/cuda/char_gpt_cuda.cu compiles this file with nvcc for luminal::cuda
// (LUMINAL_BENCH_CUDA): the blocks run on the GPU, and PyTorch runs on it too
// (char_gpt.py --device cuda). Without a CUDA device that build says so and exits 0.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/gpt.hpp>
#include <random>
#include <string>

#ifdef LUMINAL_BENCH_CUDA
#include "bench_common.hpp"
#include <luminal/backends/cuda.hpp>
#ifdef LUMINAL_BENCH_CUDA_GRAPHS
using bench_backend = luminal::cuda_graph;  // each block program's run replayed as one graph
#else
using bench_backend = luminal::cuda;
#endif
#else
#include "bench_gemms.hpp"
using bench_backend = luminal::host;
#endif

using namespace luminal;

// The model lives in a function template, not in main: nvcc's host front end (cudafe++)
// spends time exponential in a graph's depth on a program type named in non-template code
// (README, "Compile time under nvcc"), and instantiations reached from a template do not.
constexpr int context = 128;

/// Times luminal's step with its matmuls in Autocast (f32, or bf16 with f32 parameters) and
/// prints it; returns the median milliseconds.
template <class Backend, class Autocast>
double time_luminal(int batch, int reps, int layers, bool profile) {
  nn::GPT<256, 256, 4, 256, Backend, Autocast> gpt(layers);
  // Parameters, gradients, optimizer state and activations stay in the backend's memory:
  // on a GPU a step copies only the tokens in and the loss and gradient norms out.
  parameter_store<Backend> params;
  params.add_all(gpt.initial_parameters(1));
  parameter_optimizer<adamw, f32, Backend> optimizer({.lr = 1e-3f});
  optimizer.max_grad_norm = 1.0;
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> byte(0, 255);
  xt::xarray<int> tokens = xt::xarray<int>::from_shape({std::size_t(batch), std::size_t(context)});
  xt::xarray<int> targets = tokens;
  for (auto& v : tokens) v = byte(rng);
  for (auto& v : targets) v = byte(rng);

  tape<Backend> t(params);
  std::size_t held = 0;
  float last_loss = 0;
  double ms = bench::median_ms(
      [&] {
        t.clear();
        auto loss = gpt.loss(t, tokens, targets);
        t.backward(loss);
        held = t.held_bytes();
        optimizer.step(params, t.device_gradients());
        // The step ends with its loss on the host, as a training loop that prints it does:
        // a GPU queues the update's kernels, and this waits for them.
        last_loss = t.template item<float>(loss);
      },
      reps, 2);
  {
    // Where an unprofiled step's wall time goes. On a GPU, forward() and backward() return
    // once their kernels are queued (the embedding's forward waits for its gather's index
    // check), the optimizer waits for the backward's kernels when it reads the gradients'
    // norms, and the loss read waits for the updates: queuing time that reaches the step's
    // time means the host, not the GPU, sets the pace.
    double phase_ms[4] = {};
    constexpr int phase_reps = 5;
    for (int rep = 0; rep < phase_reps; ++rep) {
      auto at = std::chrono::steady_clock::now();
      auto lap = [&](int phase) {
        auto now = std::chrono::steady_clock::now();
        phase_ms[phase] += std::chrono::duration<double, std::milli>(now - at).count() / phase_reps;
        at = now;
      };
      t.clear();
      auto loss = gpt.loss(t, tokens, targets);
      lap(0);
      t.backward(loss);
      lap(1);
      optimizer.step(params, t.device_gradients());
      lap(2);
      last_loss = t.template item<float>(loss);
      lap(3);
    }
    std::printf("An unprofiled step's phases: forward %.2f ms, backward %.2f ms, optimizer %.2f ms, loss read %.2f ms\n",
                phase_ms[0], phase_ms[1], phase_ms[2], phase_ms[3]);
  }
  if (profile) {  // after the timing: profiling waits after every kernel
    gpt.layer_block().forward().set_profiling(true);
    gpt.layer_block().backward().set_profiling(true);
    gpt.embed_block().forward().set_profiling(true);
    gpt.embed_block().backward().set_profiling(true);
    gpt.head_block().forward().set_profiling(true);
    gpt.head_block().backward().set_profiling(true);
    double forward_ms = 0, backward_ms = 0, update_ms = 0;
    for (int rep = 0; rep < 3; ++rep) {
      auto start = std::chrono::steady_clock::now();
      t.clear();
      auto loss = gpt.loss(t, tokens, targets);
      auto forward_done = std::chrono::steady_clock::now();
      t.backward(loss);
      auto backward_done = std::chrono::steady_clock::now();
      optimizer.step(params, t.device_gradients());
      auto update_done = std::chrono::steady_clock::now();
      forward_ms += std::chrono::duration<double, std::milli>(forward_done - start).count() / 3;
      backward_ms += std::chrono::duration<double, std::milli>(backward_done - forward_done).count() / 3;
      update_ms += std::chrono::duration<double, std::milli>(update_done - backward_done).count() / 3;
    }
    std::printf("A profiled step (every kernel waited for): forward %.1f ms, backward %.1f ms, optimizer %.1f ms\n",
                forward_ms, backward_ms, update_ms);
    std::printf("The embedding block's forward and backward programs:\n%s\n%s\n",
                gpt.embed_block().forward().profile().c_str(), gpt.embed_block().backward().profile().c_str());
    std::printf("The head block's forward and backward programs:\n%s\n%s\n",
                gpt.head_block().forward().profile().c_str(), gpt.head_block().backward().profile().c_str());
    std::printf("The layer block's forward program (%d calls a step):\n%s\n%s\n", layers,
                gpt.layer_block().forward().profile().c_str(), gpt.layer_block().forward().describe().c_str());
    std::printf("The layer block's backward program (%d calls a step):\n%s\n%s\n", layers,
                gpt.layer_block().backward().profile().c_str(), gpt.layer_block().backward().describe().c_str());
  }
  const double tokens_per_step = double(batch) * context;
  std::printf("char GPT on %s: %d layers, width 256, 4 heads, context %d, batch %d (%zu MB kept on the tape)\n",
              Backend::name, layers, context, batch, held >> 20);
  std::printf("luminal  %9.1f ms/step  %9.0f tokens/s  (matmuls in %s; last loss %.4f)\n", ms,
              tokens_per_step / (ms / 1e3), std::is_same_v<Autocast, bf16> ? "bf16, autocast" : "f32", last_loss);
  return ms;
}

template <class Backend>
int run_benchmark(int batch, int reps, int layers, int threads, const std::string& device, bool profile,
                  bool peers, bool with_f32, bool with_bf16) {
  const double tokens_per_step = double(batch) * context;
  double ms = 0, bf16_ms = 0;
  if (with_f32) ms = time_luminal<Backend, f32>(batch, reps, layers, profile);
#ifndef LUMINAL_BENCH_CUDA  // bf16 GEMMs on the GPU are issue 68's
  if (with_bf16) bf16_ms = time_luminal<Backend, bf16>(batch, reps, layers, profile);
  if (with_f32 && with_bf16) std::printf("luminal f32 / luminal bf16 = %.2f (goal >= 1.40: %s)\n", ms / bf16_ms,
                                         ms / bf16_ms >= 1.4 ? "met" : "not met");
#else
  (void)with_bf16;
  (void)bf16_ms;
#endif
  if (!with_f32) ms = bf16_ms;  // the peers' comparisons below read luminal's f32 time

  std::string command;
  auto arguments = [&](int peer_threads) {
    return "--layers " + std::to_string(layers) + " --batch " + std::to_string(batch) + " --context " +
           std::to_string(context) + " --reps " + std::to_string(reps) + " --device " + device +
           (peer_threads > 0 ? " --threads " + std::to_string(peer_threads) : "");
  };
#ifdef LUMINAL_BENCH_CUDA
  std::map<std::string, std::string> torch{{"_status", "--no-peers"}};
  if (peers) torch = bench::run_torch("char_gpt.py", arguments(threads), command);
#else
  // On the CPU, PyTorch at 1 and at luminal's thread count (or at --threads): the faster.
  std::map<std::string, std::string> torch{{"_status", "--no-peers"}};
  if (peers) {
    torch = bench::run_torch("char_gpt.py", arguments(threads > 0 ? threads : int(thread_pool::instance().size())),
                             command);
    if (threads <= 0) {
      auto alone = bench::run_torch("char_gpt.py", arguments(1), command);
      if (alone.count("torch_step_ms") &&
          (!torch.count("torch_step_ms") || std::stod(alone["torch_step_ms"]) < std::stod(torch["torch_step_ms"])))
        torch = alone;
    }
  }
#endif
  if (!torch.count("torch_step_ms")) {
    std::printf("PyTorch: not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
  } else {
    const double torch_ms = std::stod(torch["torch_step_ms"]);
    std::printf("PyTorch  %9.1f ms/step  %9.0f tokens/s  (torch %s eager on %s, %s threads)\n", torch_ms,
                tokens_per_step / (torch_ms / 1e3), torch["torch_version"].c_str(), device.c_str(),
                torch["torch_threads"].c_str());
    std::printf("luminal tokens/s / PyTorch tokens/s = %.2f\n", torch_ms / ms);
  }
#ifndef LUMINAL_BENCH_CUDA
  // PyTorch's mixed precision beside luminal's: torch.autocast(cpu, bf16) at the thread count
  // that was faster in f32 (or luminal's).
  if (peers && with_bf16) {
    const std::string threads_used = torch.count("torch_threads") ? torch["torch_threads"]
                                                                  : std::to_string(thread_pool::instance().size());
    auto autocast = bench::run_torch("char_gpt.py", arguments(std::stoi(threads_used)) + " --autocast bf16", command);
    if (!autocast.count("torch_step_ms")) {
      std::printf("PyTorch autocast: not measured (%s): %s\n", autocast["_status"].c_str(), autocast["_output"].c_str());
    } else {
      const double autocast_ms = std::stod(autocast["torch_step_ms"]);
      std::printf("PyTorch  %9.1f ms/step  %9.0f tokens/s  (torch.autocast cpu bf16, %s threads)\n", autocast_ms,
                  tokens_per_step / (autocast_ms / 1e3), autocast["torch_threads"].c_str());
      std::printf("luminal bf16 tokens/s / PyTorch autocast tokens/s = %.2f (goal > 1: %s)\n", autocast_ms / bf16_ms,
                  autocast_ms > bf16_ms ? "met" : "not met");
    }
  }
  // JAX at 1 and at luminal's thread count, the faster (the CPU only).
  std::map<std::string, std::string> jax{{"_status", "--no-peers"}};
  for (int peer_threads : {1, int(thread_pool::instance().size())}) {
    if (!peers) break;
    std::string jax_command;
    auto run = bench::run_peer("jax", bench::jax_interpreter(), "char_gpt_jax.py",
                               "--layers " + std::to_string(layers) + " --batch " + std::to_string(batch) +
                                   " --context " + std::to_string(context) + " --reps " + std::to_string(reps) +
                                   " --threads " + std::to_string(peer_threads),
                               jax_command);
    jax = bench::faster_of("jax", jax, run);
    if (!run.count("jax_gpt_step_ms")) break;
  }
  double fastest_peer_ms = torch.count("torch_step_ms") ? std::stod(torch["torch_step_ms"]) : 0;
  if (!jax.count("jax_gpt_step_ms")) {
    std::printf("JAX: not measured (%s): %s\n", jax["_status"].c_str(), jax["_output"].c_str());
  } else {
    const double jax_ms = std::stod(jax["jax_gpt_step_ms"]);
    std::printf("JAX      %9.1f ms/step  %9.0f tokens/s  (jax %s jit on cpu, %s threads)\n", jax_ms,
                tokens_per_step / (jax_ms / 1e3), jax["jax_version"].c_str(), jax["jax_gpt_threads"].c_str());
    std::printf("luminal tokens/s / JAX tokens/s = %.2f\n", jax_ms / ms);
    if (fastest_peer_ms == 0 || jax_ms < fastest_peer_ms) fastest_peer_ms = jax_ms;
  }
  // The step's GEMMs: per layer q, k, v, proj, the MLP's two, and attention's batched
  // products (scores, weighted values, and their four backward products); then the head.
  const int rows = batch * context, width = 256, heads = 4, head_width = width / heads;
  std::vector<bench::gemm_shape> list;
  for (int layer = 0; layer < layers; ++layer) {
    const std::string name = "h." + std::to_string(layer);
    for (const char* part : {".q", ".k", ".v", ".proj"}) bench::add_linear(list, name + part, rows, width, width, true);
    bench::add_linear(list, name + ".fc", rows, width, 4 * width, true);
    bench::add_linear(list, name + ".out", rows, 4 * width, width, true);
    const int b = batch * heads, t = context, dh = head_width;
    list.push_back({false, true, t, t, dh, name + " scores q k^T", b});
    list.push_back({false, false, t, dh, t, name + " p v", b});
    list.push_back({false, true, t, t, dh, name + " grad p = g v^T", b});
    list.push_back({true, false, t, dh, t, name + " grad v = p^T g", b});
    list.push_back({false, false, t, dh, t, name + " grad q = s k", b});
    list.push_back({true, false, t, dh, t, name + " grad k = s^T q", b});
  }
  bench::add_linear(list, "lm_head", rows, width, 256, true);
  bench::gemm_result floor = bench::time_gemms(list, reps);
  std::printf("GEMMs    %9.1f ms/step  (the step's %zu GEMMs alone in OpenBLAS, %.1f GFLOP)\n", floor.total_ms,
              list.size(), bench::gemm_flops(list) / 1e9);
  std::printf("luminal / GEMMs = %.2f (goal <= 1.30: %s)\n", ms / floor.total_ms,
              ms / floor.total_ms <= 1.3 ? "met" : "not met");
  if (fastest_peer_ms > 0)
    std::printf("fastest peer / luminal = %.2f (goal > 1: %s)\n", fastest_peer_ms / ms,
                fastest_peer_ms > ms ? "met" : "not met");
#endif
  return 0;
}

int main(int argc, char** argv) {
  int batch = 8, reps = 10, layers = 4, threads = 0;
  bool profile = false, peers = true, with_f32 = true, with_bf16 = true;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--profile" || a == "--no-peers") {
      (a == "--profile" ? profile : peers) = a == "--profile";
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "char_gpt_bench: " << a << " needs a value\n";
      return 2;
    }
    if (a == "--precision") {
      const std::string p = argv[i + 1];
      if (p != "f32" && p != "bf16" && p != "both") {
        std::cerr << "char_gpt_bench: --precision is f32, bf16 or both, not '" << p << "'\n";
        return 2;
      }
      with_f32 = p != "bf16";
      with_bf16 = p != "f32";
      continue;
    }
    int v = std::atoi(argv[i + 1]);
    if (a == "--batch") batch = v;
    else if (a == "--reps") reps = v;
    else if (a == "--layers") layers = v;
    else if (a == "--threads") threads = v;
    else {
      std::cerr << "usage: char_gpt_bench [--batch B] [--reps N] [--layers L] [--threads T] [--precision f32|bf16|both]\n"
                   "                      [--profile] [--no-peers]\n";
      return 2;
    }
  }
  if (batch < 1 || reps < 1 || layers < 1) {
    std::cerr << "char_gpt_bench: --batch, --reps and --layers must be positive\n";
    return 2;
  }
  if (threads > 0) setenv("LUMINAL_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::string device = "cpu";
#ifdef LUMINAL_BENCH_CUDA
  if (cuda::device_count() == 0) {
    std::printf("char_gpt_cuda: no CUDA device (cudaGetDeviceCount found none): nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("GPU: %s\n", prop.name);
  device = "cuda";
#endif

  return run_benchmark<bench_backend>(batch, reps, layers, threads, device, profile, peers, with_f32, with_bf16);
}
