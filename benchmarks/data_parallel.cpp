// Data-parallel training-step throughput on 1 and 2 MPI ranks, and how much of the
// gradient exchange the backward hides.
//
//   model: the MLP of train_step.cpp (784-512-512-10, ReLU, cross-entropy, Adam), f32, a
//          global batch of 128 split evenly over the ranks, compiled with
//          compile_train_step(loss, adam{}, data_parallel{comm}) (1 MiB buckets)
//   step:  the mean time of a step over the timed steps (every rank runs the same steps)
//   exposed: the time run() spent waiting for a bucket's sum, per step
//   exchange: the same buckets summed by blocking calls outside the step, per step
//   hidden: 1 - exposed / exchange, the share of the exchange that ran behind kernels
//
// Without mpirun it starts itself under `mpiexec --bind-to none -n 1` and `-n 2` (as root,
// and with more ranks than cores, where Open MPI needs to be told; unbound, so that one
// rank's threads may use every core) and prints both, then a
// model of the exchange on N machines joined by 100 Gb/s for the char GPT's gradients.
//
// Then the tape GPT on 1 and 2 ranks: the gradients' mean after the backward
// (average_gradients, all of it exposed) against during it (overlapped_gradient_mean:
// exposed is the wait in finish()).
//
//     data_parallel_bench [--steps S] [--batch B] [--threads-per-rank T]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <luminal/distributed/mpi.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/nn.hpp>
#include <luminal/nn/gpt.hpp>
#include <luminal/train/train.hpp>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_models.hpp"

using namespace luminal;

namespace {
constexpr std::size_t bucket_bytes = std::size_t(1) << 20;

bench::mlp model;  // bench_models.hpp

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct options {
  int steps = 60, batch = 128, threads_per_rank = 0;  // 0: cores / ranks
  bool tape = false;  // the worker times the tape GPT instead of the compiled MLP
};

using gpt_model = nn::GPT<256, 256, 4, 256>;  // examples/char_gpt's at width 256

/// The tape GPT (4 layers, width 256, context 64, a global batch of 8 sequences) on the
/// communicator's ranks: the gradients' mean taken after the backward (average_gradients)
/// and during it (overlapped_gradient_mean). Prints "RESULT ..." on rank 0.
int tape_worker(const options& opt, communicator& comm) {
  const int ranks = comm.size(), context = 64, local = std::max(1, 8 / ranks), steps = std::max(2, opt.steps / 6);
  gpt_model gpt(4);
  tensor_store params = gpt.initial_parameters(1);
  parameter_optimizer<adamw> optimizer({.lr = 1e-4f});
  std::mt19937 rng(unsigned(comm.rank()) + 1);
  xt::xarray<int> tokens = xt::xarray<int>::from_shape({std::size_t(local), std::size_t(context)}), targets = tokens;
  for (auto& v : tokens) v = int(rng() % 256);
  for (auto& v : targets) v = int(rng() % 256);
  overlapped_gradient_mean exchange(comm);
  auto timed = [&](bool overlapped) {
    double exposed = 0;
    comm.any(false);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      tape<> t(params);
      auto loss = gpt.loss(t, tokens, targets);
      if (overlapped) t.backward(loss, &exchange);
      else t.backward(loss);
      const auto exchanged = std::chrono::steady_clock::now();
      if (overlapped) exchange.finish();
      else average_gradients(t.gradients(), comm, bucket_bytes);
      exposed += seconds_since(exchanged);
      optimizer.step(params, t.gradients());
    }
    double slowest = 0;
    for (const std::string& v : comm.all_gather(std::to_string(seconds_since(start) / steps)))
      slowest = std::max(slowest, std::stod(v));
    return std::pair{slowest, exposed / steps};
  };
  timed(true);  // warm-up
  const auto [after_s, after_exposed] = timed(false);
  const auto [during_s, during_exposed] = timed(true);
  if (comm.rank() == 0)
    std::printf("RESULT ranks=%d after_ms=%.3f after_exchange_ms=%.3f during_ms=%.3f during_exposed_ms=%.3f\n", ranks,
                1e3 * after_s, 1e3 * after_exposed, 1e3 * during_s, 1e3 * during_exposed);
  return 0;
}

