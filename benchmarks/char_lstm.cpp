// One training step of the character LSTM of examples/char_lstm: Embedding(256, 64) ->
// nn::LSTM(64, 128, 2 layers) -> Linear(128, 256), cross-entropy over every position,
// AdamW with global-norm clipping, batch 32, context 64, as one compiled step (the
// sequence a scan inside it). The same step in PyTorch eager (char_gpt.py --model lstm:
// torch.nn.LSTM, its fused CPU kernel) runs right after, at 1 and at luminal's thread
// count, then the same step in JAX (char_lstm_jax.py: one jax.jit function, the recurrence
// a lax.scan, XLA on the CPU; in the benchmarks' jax-venv, see train_step_bench
// --install-jax) likewise, and the step's GEMMs alone in OpenBLAS give the floor. The
// goals: faster than the fastest peer, and close to the GEMMs.
//
//     char_lstm_bench [--batch B] [--context T] [--reps N] [--profile] [--no-peers]
//
// It also times one step of the scan's body on its own, the LSTM cell (h W_hh^T, the
// gates) compiled as a program at the step's shapes and at batch 1, and that step's GEMM
// alone: the scan runs its body program once per time step, so a body program's fixed cost
// (per run, whatever the batch) beside its GEMM shows how much of the recurrence is
// bookkeeping. --profile prints every kernel of the step, slowest first, and what each fuses.
#include <cstdio>
#include <iostream>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>
#include <random>
#include <string>

#include "bench_gemms.hpp"

using namespace luminal;

