// Runs a fuzz harness over files, without libFuzzer: the normal (g++) build replays the
// committed corpus, every reproducer included, through each harness as a CTest test.
//
//     luminal_fuzz_replay_safetensors tests/fuzz/corpus/safetensors   # files or directories
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int a = 1; a < argc; ++a) {
    if (fs::is_directory(argv[a])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[a]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[a]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << "replay: no input files\n";
    return 2;
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    if (!in.good() && !in.eof()) {
      std::cerr << "replay: cannot read " << file << "\n";
      return 2;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replay: " << files.size() << " inputs ran without a failure\n";
  return 0;
}