/// One rank's part: prints "RESULT key=value ..." on rank 0.
int worker(const options& opt, communicator& comm) {
  if (opt.tape) return tape_worker(opt, comm);
  const int ranks = comm.size();
  if (opt.batch % ranks != 0) throw std::runtime_error("--batch must split evenly over the ranks");
  const std::size_t local = std::size_t(opt.batch / ranks);
  auto step = compile_train_step(model.loss(), adam{.lr = 1e-3f}, data_parallel<bucket_bytes>{comm});
  tensor_store initial;
  model.initialize(initial, 1);
  step.store().assign(initial);
  std::mt19937 rng(unsigned(comm.rank()) + 1);
  std::normal_distribution<float> normal;
  xt::xarray<float> x = xt::xarray<float>::from_shape({local, std::size_t(784)});
  xt::xarray<std::int32_t> labels = xt::xarray<std::int32_t>::from_shape({local});
  for (auto& v : x) v = normal(rng);
  for (auto& v : labels) v = std::int32_t(rng() % 10);
  step.bind("x", x);
  step.bind("labels", labels);
  for (int i = 0; i < 5; ++i) step.run();  // warm-up (and the first run's broadcast)

  const double waited_before = step.exchange_wait_seconds();
  comm.any(false);  // start together
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < opt.steps; ++i) step.run();
  const double step_s = seconds_since(start) / opt.steps;
  const double exposed_s = (step.exchange_wait_seconds() - waited_before) / opt.steps;

  // The same buckets summed by blocking calls, outside the step: the exchange's full time.
  // The step's gradients, last layers first: fc3 bias, weight, fc2 bias, weight, fc1 bias, weight.
  constexpr auto layout = detail::make_bucket_layout<bucket_bytes, 6>({10, 5120, 512, 262144, 512, 401408}, 4);
  std::vector<std::vector<float>> buckets;
  for (int b = 0; b < layout.bucket_count; ++b) buckets.emplace_back(layout.bucket_elements[std::size_t(b)], 1.0f);
  comm.any(false);
  const auto exchange_start = std::chrono::steady_clock::now();
  for (int i = 0; i < opt.steps; ++i)
    for (auto& bucket : buckets) comm.wait(comm.start_sum(bucket.data(), bucket.size(), dtype_tag::f32));
  const double exchange_s = seconds_since(exchange_start) / opt.steps;

  // A rank's step time is its own; the job's is the slowest rank's.
  double slowest = 0;
  for (const std::string& t : comm.all_gather(std::to_string(step_s))) slowest = std::max(slowest, std::stod(t));
  if (comm.rank() == 0)
    std::printf("RESULT ranks=%d step_ms=%.4f images_per_s=%.1f exposed_ms=%.4f exchange_ms=%.4f buckets=%d "
                "progress_thread=%d\n",
                ranks, 1e3 * slowest, double(opt.batch) / slowest, 1e3 * exposed_s, 1e3 * exchange_s,
                layout.bucket_count, int(dynamic_cast<mpi_communicator&>(comm).progress_thread()));
  return 0;
}

std::map<std::string, double> run_ranks(const std::string& self, int ranks, bool progress_thread,
                                        const options& opt, bool tape = false) {
  const int threads = opt.threads_per_rank > 0 ? opt.threads_per_rank : std::max(1, int(std::thread::hardware_concurrency()) / ranks);
  std::ostringstream command;
  command << "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
          << "LUMINAL_MPI_PROGRESS_THREAD=" << int(progress_thread) << " LUMINAL_NUM_THREADS=" << threads << " mpiexec --bind-to none -n " << ranks << " '" << self << "' --worker --steps "
          << opt.steps << " --batch " << opt.batch << (tape ? " --tape" : "") << " 2>&1";
  FILE* pipe = popen(command.str().c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start mpiexec");
  std::map<std::string, double> result;
  std::string output;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    output += line;
    std::istringstream words(line);
    std::string word;
    words >> word;
    if (word != "RESULT") continue;
    while (words >> word)
      if (auto eq = word.find('='); eq != std::string::npos) result[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
  }
  if (pclose(pipe) != 0 || result.empty())
    throw std::runtime_error("mpiexec -n " + std::to_string(ranks) + " failed:\n" + output);
  result["threads"] = threads;
  return result;
}

/// Ring allreduce of `bytes` on n machines: 2 (n - 1) / n of the data crosses each link,
/// in 2 (n - 1) messages of the given latency.
double ring_allreduce_ms(double bytes, int n, double gbit_per_s, double latency_us) {
  return 1e3 * (2.0 * (n - 1) / n * bytes / (gbit_per_s * 1e9 / 8) + 2.0 * (n - 1) * latency_us * 1e-6);
}
}  // namespace

