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
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#ifndef LUMINAL_BENCH_DIR
#define LUMINAL_BENCH_DIR "benchmarks"
#endif

namespace bench {

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

/// Runs benchmarks/<script> with `arguments` and returns its `torch_* value` lines, plus
/// "_output" (everything it printed) and "_status". `command` receives the command line.
inline std::map<std::string, std::string> run_torch(const std::string& script_name, const std::string& arguments,
                                                    std::string& command) {
  std::map<std::string, std::string> result;
  std::filesystem::path script = std::filesystem::path(LUMINAL_BENCH_DIR) / script_name;
  command = "\"" + python_interpreter() + "\" \"" + script.string() + "\" " + arguments + " 2>&1";
  if (!std::filesystem::exists(script)) {
    result["_output"] = "script not found: " + script.string();
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
    if (key.rfind("torch_", 0) == 0) result[key] = line.substr(space + 1);
  }
  return result;
}

}  // namespace bench
