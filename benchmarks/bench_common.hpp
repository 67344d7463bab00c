// Shared pieces of the benchmarks: median timing and running a PyTorch peer script that
// prints `key value` lines.
#pragma once
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <xtensor/xarray.hpp>

namespace bench {

/// The folder of the running benchmark's executable.
inline std::filesystem::path binary_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path(ec) : exe.parent_path();
}

/// The folders searched for a peer script (benchmarks/ of the source tree):
/// $LUMINAL_BENCH_DIR when set, else the folders CMake wrote beside the executable, one a
/// line (bench_source_dir.txt), else ./benchmarks. Found at run time: a path compiled in
/// would differ between clones, and ccache would compile each benchmark again for every
/// new clone.
inline std::vector<std::filesystem::path> script_dirs() {
  if (const char* env = std::getenv("LUMINAL_BENCH_DIR"); env && *env) return {env};
  std::vector<std::filesystem::path> dirs;
  std::ifstream in(binary_dir() / "bench_source_dir.txt");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) dirs.emplace_back(line);
  if (dirs.empty()) dirs.emplace_back("benchmarks");
  return dirs;
}

/// An array of the given shape, uniform in [-1, 1) from std::mt19937(seed): a benchmark's
/// inputs, the same in every run.
inline xt::xarray<float> random_values(const std::vector<std::size_t>& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  xt::xarray<float> out = xt::xarray<float>::from_shape(shape);
  for (auto& v : out) v = dist(rng);
  return out;
}

/// Median wall time of `reps` calls of f, in milliseconds, after `warmup` untimed calls.
template <class F>
double median_ms(F&& f, int reps, int warmup = 3) {
  for (int r = 0; r < warmup; ++r) f();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    f();
    auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(times.begin(), times.end());
  std::size_t m = times.size() / 2;
  return times.size() % 2 ? times[m] : 0.5 * (times[m - 1] + times[m]);
}

inline std::string python_interpreter() {
  if (const char* env = std::getenv("LUMINAL_BENCH_PYTHON"); env && *env) return env;
  std::error_code ec;
  if (std::filesystem::exists("/usr/bin/python3", ec)) return "/usr/bin/python3";
  return "python3";
}

/// Runs benchmarks/<script> with `python` and `arguments` and returns its `<prefix>_* value`
/// lines, plus "_output" (everything it printed) and "_status". `command` receives the
/// command line.
inline std::map<std::string, std::string> run_peer(const std::string& prefix, const std::string& python,
                                                   const std::string& script_name, const std::string& arguments,
                                                   std::string& command) {
  std::map<std::string, std::string> result;
  std::error_code ec;
  std::vector<std::filesystem::path> dirs = script_dirs();
  std::filesystem::path script = dirs.front() / script_name;
  for (const auto& dir : dirs)
    if (std::filesystem::exists(dir / script_name, ec)) {
      script = dir / script_name;
      break;
    }
  command = "\"" + python + "\" \"" + script.string() + "\" " + arguments + " 2>&1";
  if (!std::filesystem::exists(script)) {
    result["_output"] = "script not found: " + script.string() + " (set LUMINAL_BENCH_DIR to the benchmarks folder of the source tree)";
    result["_status"] = "not run";
    return result;
  }
  std::fflush(stdout);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    result["_output"] = std::string("popen failed: ") + std::strerror(errno);
    result["_status"] = "not run";
    return result;
  }
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  result["_output"] = output.substr(0, output.find_last_not_of(" \n") + 1);
  result["_status"] = status == -1 ? std::string("unknown")
                      : WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status));
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    auto space = line.find(' ');
    if (space == std::string::npos) continue;
    std::string key = line.substr(0, space);
    if (key.rfind(prefix + "_", 0) == 0) result[key] = line.substr(space + 1);
  }
  return result;
}

/// The faster of two runs of a peer, model by model: the `<prefix>_<model>_*` lines of
/// the run whose `<prefix>_<model>_step_ms` is lower, with `<prefix>_<model>_threads`
/// taken from that run's `<prefix>_threads`. Peers are measured at their best thread count.
inline std::map<std::string, std::string> faster_of(const std::string& prefix, std::map<std::string, std::string> a,
                                                    std::map<std::string, std::string> b) {
  for (const std::string& model : {"mlp", "cnn", "resnet", "gpt"}) {
    const std::string key = prefix + "_" + model + "_step_ms", head = prefix + "_" + model + "_";
    for (auto* run : {&a, &b})
      if (run->count(key)) (*run)[head + "threads"] = (*run)[prefix + "_threads"];
    if (b.count(key) && (!a.count(key) || std::stod(b[key]) < std::stod(a[key])))
      for (const auto& [k, v] : b)
        if (k.rfind(head, 0) == 0) a[k] = v;
  }
  for (const auto& [k, v] : b) a.emplace(k, v);
  return a;
}

/// The PyTorch peer: benchmarks/<script> under python_interpreter(), its `torch_*` lines.
inline std::map<std::string, std::string> run_torch(const std::string& script_name, const std::string& arguments,
                                                    std::string& command) {
  return run_peer("torch", python_interpreter(), script_name, arguments, command);
}

/// Where `--install-jax` puts JAX: a virtual environment beside the benchmarks' binaries.
inline std::filesystem::path jax_environment() { return binary_dir() / "jax-venv"; }

/// The interpreter for the JAX peer: LUMINAL_BENCH_JAX_PYTHON, else the benchmarks' own
/// environment when it exists, else python_interpreter() (a JAX installed system-wide).
inline std::string jax_interpreter() {
  if (const char* env = std::getenv("LUMINAL_BENCH_JAX_PYTHON"); env && *env) return env;
  std::error_code ec;
  auto venv = jax_environment() / "bin" / "python";
  if (std::filesystem::exists(venv, ec)) return venv.string();
  return python_interpreter();
}

/// Creates the benchmarks' virtual environment and installs JAX (CPU) from PyPI into it.
inline bool install_jax() {
  std::string venv = jax_environment().string();
  std::string command = "\"" + python_interpreter() + "\" -m venv \"" + venv + "\" && \"" + venv +
                        "/bin/pip\" install --quiet jax";
  std::printf("installing JAX: %s\n", command.c_str());
  std::fflush(stdout);
  return std::system(command.c_str()) == 0;
}

}  // namespace bench