int main(int argc, char** argv) {
  options opt;
  bool as_worker = false;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&] {
      if (a + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return std::atoi(argv[++a]);
    };
    if (arg == "--worker") as_worker = true;
    else if (arg == "--tape") opt.tape = true;
    else if (arg == "--steps") opt.steps = std::max(1, value());
    else if (arg == "--batch") opt.batch = std::max(1, value());
    else if (arg == "--threads-per-rank") opt.threads_per_rank = std::max(1, value());
    else {
      std::cerr << "usage: data_parallel_bench [--steps S] [--batch B] [--threads-per-rank T]\n";
      return 2;
    }
  }
  if (as_worker || mpirun_ranks() > 0)
    return run_on_mpi_world(argc, argv, "data_parallel_bench", [&](communicator& comm) { return worker(opt, comm); });

  try {
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    std::printf("data-parallel training step: MLP 784-512-512-10, Adam, f32, global batch %d, %d timed steps,\n"
                "%zu-byte buckets; ranks share this machine's %u cores\n\n",
                opt.batch, opt.steps, bucket_bytes, std::thread::hardware_concurrency());
    std::printf("%6s %8s %10s %12s %12s %12s %8s\n", "ranks", "threads", "step ms", "images/s", "exchange ms",
                "exposed ms", "hidden");
    std::map<int, std::map<std::string, double>> results;  // by ranks, then 2 ranks without the progress thread
    for (int run : {1, 2, 3}) {
      const int ranks = run == 1 ? 1 : 2;
      auto r = results[run] = run_ranks(self, ranks, run != 3, opt);
      const double hidden = r["exchange_ms"] > 0 ? 1.0 - r["exposed_ms"] / r["exchange_ms"] : 0.0;
      std::printf("%6d %8.0f %10.3f %12.0f %12.4f %12.4f %7.0f%%%s\n", ranks, r["threads"], r["step_ms"],
                  r["images_per_s"], r["exchange_ms"], r["exposed_ms"], 100 * std::clamp(hidden, 0.0, 1.0),
                  ranks == 1 ? "" : r["progress_thread"] != 0 ? "  (progress thread)" : "  (MPI_Test between kernels)");
    }
    std::printf("\n2 ranks / 1 rank throughput: %.2fx with the progress thread, %.2fx without\n",
                results[2]["images_per_s"] / results[1]["images_per_s"],
                results[3]["images_per_s"] / results[1]["images_per_s"]);

    // The tape GPT: the mean taken after the backward against during it.
    std::printf("\ntape GPT (4 layers, width 256, context 64, global batch 8), AdamW, %d timed steps:\n",
                std::max(2, opt.steps / 6));
    std::printf("%6s %16s %16s %16s %16s %8s\n", "ranks", "after: step ms", "exchange ms", "during: step ms",
                "exposed ms", "hidden");
    for (int ranks : {1, 2}) {
      auto r = run_ranks(self, ranks, false, opt, true);
      const double hidden = r["after_exchange_ms"] > 0 ? 1.0 - r["during_exposed_ms"] / r["after_exchange_ms"] : 0.0;
      std::printf("%6d %16.1f %16.2f %16.1f %16.2f ", ranks, r["after_ms"], r["after_exchange_ms"], r["during_ms"],
                  r["during_exposed_ms"]);
      if (ranks == 1) std::printf("%8s\n", "-");  // nothing to hide: a one-rank sum is a no-op
      else std::printf("%7.0f%%\n", 100 * std::clamp(hidden, 0.0, 1.0));
    }

    // The char GPT of examples/char_gpt (4 layers, width 256) on N machines: its gradient,
    // summed by a ring allreduce over 100 Gb/s links (5 us a message), against its step.
    gpt_model gpt(4);
    double bytes = 0;
    for (const auto& [name, e] : gpt.initial_parameters(1)) bytes += double(e.data.size());
    std::printf("\nchar GPT (4 layers, width 256): %.2f MB of f32 gradients a step. Ring allreduce over 100 Gb/s:\n",
                bytes / 1e6);
    for (int n : {2, 4, 8, 16, 64})
      std::printf("  %3d machines: %.2f ms a step\n", n, ring_allreduce_ms(bytes, n, 100, 5));
  } catch (const std::exception& e) {
    std::cerr << "data_parallel_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
