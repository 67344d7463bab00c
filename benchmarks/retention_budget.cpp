// Rematerialization under a memory budget: the MLP and the CNN training steps of
// train_step_bench (bench_models.hpp; Adam, batch 128) compiled with
// retention_policy::store_all and with retention_policy::budget at three budgets. For each:
// the bytes of forward buffers kept for the backward (retained), the program's whole arena,
// the FLOPs the backward spends recomputing, the step time, and whether the losses of the
// steps are those of store_all (they must be: a recomputation runs the forward's kernel again).
//
//     retention_budget_bench [--model mlp|cnn|both] [--reps R] [--batch B]
//
// Not in the default build (four CNN steps are heavy to compile):
//     cmake --build build --target retention_budget_bench && build/benchmarks/retention_budget_bench
//
// The budgets are compile-time constants, chosen around what store_all keeps at batch 128
// (0.53 MB for the MLP, 58 MB for the CNN). The steps are compiled first and then timed in
// turns (five rounds), so that the machine's drift reaches them alike.
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

using namespace luminal;

namespace {

struct row {
  std::string policy;
  std::size_t retained = 0, arena = 0;
  double recomputed_gflop = 0, step_ms = 0;
  int kernels = 0;
  std::vector<float> losses;     // of the first steps, compared with store_all's
  std::function<void()> step;    // one more training step
  std::vector<double> round_ms;  // the step's median time in each round
};

template <retention_policy Policy, class Model>
row prepare(const std::string& name, const Model& model, const xt::xarray<float>& x,
            const xt::xarray<std::int32_t>& labels) {
  using step_type = decltype(compile_train_step<host, Policy>(model.loss(), adam{.lr = 1e-3f}));
  std::shared_ptr<step_type> step(new step_type(compile_train_step<host, Policy>(model.loss(), adam{.lr = 1e-3f})));
  tensor_store initial;
  model.initialize(initial, 1);
  step->store().assign(initial);
  step->bind("x", x);
  step->bind("labels", labels);
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
template <std::size_t... Budgets, class Model>
void compare(const char* title, const Model& model, const xt::xarray<float>& x, const xt::xarray<std::int32_t>& labels,
             int reps) {
  auto name = [](std::size_t bytes) {
    char text[48];
    std::snprintf(text, sizeof text, "budget %.2f MB", double(bytes) / 1e6);
    return std::string(text);
  };
  std::vector<row> rows;
  rows.push_back(prepare<retention_policy::store_all>("store_all", model, x, labels));
  (rows.push_back(prepare<retention_policy::budget{Budgets}>(name(Budgets), model, x, labels)), ...);
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
  std::string model = "both";
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
      std::fprintf(stderr, "usage: retention_budget_bench [--model mlp|cnn|both] [--reps R] [--batch B]\n");
      return 2;
    }
  }
  if (model != "mlp" && model != "cnn" && model != "both") {
    std::fprintf(stderr, "retention_budget_bench: --model must be mlp, cnn or both, not '%s'\n", model.c_str());
    return 2;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, 9);
  xt::xarray<float> x = xt::xarray<float>::from_shape({std::size_t(batch), 784});
  xt::xarray<std::int32_t> labels = xt::xarray<std::int32_t>::from_shape({std::size_t(batch)});
  for (auto& v : x) v = pixel(rng);
  for (auto& v : labels) v = label(rng);
  std::printf("retention_policy::budget, batch %d, %d thread(s); step ms: the median over 5 rounds of each round's "
              "median of %d steps\n\n", batch, int(thread_pool::instance().size()), std::max(1, reps / 5));
  if (model != "cnn") compare<525'000, 270'000, 20'000>("MLP 784-512-512-10, Adam", bench::mlp{}, x, labels, reps);
  if (model != "mlp")
    compare<44'000'000, 29'000'000, 4'000'000>("CNN of examples/fashion_mnist, Adam", bench::cnn{}, x, labels, reps);
}
