// One training step of a 784-512-512-10 ReLU MLP (cross-entropy, Adam, f32) on the GPU,
// at batch 128 and 1024:
//
//   (a) luminal::cuda        compile_train_step<cuda>: kernels and cuBLAS calls one by one
//   (b) luminal::cuda_graph  the same step captured into a CUDA Graph: one launch per step
//   (c) cuBLAS alone         the step's GEMMs (3 forward, 3 weight gradients, 2 input
//                            gradients) at the shapes luminal passes, back to back
//   (d) PyTorch eager CUDA   benchmarks/cuda/train_step_cuda.py, when torch has a GPU
//   (e) torch.compile        the same script's step with the loss and the optimizer's
//                            update through torch.compile (compiled in the warm-up)
//
// Every time is the median wall time of a step that ends with its result on the host
// (luminal reads the loss; the others synchronize). Without a CUDA device the program
// says so and exits 0.
//
//     train_step_cuda [--reps R] [--no-torch] [--no-compile]
#include <cublas_v2.h>

#include <cstdio>
#include <cstring>
#include <luminal/backends/cuda.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>
#include <random>
#include <string>
#include <vector>

#include "../bench_common.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
nn::Linear<"fc1", 784, 512> fc1;
nn::Linear<"fc2", 512, 512> fc2;
nn::Linear<"fc3", 512, 10> fc3;

auto mlp_loss() {
  auto x = input<"x", f32>(shape<Batch, 784>);
  return nn::cross_entropy(fc3(relu(fc2(relu(fc1(x))))), input<"labels", i32>(shape<Batch>));
}

template <class B>
double time_step(int batch, int reps, float& first_loss) {
  auto step = compile_train_step<B>(mlp_loss(), adam{.lr = 1e-3f});
  tensor_store init;
  fc1.initialize(init, 1);
  fc2.initialize(init, 1);
  fc3.initialize(init, 1);
  step.store().assign(init);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(std::size_t(batch) * 784);
  std::vector<std::int32_t> labels(batch);
  for (auto& v : x) v = pixel(rng);
  for (auto& v : labels) v = std::int32_t(rng() % 10);
  step.bind("x", x.data(), std::vector<index_t>{batch, 784});
  step.bind("labels", labels.data(), std::vector<index_t>{batch});
  first_loss = step.run();
  return bench::median_ms([&] { step.run(); }, reps);
}

double time_gemms(int batch, int reps) {
  struct shape { bool ta, tb; int m, n, k; };
  std::vector<shape> shapes;
  const int dims[] = {784, 512, 512, 10};
  for (int l = 0; l < 3; ++l) {
    int in = dims[l], out = dims[l + 1];
    shapes.push_back({false, true, batch, out, in});   // forward x W^T
    shapes.push_back({true, false, in, out, batch});   // weight gradient x^T g
    if (l > 0) shapes.push_back({false, false, batch, in, out});  // input gradient g W
  }
  cuda gpu;
  std::vector<void*> buffers;
  auto device_array = [&](std::size_t count) {
    void* p = gpu.allocate(count * sizeof(float));
    std::vector<float> zeros(count, 0.01f);
    gpu.to_device(p, zeros.data(), count * sizeof(float));
    buffers.push_back(p);
    return static_cast<float*>(p);
  };
  struct call { shape s; float *a, *b, *c; };
  std::vector<call> calls;
  for (const auto& s : shapes) {
    // Row-major operands as stored: A is m x k (k x m when transposed), B k x n (n x k).
    calls.push_back({s, device_array(std::size_t(s.m) * s.k), device_array(std::size_t(s.k) * s.n),
                     device_array(std::size_t(s.m) * s.n)});
  }
  auto run = [&] {
    for (const auto& c : calls)
      gpu.gemm(c.s.ta, c.s.tb, c.s.m, c.s.n, c.s.k, c.a, c.s.ta ? c.s.m : c.s.k, c.b, c.s.tb ? c.s.k : c.s.n, c.c,
               c.s.n);
    gpu.synchronize();
  };
  double ms = bench::median_ms(run, reps);
  for (void* p : buffers) gpu.deallocate(p);
  return ms;
}
}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  bool torch = true, torch_compile = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-torch")) torch = false;
    else if (!std::strcmp(argv[i], "--no-compile")) torch_compile = false;
    else {
      std::printf("usage: %s [--reps R] [--no-torch] [--no-compile]\n", argv[0]);
      return 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::printf("train_step_cuda: no CUDA device (cudaGetDeviceCount found none): nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("MLP 784-512-512-10 training step (cross-entropy, Adam, f32) on %s, median of %d steps\n", prop.name,
              reps);
  for (int batch : {128, 1024}) {
    float loss_plain = 0, loss_graph = 0;
    double plain = time_step<cuda>(batch, reps, loss_plain);
    double graph = time_step<cuda_graph>(batch, reps, loss_graph);
    double gemms = time_gemms(batch, reps);
    std::printf("\nbatch %d\n", batch);
    std::printf("  %-44s %9.3f ms  (first loss %.5f)\n", "luminal cuda (kernels + cuBLAS)", plain, loss_plain);
    std::printf("  %-44s %9.3f ms  (first loss %.5f)\n", "luminal cuda_graph (a graph per program)", graph, loss_graph);
    std::printf("  %-44s %9.3f ms  -> cuda_graph / GEMMs = %.2fx\n", "cuBLAS: the step's 8 GEMMs alone", gemms,
                graph / gemms);
    if (torch) {
      std::string command;
      auto result = bench::run_torch("train_step_cuda.py", "--batch " + std::to_string(batch) + " --reps " +
                                                               std::to_string(reps) +
                                                               (torch_compile ? " --compile" : ""),
                                    command);
      if (result.count("torch_mlp_step_ms")) {
        double t = std::stod(result["torch_mlp_step_ms"]);
        std::printf("  %-44s %9.3f ms  -> torch / cuda_graph = %.2fx, torch / cuda = %.2fx\n",
                    ("PyTorch " + result["torch_version"] + " eager CUDA").c_str(), t, t / graph, t / plain);
        if (result.count("torch_compile_mlp_step_ms")) {
          double c = std::stod(result["torch_compile_mlp_step_ms"]);
          std::printf("  %-44s %9.3f ms  -> torch.compile / cuda_graph = %.2fx\n",
                      ("PyTorch " + result["torch_version"] + " torch.compile").c_str(), c, c / graph);
        } else if (result.count("torch_compile_unavailable")) {
          std::printf("  torch.compile: not measured: %s\n", result["torch_compile_unavailable"].c_str());
        }
      } else {
        std::printf("  PyTorch: not measured (%s): %s\n", result["_status"].c_str(), result["_output"].c_str());
      }
    }
  }
  return 0;
}
