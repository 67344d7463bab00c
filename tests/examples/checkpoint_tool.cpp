// Makes hostile checkpoints for the example tests (hostile.cmake) and saves in a loop for
// the kill test (kill_during_save.sh). Not an example: a test helper.
//
//   checkpoint_tool set-metadata IN OUT KEY=VALUE...   copy IN to OUT with metadata changed
//   checkpoint_tool set-element IN OUT TENSOR INDEX VALUE
//                                                      an F32 element changed (nan, -1, ...)
//   checkpoint_tool nested OUT DEPTH                   a file whose "fc1.weight" shape is an
//                                                      array nested DEPTH deep (issue 18's crash)
//   checkpoint_tool drop-metadata IN OUT PREFIX        copy IN to OUT without the metadata keys
//                                                      starting with PREFIX (a checkpoint of
//                                                      before run settings were recorded)
//   checkpoint_tool sparse OUT NAME BYTES              a file whose only tensor NAME (F32) is
//                                                      BYTES bytes of a hole (a sparse file)
//   checkpoint_tool save-loop FILE                     save 4 MB checkpoints until killed
//   checkpoint_tool save-once FILE                     one save of the same kind
//   checkpoint_tool verify FILE                        exit 0 if FILE is a whole save-loop checkpoint
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <luminal/io/safetensors.hpp>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

int usage() {
  std::cerr << "usage: checkpoint_tool set-metadata IN OUT KEY=VALUE... | set-element IN OUT TENSOR INDEX VALUE |\n"
               "       nested OUT DEPTH | drop-metadata IN OUT PREFIX | sparse OUT NAME BYTES |\n"
               "       save-loop FILE | save-once FILE | verify FILE\n";
  return 2;
}

/// One checkpoint of the save loop: "w" holds 2^20 copies of its iteration number.
void save_iteration(const std::string& file, std::uint32_t iteration) {
  luminal::tensor_store store;
  store.set_raw("w", luminal::dtype_tag::f32, std::vector<luminal::index_t>{1 << 20},
                std::vector<std::byte>(std::size_t(4) << 20));
  float* w = reinterpret_cast<float*>(store.at("w").data.data());
  for (std::size_t i = 0; i < (std::size_t(1) << 20); ++i) w[i] = float(iteration);
  store.metadata["iteration"] = std::to_string(iteration);
  luminal::save_safetensors(store, file);
}

int verify(const std::string& file) {
  const luminal::tensor_store store = luminal::load_safetensors(file);
  const float expected = float(std::stoul(store.metadata.at("iteration")));
  const auto& w = store.at("w");
  const float* v = reinterpret_cast<const float*>(w.data.data());
  for (std::size_t i = 0; i < w.data.size() / 4; ++i)
    if (v[i] != expected) {
      std::cerr << file << ": element " << i << " is " << v[i] << ", not " << expected << "\n";
      return 1;
    }
  std::cout << file << ": a whole checkpoint of iteration " << store.metadata.at("iteration") << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage();
  try {
    const std::string& command = args[0];
    if (command == "set-metadata" && args.size() >= 3) {
      luminal::tensor_store store = luminal::load_safetensors(args[1]);
      for (std::size_t k = 3; k < args.size(); ++k) {
        const auto eq = args[k].find('=');
        if (eq == std::string::npos) return usage();
        store.metadata[args[k].substr(0, eq)] = args[k].substr(eq + 1);
      }
      luminal::save_safetensors(store, args[2]);
    } else if (command == "set-element" && args.size() == 6) {
      luminal::tensor_store store = luminal::load_safetensors(args[1]);
      auto& e = store.at(args[3]);
      const std::size_t index = std::stoul(args[4]);
      if (e.dtype != luminal::dtype_tag::f32 || index >= e.data.size() / 4) return usage();
      const float value = std::strtof(args[5].c_str(), nullptr);
      std::memcpy(e.data.data() + index * 4, &value, 4);
      luminal::save_safetensors(store, args[2]);
    } else if (command == "nested" && args.size() == 3) {
      const std::size_t depth = std::stoul(args[2]);
      std::string header = R"({"fc1.weight":{"dtype":"F32","shape":)" + std::string(depth, '[') +
                           std::string(depth, ']') + R"(,"data_offsets":[0,4]}})";
      header.append((8 - header.size() % 8) % 8, ' ');
      std::string length(8, '\0');
      for (int k = 0; k < 8; ++k) length[k] = char((std::uint64_t(header.size()) >> (8 * k)) & 0xFF);
      std::ofstream out(args[1], std::ios::binary | std::ios::trunc);
      out << length << header << std::string(4, '\0');
      if (!out) throw std::runtime_error("cannot write " + args[1]);
    } else if (command == "drop-metadata" && args.size() == 4) {
      luminal::tensor_store store = luminal::load_safetensors(args[1]);
      for (auto it = store.metadata.begin(); it != store.metadata.end();)
        it = it->first.starts_with(args[3]) ? store.metadata.erase(it) : std::next(it);
      luminal::save_safetensors(store, args[2]);
    } else if (command == "sparse" && args.size() == 4) {
      const std::uint64_t bytes = std::stoull(args[3]) / 4 * 4;
      std::string header = "{\"" + args[2] + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(bytes / 4) +
                           "],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
      header.append((8 - header.size() % 8) % 8, ' ');
      std::string length(8, '\0');
      for (int k = 0; k < 8; ++k) length[k] = char((std::uint64_t(header.size()) >> (8 * k)) & 0xFF);
      {
        std::ofstream out(args[1], std::ios::binary | std::ios::trunc);
        out << length << header;
        if (!out) throw std::runtime_error("cannot write " + args[1]);
      }
      if (::truncate(args[1].c_str(), off_t(8 + header.size() + bytes)) != 0)
        throw std::runtime_error("cannot extend " + args[1]);
    } else if (command == "save-loop" && args.size() == 2) {
      for (std::uint32_t i = 0;; ++i) save_iteration(args[1], i);
    } else if (command == "save-once" && args.size() == 2) {
      save_iteration(args[1], 1000000);
    } else if (command == "verify" && args.size() == 2) {
      return verify(args[1]);
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