namespace {
constexpr std::int64_t vocab = 256, embed_width = 64, hidden = 128;
constexpr Dim Batch{"Batch"};
constexpr Dim Seq{"Seq"};
constexpr nn::Embedding<"embed", vocab, embed_width> embed;
constexpr nn::LSTM<"lstm", embed_width, hidden, 2> lstm;
constexpr nn::Linear<"head", hidden, vocab> head;

/// Median milliseconds of one run of the LSTM cell's step alone (the scan's body) at batch
/// `batch`, and of its GEMM h W_hh^T alone in the same program form.
std::pair<double, double> cell_step_ms(int batch, int reps) {
  constexpr std::int64_t carry_width = nn::detail::carry_width_of(nn::rnn_cell::lstm, hidden);
  auto carry = input<"carry", f32>(shape<Batch, carry_width>);
  auto xw = input<"xw", f32>(shape<Batch, 4 * hidden>);
  auto w = input<"w", f32>(shape<4 * hidden, hidden>);
  auto b = input<"b", f32>(shape<4 * hidden>);
  auto cell = compile(nn::detail::cell_step<nn::rnn_cell::lstm, hidden>{}(carry, xw, w, b));
  auto gemm = compile(matmul(input<"h", f32>(shape<Batch, hidden>), transpose(w)));
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  auto random = [&](std::vector<std::size_t> shape) {
    xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
    for (auto& v : a) v = u(rng);
    return a;
  };
  const std::size_t n = std::size_t(batch);
  cell.bind("carry", random({n, carry_width}));
  cell.bind("xw", random({n, 4 * hidden}));
  cell.bind("w", random({4 * hidden, hidden}));
  cell.bind("b", random({4 * hidden}));
  gemm.bind("h", random({n, hidden}));
  gemm.bind("w", random({4 * hidden, hidden}));
  // Many runs per timing: one run is microseconds.
  constexpr int inner = 200;
  const double cell_ms = bench::median_ms([&] { for (int i = 0; i < inner; ++i) cell.run(); }, reps) / inner;
  const double gemm_ms = bench::median_ms([&] { for (int i = 0; i < inner; ++i) gemm.run(); }, reps) / inner;
  return {cell_ms, gemm_ms};
}

int run_benchmark(int batch, int context, int reps, bool profile, bool peers) {
  auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
  auto targets = input<"targets", i32>(shape<Batch, Seq>);
  auto loss = nn::cross_entropy(head(lstm(embed(tokens))), targets);
  auto step = compile_train_step<host, retention_policy::store_all, gradient_clipping::global_norm>(
      loss, adamw{.lr = 1e-3f});
  step.max_grad_norm = 1.0;
  tensor_store initial;
  embed.initialize(initial, 1);
  lstm.initialize(initial, 1);
  head.initialize(initial, 1);
  step.store().assign(initial);
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> byte(0, 255);
  xt::xarray<int> x = xt::xarray<int>::from_shape({std::size_t(batch), std::size_t(context)});
  xt::xarray<int> y = x;
  for (auto& v : x) v = byte(rng);
  for (auto& v : y) v = byte(rng);
  step.bind("tokens", x);
  step.bind("targets", y);
  float last_loss = 0;
  const double ms = bench::median_ms([&] { last_loss = float(step.run()); }, reps, 2);
  const double tokens_per_step = double(batch) * context;
  std::printf("char LSTM: embedding %lld, 2 LSTM layers of %lld, context %d, batch %d, %u threads\n",
              (long long)embed_width, (long long)hidden, context, batch, thread_pool::instance().size());
  std::printf("luminal  %9.2f ms/step  %9.0f tokens/s  (last loss %.4f)\n", ms, tokens_per_step / (ms / 1e3),
              last_loss);

  // The scan's forward body alone: its fixed cost per run (batch 1) and at the step's batch.
  const auto [cell_ms, cell_gemm_ms] = cell_step_ms(batch, reps);
  const auto [cell1_ms, cell1_gemm_ms] = cell_step_ms(1, reps);
  std::printf("the LSTM cell's step as a program: %.2f us per run at batch %d (its GEMM h W_hh^T alone: %.2f us), "
              "%.2f us at batch 1 (GEMM %.2f us)\n",
              1e3 * cell_ms, batch, 1e3 * cell_gemm_ms, 1e3 * cell1_ms, 1e3 * cell1_gemm_ms);
  std::printf("  x %d steps x 2 layers: %.2f ms of the step's forward recurrence, of which GEMMs %.2f ms\n", context,
              2 * context * cell_ms, 2 * context * cell_gemm_ms);

  if (profile) {  // after the timing: profiling waits after every kernel
    step.set_profiling(true);
    for (int r = 0; r < 3; ++r) step.run();
    std::fputs(step.profile().c_str(), stdout);
    std::fputs(step.describe().c_str(), stdout);
    step.set_profiling(false);
  }

  std::map<std::string, std::string> torch{{"_status", "--no-peers"}};
  std::string command;
  const std::string arguments = "--model lstm --batch " + std::to_string(batch) + " --context " +
                                std::to_string(context) + " --reps " + std::to_string(reps);
  if (peers)
    for (int threads : {1, int(thread_pool::instance().size())}) {
      auto run = bench::run_torch("char_gpt.py", arguments + " --threads " + std::to_string(threads), command);
      if (run.count("torch_step_ms") &&
          (!torch.count("torch_step_ms") || std::stod(run["torch_step_ms"]) < std::stod(torch["torch_step_ms"])))
        torch = run;
      else if (!torch.count("torch_step_ms"))
        torch = run;
    }
  double fastest_peer_ms = 0;
  if (!torch.count("torch_step_ms")) {
    std::printf("PyTorch: not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
  } else {
    fastest_peer_ms = std::stod(torch["torch_step_ms"]);
    std::printf("PyTorch  %9.2f ms/step  %9.0f tokens/s  (torch %s eager, %s threads)\n", fastest_peer_ms,
                tokens_per_step / (fastest_peer_ms / 1e3), torch["torch_version"].c_str(),
                torch["torch_threads"].c_str());
  }
  // JAX (char_lstm_jax.py: the same step as one jax.jit function, the recurrence a
  // lax.scan) at 1 and at luminal's thread count, the faster.
  std::map<std::string, std::string> jax{{"_status", "--no-peers"}};
  for (int threads : {1, int(thread_pool::instance().size())}) {
    if (!peers) break;
    auto run = bench::run_peer("jax", bench::jax_interpreter(), "char_lstm_jax.py",
                               "--batch " + std::to_string(batch) + " --context " + std::to_string(context) +
                                   " --reps " + std::to_string(reps) + " --threads " + std::to_string(threads),
                               command);
    if (!run.count("jax_lstm_step_ms")) {
      if (!jax.count("jax_lstm_step_ms")) jax = run;
      break;
    }
    if (!jax.count("jax_lstm_step_ms") || std::stod(run["jax_lstm_step_ms"]) < std::stod(jax["jax_lstm_step_ms"]))
      jax = run;
  }
  if (!jax.count("jax_lstm_step_ms")) {
    std::printf("JAX: not measured (%s): %s\n", jax["_status"].c_str(), jax["_output"].c_str());
  } else {
    const double jax_ms = std::stod(jax["jax_lstm_step_ms"]);
    std::printf("JAX      %9.2f ms/step  %9.0f tokens/s  (jax %s jit on cpu, %s threads; loss %s -> %s)\n", jax_ms,
                tokens_per_step / (jax_ms / 1e3), jax["jax_version"].c_str(), jax["jax_threads"].c_str(),
                jax["jax_lstm_first_loss"].c_str(), jax["jax_lstm_last_loss"].c_str());
    std::printf("luminal tokens/s / JAX tokens/s = %.2f\n", jax_ms / ms);
    if (fastest_peer_ms == 0 || jax_ms < fastest_peer_ms) fastest_peer_ms = jax_ms;
  }

  // The step's GEMMs: per layer the input projection x W_ih^T over the whole sequence (and
  // its two backward products), the recurrence h W_hh^T once per time step, the carry's
  // cotangent g W_hh once per time step, W_hh's gradient over the whole sequence; the head.
  const int rows = batch * context, gates = 4 * int(hidden), h = int(hidden);
  std::vector<bench::gemm_shape> list;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string name = "lstm.l" + std::to_string(layer);
    bench::add_linear(list, name + " ih", rows, layer == 0 ? int(embed_width) : h, gates, true);
    list.push_back({false, true, batch, gates, h, name + " hh forward h W^T per step", context});
    list.push_back({false, false, batch, h, gates, name + " hh backward g W per step", context});
    list.push_back({true, false, gates, h, rows, name + " hh weight grad g^T h"});
  }
  bench::add_linear(list, "head", rows, h, int(vocab), true);
  bench::gemm_result floor = bench::time_gemms(list, reps);
  std::printf("GEMMs    %9.2f ms/step  (the step's %zu GEMMs alone in OpenBLAS, %.2f GFLOP)\n", floor.total_ms,
              list.size(), bench::gemm_flops(list) / 1e9);
  for (const auto& [shape, each_ms] : floor.each)
    std::printf("  %8.3f ms  %s (%d x %d x %d%s)\n", each_ms, shape.what.c_str(), shape.m, shape.n, shape.k,
                shape.batches > 1 ? (", " + std::to_string(shape.batches) + " times").c_str() : "");
  std::printf("luminal / GEMMs = %.2f\n", ms / floor.total_ms);
  if (fastest_peer_ms > 0)
    std::printf("fastest peer / luminal = %.2f (goal > 1: %s)\n", fastest_peer_ms / ms,
                fastest_peer_ms > ms ? "met" : "not met");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int batch = 32, context = 64, reps = 10;
  bool profile = false, peers = true;
  const char* usage = "usage: char_lstm_bench [--batch B] [--context T] [--reps N] [--profile] [--no-peers]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--profile") profile = true;
    else if (a == "--no-peers") peers = false;
    else if (i + 1 < argc && (a == "--batch" || a == "--context" || a == "--reps")) {
      const int v = std::atoi(argv[++i]);
      (a == "--batch" ? batch : a == "--context" ? context : reps) = v;
    } else {
      std::cerr << usage;
      return 2;
    }
  }
  if (batch < 1 || context < 1 || reps < 1) {
    std::cerr << "char_lstm_bench: --batch, --context and --reps must be positive\n" << usage;
    return 2;
  }
  return run_benchmark(batch, context, reps, profile, peers);
}
