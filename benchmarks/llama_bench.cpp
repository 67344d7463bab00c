// Prompt processing and text generation speed of a Llama GGUF model, as llama.cpp's
// llama-bench measures them: pp<N> runs N prompt tokens as one batch from an empty cache,
// tg<M> generates M tokens one at a time from an empty cache (each step one token run
// against the cache; no sampling). Each figure is the mean over --reps runs after one
// warm-up run, with its standard deviation, in tokens per second.
//
//     llama_bench [--model FILE.gguf] [--threads T] [--reps R] [--pp N] [--tg M] [--peers] [--profile]
//     llama_bench --install-peers                  # builds llama-bench, a torch venv: build/peers
//
// Prints `pp512 <t/s> ± <sd>` and `tg128 <t/s> ± <sd>`. With --peers it runs, in the same
// process and on the same file, llama.cpp's llama-bench and PyTorch + transformers on the
// dequantized model (--install-peers runs benchmarks/llama_peers.sh, which installs both)
// and prints their figures and luminal's ratio to each. --profile prints where a generated
// token's time goes, kernel by kernel.
#include <luminal/nn/llama.hpp>
#include <luminal/backends/host.hpp>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../examples/installed_models.hpp"
#include "llama_peers.hpp"

using namespace luminal;

namespace {

struct figure {
  double mean = 0, stddev = 0;
};

figure summarize(const std::vector<double>& tokens_per_second) {
  figure f;
  for (double v : tokens_per_second) f.mean += v;
  f.mean /= double(tokens_per_second.size());
  for (double v : tokens_per_second) f.stddev += (v - f.mean) * (v - f.mean);
  f.stddev = tokens_per_second.size() > 1 ? std::sqrt(f.stddev / double(tokens_per_second.size() - 1)) : 0.0;
  return f;
}

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int number(const char* flag, const char* text, int low, int high) {
  int value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc{} || ptr != end || value < low || value > high) {
    std::fprintf(stderr, "llama_bench: %s needs a whole number from %d to %d, not '%s'\n", flag, low, high, text);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int threads = 2, reps = 5, pp = 512, tg = 128;
  bool peers = false, profile = false, install = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "llama_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model_path = value();
    else if (a == "--threads") threads = number("--threads", value(), 1, 1024);
    else if (a == "--reps") reps = number("--reps", value(), 1, 1000);
    else if (a == "--pp") pp = number("--pp", value(), 0, 1 << 16);
    else if (a == "--tg") tg = number("--tg", value(), 0, 1 << 16);
    else if (a == "--peers") peers = true;
    else if (a == "--profile") profile = true;
    else if (a == "--install-peers") install = true;
    else {
      std::fprintf(stderr, "usage: llama_bench [--model FILE.gguf] [--threads T] [--reps R] [--pp N] [--tg M] "
                           "[--peers] [--profile] | --install-peers\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (install) {
    const std::string script = (bench::script_dirs().front() / "llama_peers.sh").string();
    const std::string command = "bash '" + script + "' '" + bench::llama_peers_dir().string() + "'";
    std::printf("installing the peers: %s\n", command.c_str());
    std::fflush(stdout);
    return std::system(command.c_str()) == 0 ? 0 : 1;
  }
  try {
    setenv("LUMINAL_NUM_THREADS", std::to_string(threads).c_str(), 1);
    if (model_path.empty()) model_path = examples::smollm_gguf();
    nn::llama<host> model(model_path, std::max(pp, tg) + 1);
    const std::int64_t vocab = model.config().vocab;
    std::printf("model: %s (%s, %lld layers, width %lld), threads: %d, reps: %d\n", model_path.c_str(),
                model.config().name.c_str(), (long long)model.config().layers, (long long)model.config().width, threads,
                reps);
    std::mt19937 rng(1);
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(pp));
    for (auto& id : prompt) id = std::int32_t(rng() % std::uint32_t(vocab));
    figure pp_figure, tg_figure;
    if (pp > 0) {
      std::vector<double> rates;
      for (int r = 0; r <= reps; ++r) {
        model.reset();
        auto start = std::chrono::steady_clock::now();
        model.forward(prompt);
        if (r > 0) rates.push_back(pp / seconds(start));
      }
      pp_figure = summarize(rates);
      std::printf("pp%d %.1f ± %.1f t/s\n", pp, pp_figure.mean, pp_figure.stddev);
    }
    if (tg > 0) {
      std::vector<double> rates;
      for (int r = 0; r <= reps; ++r) {
        model.reset();
        if (profile && r == reps) model.set_profiling(true);
        std::int32_t next = 1;
        auto start = std::chrono::steady_clock::now();
        for (int t = 0; t < tg; ++t) {
          std::span<const float> logits = model.forward(std::span<const std::int32_t>(&next, 1));
          next = std::int32_t((std::uint32_t(next) * 2654435761u + std::uint32_t(logits.size())) % std::uint32_t(vocab));
        }
        if (r > 0) rates.push_back(tg / seconds(start));
      }
      tg_figure = summarize(rates);
      std::printf("tg%d %.1f ± %.1f t/s\n", tg, tg_figure.mean, tg_figure.stddev);
      if (profile) std::printf("\nper generated token (the last rep, %d tokens):\n%s", tg, model.profile().c_str());
    }
    if (peers) {
      for (const bench::llama_peer_result& peer :
           {bench::run_llama_bench(model_path, threads, pp, tg, reps), bench::run_llama_torch(model_path, threads, pp, tg, reps)}) {
        if (!peer.ok()) {
          std::printf("%s: %s\n", peer.name.c_str(), peer.status.c_str());
          continue;
        }
        std::printf("%s (%s): pp%d %.1f ± %.1f t/s, tg%d %.1f ± %.1f t/s; luminal / %s: pp %.2fx, tg %.2fx\n",
                    peer.name.c_str(), peer.version.c_str(), peer.pp_tokens, peer.pp_tokens_per_s, peer.pp_stddev,
                    peer.tg_tokens, peer.tg_tokens_per_s, peer.tg_stddev, peer.name.c_str(),
                    peer.pp_tokens_per_s > 0 ? pp_figure.mean / peer.pp_tokens_per_s : 0.0,
                    peer.tg_tokens_per_s > 0 ? tg_figure.mean / peer.tg_tokens_per_s : 0.0);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
