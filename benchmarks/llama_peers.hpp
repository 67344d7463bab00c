// The peers of the Llama benchmark: llama.cpp's llama-bench and the PyTorch + transformers
// script benchmarks/llama_torch.py, run on a GGUF file, each giving prompt-processing
// (pp<N>) and generation (tg<M>) tokens/s as llama-bench defines them: the mean over the
// reps after a warm-up, with its standard deviation.
//
// Neither peer is part of the build: benchmarks/llama_peers.sh installs both (default
// build/peers of the source tree). A missing peer is not an error here: its result says
// `installed == false` and why, with the command that installs it.
//
//     #include "llama_peers.hpp"
//     bench::llama_peer_result cpp = bench::run_llama_bench(model_path, /*threads=*/2);
//     bench::llama_peer_result torch = bench::run_llama_torch(model_path, /*threads=*/2);
//     for (const auto* peer : {&cpp, &torch})
//       if (peer->ok()) std::printf("%s pp%d %.1f ± %.1f t/s, tg%d %.1f ± %.1f t/s\n",
//                                   peer->name.c_str(), peer->pp_tokens, peer->pp_tokens_per_s,
//                                   peer->pp_stddev, peer->tg_tokens, peer->tg_tokens_per_s,
//                                   peer->tg_stddev);
//       else std::printf("%s: %s\n", peer->name.c_str(), peer->status.c_str());
//
// Where the peers are looked for: $LUMINAL_LLAMA_PEERS (the folder llama_peers.sh was given),
// else build/peers beside each benchmarks folder of bench::script_dirs(), else peers/ beside
// the benchmark's build folder. $LUMINAL_LLAMA_BENCH and $LUMINAL_LLAMA_TORCH_PYTHON name the
// llama-bench binary and the Python interpreter directly.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <sys/wait.h>

#include "bench_common.hpp"

namespace bench {

/// What one peer measured; figures are 0 where a test was not run.
struct llama_peer_result {
  std::string name;              // "llama.cpp" or "torch"
  bool installed = false;        // the peer was found and started
  std::string status;            // "ok", or what went wrong (for a missing peer: how to install it)
  std::string version;           // llama.cpp: build commit; torch: "torch X, transformers Y"
  int threads = 0, reps = 0;
  int pp_tokens = 0, tg_tokens = 0;
  double pp_tokens_per_s = 0, pp_stddev = 0;
  double tg_tokens_per_s = 0, tg_stddev = 0;
  std::string command;           // the command line that ran
  std::string output;            // everything the peer printed, for diagnosing a failure

