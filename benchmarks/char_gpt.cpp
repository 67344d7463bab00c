// Training throughput (tokens/s) of the character GPT of examples/char_gpt run on the
// tape: 4 layers, width 256, 4 heads, context 128, AdamW with global-norm clipping, one
// step = forward, backward and update. The same model in PyTorch eager (char_gpt.py) runs
// in the same process tree right after, and the ratio is printed.
//
//     char_gpt_bench [--batch B] [--reps N] [--layers L] [--threads T]
//
// benchmarks/cuda/char_gpt_cuda.cu compiles this file with nvcc for luminal::cuda
// (LUMINAL_BENCH_CUDA): the blocks run on the GPU, and PyTorch runs on it too
// (char_gpt.py --device cuda). Without a CUDA device that build says so and exits 0.
#include <cstdio>
#include <iostream>
#include <luminal/grad/parameter_optimizer.hpp>
#include <luminal/nn/gpt.hpp>
#include <random>
#include <string>

#include "bench_common.hpp"

#ifdef LUMINAL_BENCH_CUDA
#include <luminal/backends/cuda.hpp>
using bench_backend = luminal::cuda;
#else
using bench_backend = luminal::host;
#endif

using namespace luminal;

// The model lives in a function template, not in main: nvcc's host front end (cudafe++)
// spends time exponential in a graph's depth on a program type named in non-template code
// (README, "Compile time under nvcc"), and instantiations reached from a template do not.
template <class Backend>
int run_benchmark(int batch, int reps, int layers, int threads, const std::string& device) {
  constexpr int context = 128;
  nn::GPT<256, 256, 4, 256, Backend> gpt(layers);
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
  double ms = bench::median_ms(
      [&] {
        t.clear();
        auto loss = gpt.loss(t, tokens, targets);
        t.backward(loss);
        held = t.held_bytes();
        optimizer.step(params, t.device_gradients());
      },
      reps, 2);
  const double tokens_per_step = double(batch) * context;
  std::printf("char GPT on %s: %d layers, width 256, 4 heads, context %d, batch %d (%zu MB kept on the tape)\n",
              Backend::name, layers, context, batch, held >> 20);
  std::printf("luminal  %9.1f ms/step  %9.0f tokens/s\n", ms, tokens_per_step / (ms / 1e3));

  std::string command;
  auto torch = bench::run_torch("char_gpt.py",
                                "--layers " + std::to_string(layers) + " --batch " + std::to_string(batch) +
                                    " --context " + std::to_string(context) + " --reps " + std::to_string(reps) +
                                    " --device " + device +
                                    (threads > 0 ? " --threads " + std::to_string(threads) : ""),
                                command);
  if (!torch.count("torch_step_ms")) {
    std::printf("PyTorch: not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
    return 0;
  }
  const double torch_ms = std::stod(torch["torch_step_ms"]);
  std::printf("PyTorch  %9.1f ms/step  %9.0f tokens/s  (torch %s eager on %s, %s threads)\n", torch_ms,
              tokens_per_step / (torch_ms / 1e3), torch["torch_version"].c_str(), device.c_str(),
              torch["torch_threads"].c_str());
  std::printf("luminal tokens/s / PyTorch tokens/s = %.2f\n", torch_ms / ms);
  return 0;
}

int main(int argc, char** argv) {
  int batch = 8, reps = 10, layers = 4, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--batch") batch = v;
    else if (a == "--reps") reps = v;
    else if (a == "--layers") layers = v;
    else if (a == "--threads") threads = v;
    else {
      std::cerr << "usage: char_gpt_bench [--batch B] [--reps N] [--layers L] [--threads T]\n";
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

  return run_benchmark<bench_backend>(batch, reps, layers, threads, device);
}
