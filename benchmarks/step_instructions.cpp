// Instruction counts of one CNN or MLP training step (the models of train_step.cpp, from
// bench_models.hpp, batch 128), of one GPT layer block forward and backward
// (nn::TransformerBlock, width 256, 4 heads, batch 8, context 128) and of one step of
// char_lstm_bench's model (a 2-layer LSTM of 128 under an embedding and over a head,
// batch 32, context 64, AdamW), for valgrind's callgrind: a stable figure where timings
// on a shared machine are noisy. Only the
// measured step is instrumented. It is not in the default build:
//
//     cmake --build build --target step_instructions && cd build/benchmarks
//     LUMINAL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell \
//       valgrind --tool=callgrind --instr-atstart=no ./step_instructions cnn   # or mlp, gpt, lstm
//     callgrind_annotate callgrind.out.<pid> | head      # "PROGRAM TOTALS" is the count
//
// valgrind 3.19 cannot decode AVX-512, so this binary is built without it and OpenBLAS
// is held to its AVX2 kernels (OPENBLAS_CORETYPE). Without valgrind it runs the same steps
// and prints their wall time.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/attention.hpp>
#include <luminal/train/train.hpp>
#include <random>

#include "bench_models.hpp"
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

using namespace luminal;

namespace {
using bench::Batch;
constexpr Dim Seq{"Seq"};

template <class F>
void measured(const char* what, F&& step) {
  step();  // plans buffers, warms caches: not counted
  auto t0 = std::chrono::steady_clock::now();
  CALLGRIND_START_INSTRUMENTATION;
  step();
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("%s: %.2f ms\n", what, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

xt::xarray<float> normal_array(std::vector<std::size_t> shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
  for (auto& v : a) v = normal(rng);
  return a;
}

/// One training step of a model of bench_models.hpp (Adam, batch 128).
template <class Model>
int model_step(const char* what) {
  Model model;
  auto step = compile_train_step(model.loss(), adam{.lr = 1e-3f});
  tensor_store initial;
  model.initialize(initial, 1);
  step.store().assign(initial);
  xt::xarray<std::int32_t> labels = xt::xarray<std::int32_t>::from_shape({128});
  for (std::size_t i = 0; i < 128; ++i) labels(i) = std::int32_t(i % 10);
  step.bind("x", normal_array({128, 784}, 1));
  step.bind("labels", labels);
  measured(what, [&] { step.run(); });
  return 0;
}

int gpt_block() {
  nn::TransformerBlock<"h.0", 256, 4> block;
  auto x = input<"x", f32>(shape<Batch, Seq, 256>);
  auto r = input<"r", f32>(shape<Batch, Seq, 256>);  // a random cotangent: loss = sum(block(x) * r)
  auto loss = sum(block(x) * r);
  auto program = std::apply([&](auto... p) { return compile(loss, grad(loss, x), grad(loss, p)...); },
                            decltype(block)::parameters);
  tensor_store initial;
  block.initialize(initial, 1);
  for (const std::string& name : initial.names()) program.bind(name, initial.get<float>(name));
  program.bind("x", normal_array({8, 128, 256}, 2));
  program.bind("r", normal_array({8, 128, 256}, 3));
  measured("GPT layer block forward + backward, batch 8, context 128", [&] { program.run(); });
  return 0;
}
int lstm_step() {
  constexpr nn::Embedding<"embed", 256, 64> embed;
  constexpr nn::LSTM<"lstm", 64, 128, 2> lstm;
  constexpr nn::Linear<"head", 128, 256> head;
  auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
  auto targets = input<"targets", i32>(shape<Batch, Seq>);
  auto step = compile_train_step(nn::cross_entropy(head(lstm(embed(tokens))), targets), adamw{.lr = 1e-3f});
  tensor_store initial;
  embed.initialize(initial, 1);
  lstm.initialize(initial, 1);
  head.initialize(initial, 1);
  step.store().assign(initial);
  xt::xarray<std::int32_t> x = xt::xarray<std::int32_t>::from_shape({32, 64});
  xt::xarray<std::int32_t> y = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.flat(i) = std::int32_t((i * 37) % 256);
    y.flat(i) = std::int32_t((i * 101 + 7) % 256);
  }
  step.bind("tokens", x);
  step.bind("targets", y);
  measured("char LSTM training step, batch 32, context 64", [&] { step.run(); });
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "cnn") == 0) return model_step<bench::cnn>("CNN training step, batch 128");
  if (argc == 2 && std::strcmp(argv[1], "mlp") == 0) return model_step<bench::mlp>("MLP training step, batch 128");
  if (argc == 2 && std::strcmp(argv[1], "gpt") == 0) return gpt_block();
  if (argc == 2 && std::strcmp(argv[1], "lstm") == 0) return lstm_step();
  std::fprintf(stderr, "usage: %s cnn|mlp|gpt|lstm\n", argv[0]);
  return 2;
}