  bool ok() const { return status == "ok"; }
};

/// The install command a missing peer's status points at.
inline constexpr const char* llama_peers_install_hint = "install it with benchmarks/llama_peers.sh [DIR] "
                                                        "(and set LUMINAL_LLAMA_PEERS=DIR for a DIR other than build/peers)";

/// The folder benchmarks/llama_peers.sh installed into (see the header comment); the first
/// candidate when none exists, so that messages can name it.
inline std::filesystem::path llama_peers_dir() {
  if (const char* env = std::getenv("LUMINAL_LLAMA_PEERS"); env && *env) return env;
  std::vector<std::filesystem::path> candidates;
  for (const auto& dir : script_dirs()) candidates.push_back(std::filesystem::absolute(dir).parent_path() / "build" / "peers");
  candidates.push_back(binary_dir().parent_path() / "peers");
  std::error_code ec;
  for (const auto& dir : candidates)
    if (std::filesystem::is_directory(dir, ec)) return dir;
  return candidates.front();
}

/// llama-bench: $LUMINAL_LLAMA_BENCH, else llama_peers_dir()/bin/llama-bench.
inline std::filesystem::path llama_bench_binary() {
  if (const char* env = std::getenv("LUMINAL_LLAMA_BENCH"); env && *env) return env;
  return llama_peers_dir() / "bin" / "llama-bench";
}

/// The Python of the torch peer: $LUMINAL_LLAMA_TORCH_PYTHON, else llama_peers_dir()'s
/// torch-venv, else python_interpreter() (a torch and transformers installed system-wide).
inline std::string llama_torch_python() {
  if (const char* env = std::getenv("LUMINAL_LLAMA_TORCH_PYTHON"); env && *env) return env;
  const std::filesystem::path venv = llama_peers_dir() / "torch-venv" / "bin" / "python";
  std::error_code ec;
  return std::filesystem::exists(venv, ec) ? venv.string() : python_interpreter();
}

namespace llama_peers_detail {

/// `text` as one shell word.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline void check_arguments(const std::filesystem::path& model, int threads, int pp, int tg, int reps) {
  if (model.empty()) throw std::invalid_argument("llama peers: no model file given");
  if (threads < 1 || reps < 1 || pp < 0 || tg < 0 || (pp == 0 && tg == 0))
    throw std::invalid_argument("llama peers: need threads >= 1, reps >= 1, pp and tg >= 0 and not both 0 (got threads " +
                                std::to_string(threads) + ", reps " + std::to_string(reps) + ", pp " +
                                std::to_string(pp) + ", tg " + std::to_string(tg) + ")");
}

/// Runs `command` (stderr joined to stdout); returns its output and sets `status` to "ok" or
/// "exit code N" / "signal N" / "popen failed: ...".
inline std::string run_command(const std::string& command, std::string& status) {
  std::fflush(stdout);
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    status = std::string("popen failed: ") + std::strerror(errno);
    return {};
  }
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int code = pclose(pipe);
  status = code == -1               ? std::string("pclose failed")
           : !WIFEXITED(code)        ? "signal " + std::to_string(WTERMSIG(code))
           : WEXITSTATUS(code) != 0 ? "exit code " + std::to_string(WEXITSTATUS(code))
                                     : "ok";
  return output;
}

/// The raw value of `"key": value` in one flat JSON object line (a number, or a string
/// without its quotes); empty when the key is absent. llama-bench's jsonl objects are flat
/// and its strings hold no escaped quotes in the fields read here.
inline std::string json_field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  std::size_t at = line.find(needle);
  if (at == std::string::npos) return {};
  at = line.find_first_not_of(' ', at + needle.size());
  if (at == std::string::npos) return {};
  if (line[at] == '"') {
    const std::size_t end = line.find('"', at + 1);
    return end == std::string::npos ? std::string() : line.substr(at + 1, end - at - 1);
  }
  const std::size_t end = line.find_first_of(",}", at);
  std::string value = line.substr(at, end == std::string::npos ? std::string::npos : end - at);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

/// A finite number parsed from `text`, or `fallback` when it is not one.
inline double number_or(const std::string& text, double fallback) {
  if (text.empty()) return fallback;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end == text.c_str() || value != value ? fallback : value;
}

/// The last `lines` lines of `text`, for status messages.
inline std::string tail(const std::string& text, int lines = 6) {
  std::size_t at = text.size();
  while (lines-- > 0 && at > 0) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) return text;
  }
  return text.substr(at + 1);
}

}  // namespace llama_peers_detail

