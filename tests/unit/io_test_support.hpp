// Helpers of the checkpoint and data-file tests (io_test.cpp, io_hostile_test.cpp): a
// private temporary directory per test, raw file writing, and the check that a file is
// refused with a message naming it.
//
//     test::temp_dir dir;                        // mkdtemp: unique, only this user's
//     test::write_bytes(dir / "x.bin", "\x01\x02");
//     test::require_refused(dir / "x.bin", "header");
#pragma once
#include <catch2/catch.hpp>
#include <luminal/io/safetensors.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace test {

/// A fresh directory of its own under the system temp directory (created by mkdtemp, so
/// no other run, of this user or another, can hold the same name), removed with
/// everything in it.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "luminal-io-test-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path = buffer.data();
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

/// A little-endian u64, the safetensors header length.
inline std::string u64le(std::uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[k] = char((v >> (8 * k)) & 0xFF);
  return s;
}

/// A safetensors file from a header (padded with spaces to 8 bytes) and raw data bytes.
inline void write_safetensors_raw(const std::filesystem::path& p, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  write_bytes(p, u64le(header.size()) + header + data);
}

/// An IDX file: header for `type` and `dims`, then `data` (already big-endian).
inline std::string idx_bytes(unsigned char type, const std::vector<std::uint32_t>& dims, const std::string& data) {
  std::string s = {'\0', '\0', char(type), char(dims.size())};
  for (std::uint32_t d : dims) {
    s += char(d >> 24);
    s += char(d >> 16);
    s += char(d >> 8);
    s += char(d);
  }
  return s + data;
}

/// The message of the checkpoint_error that loading `p` throws; fails if it loads.
inline std::string refusal(const std::filesystem::path& p) {
  try {
    (void)luminal::load_safetensors(p);
  } catch (const luminal::checkpoint_error& e) {
    return e.what();
  }
  FAIL("'" << p.string() << "' loaded, but it should have been refused");
  return {};
}

/// Loading `p` is refused with a message that names the file and says `why`.
inline void require_refused(const std::filesystem::path& p, const std::string& why) {
  const std::string msg = refusal(p);
  INFO("message: " << msg);
  CHECK_THAT(msg, Catch::Matchers::Contains(p.string()));
  CHECK_THAT(msg, Catch::Matchers::Contains(why));
}

}  // namespace test
