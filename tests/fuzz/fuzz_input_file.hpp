// The fuzz harnesses' way to hand bytes to luminal's readers, which take paths: one
// private file per process (in /dev/shm when there is one), rewritten for every input;
// for readers of a folder, one private folder per process.
//
//     const std::filesystem::path& file = fuzz::input_file(data, size);
//     luminal::load_safetensors(file);
//     fuzz::write_file(fuzz::own_folder() / "config.json", data, size);
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace fuzz {

/// A file of this process's own (mkstemp), removed at exit.
inline const std::filesystem::path& own_file() {
  static const std::filesystem::path path = [] {
    const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : P_tmpdir;
    std::string pattern = std::string(dir) + "/luminal-fuzz-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const int fd = ::mkstemp(buffer.data());
    if (fd < 0) std::abort();
    ::close(fd);
    static const std::string name = buffer.data();
    std::atexit([] { std::remove(name.c_str()); });
    return std::filesystem::path(name);
  }();
  return path;
}

/// A folder of this process's own (mkdtemp), removed with what it holds at exit.
inline const std::filesystem::path& own_folder() {
  static const std::filesystem::path path = [] {
    const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : P_tmpdir;
    std::string pattern = std::string(dir) + "/luminal-fuzz-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) std::abort();
    static const std::string name = buffer.data();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(name, ignored);
    });
    return std::filesystem::path(name);
  }();
  return path;
}

/// Writes `size` bytes to `path`, replacing what it held.
inline void write_file(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) std::abort();
}

/// Writes the input to own_file() and returns its path.
inline const std::filesystem::path& input_file(const std::uint8_t* data, std::size_t size) {
  const auto& path = own_file();
  write_file(path, data, size);
  return path;
}

}  // namespace fuzz