/// llama.cpp's llama-bench on `model` with `threads` threads: one run with `-p pp -n tg -r
/// reps -o jsonl` (pp and tg are separate tests in it, each from an empty KV cache); pp or tg
/// 0 skips that test.
inline llama_peer_result run_llama_bench(const std::filesystem::path& model, int threads, int pp = 512, int tg = 128,
                                         int reps = 5) {
  namespace detail = llama_peers_detail;
  detail::check_arguments(model, threads, pp, tg, reps);
  llama_peer_result result;
  result.name = "llama.cpp";
  result.threads = threads;
  result.reps = reps;
  const std::filesystem::path binary = llama_bench_binary();
  std::error_code ec;
  if (!std::filesystem::exists(binary, ec)) {
    result.status = "not installed: no llama-bench at " + binary.string() + "; " + llama_peers_install_hint;
    return result;
  }
  if (!std::filesystem::is_regular_file(model, ec)) {
    result.status = "no model file " + model.string();
    return result;
  }
  result.installed = true;
  result.command = detail::shell_quote(binary.string()) + " -m " + detail::shell_quote(model.string()) +
                   " -p " + std::to_string(pp) + " -n " + std::to_string(tg) + " -t " + std::to_string(threads) +
                   " -r " + std::to_string(reps) + " -o jsonl";
  std::string status;
  result.output = detail::run_command(result.command, status);
  std::istringstream lines(result.output);
  bool found_pp = pp == 0, found_tg = tg == 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() != '{') continue;
    const int n_prompt = int(detail::number_or(detail::json_field(line, "n_prompt"), -1));
    const int n_gen = int(detail::number_or(detail::json_field(line, "n_gen"), -1));
    const double mean = detail::number_or(detail::json_field(line, "avg_ts"), 0);
    const double stddev = detail::number_or(detail::json_field(line, "stddev_ts"), 0);
    if (result.version.empty()) result.version = detail::json_field(line, "build_commit");
    if (n_prompt == pp && n_gen == 0 && pp > 0) {
      result.pp_tokens = pp, result.pp_tokens_per_s = mean, result.pp_stddev = stddev, found_pp = mean > 0;
    } else if (n_prompt == 0 && n_gen == tg && tg > 0) {
      result.tg_tokens = tg, result.tg_tokens_per_s = mean, result.tg_stddev = stddev, found_tg = mean > 0;
    }
  }
  if (status != "ok")
    result.status = "llama-bench failed (" + status + "): " + detail::tail(result.output);
  else if (!found_pp || !found_tg)
    result.status = "llama-bench printed no " + std::string(!found_pp ? "pp" : "tg") + " result: " + detail::tail(result.output);
  else
    result.status = "ok";
  return result;
}

/// benchmarks/llama_torch.py on `model` under llama_torch_python(): transformers' f32 model,
/// torch.set_num_threads(threads), the same pp/tg tests as run_llama_bench.
inline llama_peer_result run_llama_torch(const std::filesystem::path& model, int threads, int pp = 512, int tg = 128,
                                         int reps = 5) {
  namespace detail = llama_peers_detail;
  detail::check_arguments(model, threads, pp, tg, reps);
  llama_peer_result result;
  result.name = "torch";
  result.threads = threads;
  result.reps = reps;
  const std::string arguments = "--model " + detail::shell_quote(model.string()) + " --threads " +
                                std::to_string(threads) + " --pp " + std::to_string(pp) + " --tg " +
                                std::to_string(tg) + " --reps " + std::to_string(reps);
  std::map<std::string, std::string> lines = run_peer("torch", llama_torch_python(), "llama_torch.py", arguments, result.command);
  result.output = lines["_output"];
  const std::string& status = lines["_status"];
  if (lines.count("torch_unavailable")) {
    result.status = "not installed: " + lines["torch_unavailable"] + " (python " + llama_torch_python() + "); " +
                    llama_peers_install_hint;
    return result;
  }
  if (status == "exit code 127") {  // the shell found no such interpreter
    result.status = "not installed: no Python at " + llama_torch_python() + "; " + llama_peers_install_hint;
    return result;
  }
  if (status == "not run") {
    result.status = "not run: " + result.output;
    return result;
  }
  result.installed = true;
  result.version = "torch " + lines["torch_version"] + ", transformers " + lines["torch_transformers_version"];
  auto figure = [&](const std::string& key) { return lines.count(key) ? detail::number_or(lines[key], 0) : 0.0; };
  if (pp > 0) {
    const std::string key = "torch_pp" + std::to_string(pp);
    result.pp_tokens = pp, result.pp_tokens_per_s = figure(key), result.pp_stddev = figure(key + "_stddev");
  }
  if (tg > 0) {
    const std::string key = "torch_tg" + std::to_string(tg);
    result.tg_tokens = tg, result.tg_tokens_per_s = figure(key), result.tg_stddev = figure(key + "_stddev");
  }
  if (status != "exit code 0")
    result.status = "llama_torch.py failed (" + status + "): " + detail::tail(result.output);
  else if ((pp > 0 && result.pp_tokens_per_s <= 0) || (tg > 0 && result.tg_tokens_per_s <= 0))
    result.status = "llama_torch.py printed no figures: " + detail::tail(result.output);
  else
    result.status = "ok";
  return result;
}

}  // namespace bench
