// Rematerialization under a memory budget: the MLP and the CNN training steps of
// train_step_bench (bench_models.hpp; Adam, batch 128) and a two-layer character GPT
// (below), compiled with retention_policy::store_all and with retention_policy::budget at
// about a half and a quarter of what store_all keeps (the GPT at a quarter). For each: the
// bytes of forward buffers kept for the backward (retained), the program's whole arena (the
// peak, which falls with the budget: plan.hpp's backward order and the recompute entries
// placed where the backward reaches each value), the FLOPs the backward spends
// recomputing, the step time, and whether the losses of the steps are those of store_all
// (they must be: a recomputation runs the forward's kernel again).
//
//     retention_budget_bench [--model mlp|cnn|both|gpt|all] [--reps R] [--batch B]   # both: mlp and cnn
//
// Not in the default build (the GPT's steps are heavy to compile; see the macros below):
//     cmake --build build --target retention_budget_bench && build/benchmarks/retention_budget_bench
//
// The budgets are compile-time constants, chosen around what store_all keeps at batch 128
// (0.53 MB for the MLP, 58 MB for the CNN, 51 MB for the GPT's 16 x 64 tokens). The steps
// are compiled first and then timed in turns (five rounds), so that the machine's drift
// reaches them alike.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <luminal/train/train.hpp>
#include <luminal/backends/host.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_models.hpp"

// Each group of steps can be left out of a build (the GPT's two steps take most of it):
// -DRETENTION_BUDGET_GPT=0, -DRETENTION_BUDGET_IMAGES=0 (the MLP and the CNN).
#ifndef RETENTION_BUDGET_GPT
#define RETENTION_BUDGET_GPT 1
#endif
#ifndef RETENTION_BUDGET_IMAGES
#define RETENTION_BUDGET_IMAGES 1
#endif

using namespace luminal;

namespace {

/// A two-layer character GPT as one compiled step (the char GPT of examples/char_gpt at
/// width 128 and two layers, every layer in the one program): inputs "tokens" and
/// "targets" [Batch, Seq] (i32), nn::cross_entropy of the next token.
struct gpt {
  static constexpr Dim seq{"Seq"};
  static constexpr std::int64_t vocab = 256, width = 128, heads = 4, context = 64;
  nn::Embedding<"wte", vocab, width> wte;
  nn::PositionEmbedding<"wpe", context, width> wpe;
  nn::TransformerBlock<"h0", width, heads> h0;
  nn::TransformerBlock<"h1", width, heads> h1;
  nn::LayerNorm<"ln_f", width> ln_f;
  nn::Linear<"lm_head", width, vocab> lm_head;

