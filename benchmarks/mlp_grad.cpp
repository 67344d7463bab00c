// value_and_grad of an MLP loss against its forward alone and against PyTorch.
//
//   model: 784-512-512-10, ReLU, softmax cross-entropy on one-hot labels, batch 128
//   (a) forward:         compile(loss)                      -> the loss only
//   (b) value_and_grad:  compile(loss, dW1, db1, ..., db3)  -> loss and all 6 gradients
//   (c) PyTorch eager forward, and forward + backward (benchmarks/mlp_grad.py)
//   (d) the GEMMs alone in OpenBLAS: 3 forward, 3 weight-gradient and 2 input-gradient
//       products at the model's shapes, the floor for any implementation on this BLAS
//
// The FLOP ratio of (b) to (a) is about 3 (each forward GEMM has two backward GEMMs,
// except the first layer's input gradient, which is not needed).
//
//     mlp_grad [--batch B] [--reps R] [--no-torch]
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <random>

#include "bench_common.hpp"

using namespace luminal;

constexpr Dim Batch{"Batch"};

int main(int argc, char** argv) {
  int batch = 128, reps = 30;
  bool with_torch = true;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--batch" && a + 1 < argc) batch = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--reps" && a + 1 < argc) reps = std::max(1, std::atoi(argv[++a]));
    else if (arg == "--no-torch") with_torch = false;
    else {
      std::cerr << "usage: " << argv[0] << " [--batch B] [--reps R] [--no-torch]\n";
      return 2;
    }
  }

  auto x = input<"x", f32>(shape<Batch, 784>);
  auto labels = input<"onehot", f32>(shape<Batch, 10>);
  auto w1 = param<"w1", f32>(shape<784, 512>);
  auto b1 = param<"b1", f32>(shape<512>);
  auto w2 = param<"w2", f32>(shape<512, 512>);
  auto b2 = param<"b2", f32>(shape<512>);
  auto w3 = param<"w3", f32>(shape<512, 10>);
  auto b3 = param<"b3", f32>(shape<10>);
  auto h1 = relu(matmul(x, w1) + b1);
  auto h2 = relu(matmul(h1, w2) + b2);
  auto logits = matmul(h2, w3) + b3;
  auto loss = neg(mean(sum<1>(labels * log_softmax<1>(logits))));
  auto [g_loss, dw1, db1, dw2, db2, dw3, db3] = value_and_grad(loss, w1, b1, w2, b2, w3, b3);

  auto forward = compile(loss);
  auto training = compile(g_loss, dw1, db1, dw2, db2, dw3, db3);

  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<std::size_t> shape, float scale) {
    xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
    for (auto& v : a) v = normal(rng) * scale;
    return a;
  };
  std::size_t b = std::size_t(batch);
  xt::xarray<float> xs = random({b, 784}, 1.0f);
  xt::xarray<float> onehot = xt::zeros<float>({b, std::size_t(10)});
  for (std::size_t i = 0; i < b; ++i) onehot(i, i % 10) = 1.0f;
  std::map<std::string, xt::xarray<float>> params{
      {"w1", random({784, 512}, 0.05f)}, {"b1", random({512}, 0.01f)}, {"w2", random({512, 512}, 0.05f)},
      {"b2", random({512}, 0.01f)},      {"w3", random({512, 10}, 0.05f)}, {"b3", random({10}, 0.01f)}};
  forward.bind("x", xs);
  forward.bind("onehot", onehot);
  training.bind("x", xs);
  training.bind("onehot", onehot);
  for (auto& [name, value] : params) {
    forward.bind(name, value);
    training.bind(name, value);
  }
  forward.run();
  training.run();
  float loss_forward = forward.output<0>()(), loss_training = training.output<0>()();
  if (!(std::fabs(loss_forward - loss_training) <= 1e-5f * (1 + std::fabs(loss_forward)))) {
    std::fprintf(stderr, "MISMATCH: forward loss %g, value_and_grad loss %g\n", loss_forward, loss_training);
    return 1;
  }

  // The GEMM floor: the same products through OpenBLAS directly.
  std::vector<float> a(b * 784), w(784 * 512), c(b * 512), d(784 * 512);
  auto gemm = [](bool ta, bool tb, int m, int n, int k, const float* A, const float* B, float* C) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, A,
                ta ? m : k, B, tb ? k : n, 0.0f, C, n);
  };
  int B = batch;
  auto forward_gemms = [&] {
    gemm(false, false, B, 512, 784, a.data(), w.data(), c.data());
    gemm(false, false, B, 512, 512, a.data(), w.data(), c.data());
    gemm(false, false, B, 10, 512, a.data(), w.data(), c.data());
  };
  auto all_gemms = [&] {
    forward_gemms();
    gemm(true, false, 784, 512, B, a.data(), c.data(), d.data());  // dW1 = x^T g1
    gemm(true, false, 512, 512, B, a.data(), c.data(), d.data());  // dW2
    gemm(true, false, 512, 10, B, a.data(), c.data(), d.data());   // dW3
    gemm(false, true, B, 512, 10, c.data(), w.data(), a.data());   // dh2 = g3 W3^T
    gemm(false, true, B, 512, 512, c.data(), w.data(), a.data());  // dh1 = g2 W2^T
  };

  double forward_ms = bench::median_ms([&] { forward.run(); }, reps);
  double training_ms = bench::median_ms([&] { training.run(); }, reps);
  double gemm_forward_ms = bench::median_ms(forward_gemms, reps);
  double gemm_all_ms = bench::median_ms(all_gemms, reps);

  std::map<std::string, std::string> torch;
  std::string command;
  unsigned threads = thread_pool::instance().size();
  if (with_torch)
    torch = bench::run_torch("mlp_grad.py",
                             "--batch " + std::to_string(batch) + " --reps " + std::to_string(reps) + " --threads " +
                                 std::to_string(threads),
                             command);
  bool have_torch = torch.count("torch_fwdbwd_ms") > 0;

  std::printf("MLP 784-512-512-10, ReLU, softmax cross-entropy, batch %d, f32, median of %d runs\n", batch, reps);
  std::printf("  luminal kernels: forward %d, value_and_grad %d; threads %u\n\n", decltype(forward)::kernel_count(),
              decltype(training)::kernel_count(), threads);
  std::printf("  %-44s %10s\n", "variant", "ms");
  std::printf("  %-44s %10.3f\n", "luminal forward", forward_ms);
  std::printf("  %-44s %10.3f\n", "luminal value_and_grad", training_ms);
  std::printf("  %-44s %10.3f\n", "OpenBLAS forward GEMMs alone", gemm_forward_ms);
  std::printf("  %-44s %10.3f\n", "OpenBLAS forward + backward GEMMs alone", gemm_all_ms);
  if (have_torch) {
    std::string version = "torch " + torch["torch_version"];
    std::printf("  %-44s %10.3f\n", (version + " forward").c_str(), std::stod(torch["torch_fwd_ms"]));
    std::printf("  %-44s %10.3f\n", (version + " forward + backward").c_str(), std::stod(torch["torch_fwdbwd_ms"]));
    if (torch.count("torch_linear_fwdbwd_ms")) {
      std::printf("  %-44s %10.3f\n", (version + " nn.Linear forward").c_str(),
                  std::stod(torch["torch_linear_fwd_ms"]));
      std::printf("  %-44s %10.3f\n", (version + " nn.Linear forward + backward").c_str(),
                  std::stod(torch["torch_linear_fwdbwd_ms"]));
      std::printf("  (torch rows without nn.Linear keep weights as [in, out] and use x @ W + b; the faster\n"
                  "   of the two torch variants is compared below)\n");
    }
  }
  std::printf("\n  value_and_grad / forward (FLOP ratio ~3): %.2fx\n", training_ms / forward_ms);
  std::printf("  value_and_grad / its GEMMs alone:         %.2fx\n", training_ms / gemm_all_ms);
  if (have_torch) {
    double torch_ms = std::stod(torch["torch_fwdbwd_ms"]);
    if (torch.count("torch_linear_fwdbwd_ms")) torch_ms = std::min(torch_ms, std::stod(torch["torch_linear_fwdbwd_ms"]));
    std::printf("  torch forward+backward / luminal value_and_grad: %.2fx (>1: luminal faster)\n",
                torch_ms / training_ms);
  } else if (with_torch) {
    std::printf("\n  PyTorch figures unavailable (%s): %s\n  Install with `apt-get install python3-torch` or "
                "`pip install torch`. Command was:\n    %s\n",
                torch["_status"].c_str(), torch["_output"].c_str(), command.c_str());
  }
  return 0;
}