  auto loss() const {
    auto tokens = input<"tokens", i32>(shape<bench::Batch, seq>);
    auto features = ln_f(h1(h0(wpe(wte(tokens)))));
    return nn::cross_entropy(lm_head(features), input<"targets", i32>(shape<bench::Batch, seq>));
  }
  void initialize(tensor_store& store, std::uint64_t seed) const {
    wte.initialize(store, seed), wpe.initialize(store, seed), h0.initialize(store, seed), h1.initialize(store, seed);
    ln_f.initialize(store, seed), lm_head.initialize(store, seed);
  }
};

struct row {
  std::string policy;
  std::size_t retained = 0, arena = 0;
  double recomputed_gflop = 0, step_ms = 0;
  int kernels = 0;
  std::vector<float> losses;     // of the first steps, compared with store_all's
  std::function<void()> step;    // one more training step
  std::vector<double> round_ms;  // the step's median time in each round
};

/// The step of `model` under Policy, its inputs bound by `bind(step)`, after five steps.
template <retention_policy Policy, class Model, class Bind>
row prepare(const std::string& name, const Model& model, const Bind& bind) {
  using step_type = decltype(compile_train_step<host, Policy>(model.loss(), adam{.lr = 1e-3f}));
  std::shared_ptr<step_type> step(new step_type(compile_train_step<host, Policy>(model.loss(), adam{.lr = 1e-3f})));
  tensor_store initial;
  model.initialize(initial, 1);
  step->store().assign(initial);
  bind(*step);
  row r{name};
  for (int k = 0; k < 5; ++k) r.losses.push_back(step->run());
  const auto& prog = step->gradient_program();
  r.retained = prog.retained_bytes();
  r.arena = prog.arena_bytes();
  r.recomputed_gflop = prog.recomputed_flops() / 1e9;
  r.kernels = prog.kernel_count();
  r.step = [step] { step->run(); };
  return r;
}

void print(const char* title, const std::vector<row>& rows) {
  std::printf("%s\n", title);
  std::printf("  %-22s %12s %10s %14s %10s %9s %8s  %s\n", "policy", "retained MB", "arena MB", "recomputed GF",
              "step ms", "vs store", "kernels", "losses = store_all's");
  const row& base = rows.front();
  for (const row& r : rows)
    std::printf("  %-22s %12.3f %10.2f %14.3f %10.2f %8.2fx %8d  %s\n", r.policy.c_str(), r.retained / 1e6,
                r.arena / 1e6, r.recomputed_gflop, r.step_ms, r.step_ms / base.step_ms, r.kernels,
                r.losses == base.losses ? "yes" : "NO");
  std::printf("\n");
}

/// store_all, then each budget in turn, one table. The steps are timed in turns, `rounds`
/// rounds of reps / rounds steps each, so that the machine's drift reaches them alike.
template <std::size_t... Budgets, class Model, class Bind>
void compare(const char* title, const Model& model, const Bind& bind, int reps) {
  auto name = [](std::size_t bytes) {
    char text[48];
    std::snprintf(text, sizeof text, "budget %.2f MB", double(bytes) / 1e6);
    return std::string(text);
  };
  std::vector<row> rows;
  rows.push_back(prepare<retention_policy::store_all>("store_all", model, bind));
  (rows.push_back(prepare<retention_policy::budget{Budgets}>(name(Budgets), model, bind)), ...);
  const int rounds = 5;
  for (int round = 0; round < rounds; ++round)
    for (row& r : rows) r.round_ms.push_back(bench::median_ms(r.step, std::max(1, reps / rounds), 1));
  for (row& r : rows) {
    std::sort(r.round_ms.begin(), r.round_ms.end());
    r.step_ms = r.round_ms[r.round_ms.size() / 2];
  }
  print(title, rows);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "all";
  int reps = 40, batch = 128;
  for (int i = 1; i < argc; ++i) {
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(argv[i]) + " needs a value");
      return std::string(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--model")) model = value();
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(value());
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoi(value());
    else {
      std::fprintf(stderr, "usage: retention_budget_bench [--model mlp|cnn|both|gpt|all] [--reps R] [--batch B]\n");
      return 2;
    }
  }
  if (model != "mlp" && model != "cnn" && model != "gpt" && model != "both" && model != "all") {
    std::fprintf(stderr, "retention_budget_bench: --model must be mlp, cnn, both (mlp and cnn), gpt or all, not '%s'\n",
                 model.c_str());
    return 2;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, 9), character(0, int(gpt::vocab) - 1);
  xt::xarray<float> x = xt::xarray<float>::from_shape({std::size_t(batch), 784});
  xt::xarray<std::int32_t> labels = xt::xarray<std::int32_t>::from_shape({std::size_t(batch)});
  for (auto& v : x) v = pixel(rng);
  for (auto& v : labels) v = label(rng);
  // The GPT reads batch / 8 sequences of its whole context: 1,024 tokens at batch 128.
  const std::size_t sequences = std::size_t(std::max(1, batch / 8)), context = std::size_t(gpt::context);
  xt::xarray<std::int32_t> tokens = xt::xarray<std::int32_t>::from_shape({sequences, context}), targets = tokens;
  for (auto& v : tokens) v = character(rng);
  for (auto& v : targets) v = character(rng);
  auto images = [&](auto& step) { step.bind("x", x), step.bind("labels", labels); };
  auto text = [&](auto& step) { step.bind("tokens", tokens), step.bind("targets", targets); };
  std::printf("retention_policy::budget, batch %d, %d thread(s); step ms: the median over 5 rounds of each round's "
              "median of %d steps\n\n", batch, int(thread_pool::instance().size()), std::max(1, reps / 5));
#if RETENTION_BUDGET_IMAGES
  if (model == "mlp" || model == "both" || model == "all")
    compare<270'000, 131'000>("MLP 784-512-512-10, Adam", bench::mlp{}, images, reps);
  if (model == "cnn" || model == "both" || model == "all")
    compare<29'000'000, 14'500'000>("CNN of examples/fashion_mnist, Adam", bench::cnn{}, images, reps);
#endif
#if RETENTION_BUDGET_GPT
  if (model == "gpt" || model == "all")
    compare<12'700'000>("char GPT, width 128, 2 layers, 4 heads, context 64, 16 sequences at batch 128, Adam", gpt{},
                        text, reps);
#endif
  (void)images, (void)text;
}
