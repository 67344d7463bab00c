// Writing GGUF files for the tests: a scratch directory and a writer of metadata and
// tensors, in the order they are added (tests/unit/io_gguf_test.cpp, nn_llama_test.cpp).
#pragma once
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <stdlib.h>

#include <luminal/io/gguf.hpp>

namespace test {

namespace fs = std::filesystem;
using luminal::gguf_type;

/// A private directory (mkdtemp), removed with its files.
struct scratch_dir {
  fs::path path;
  scratch_dir() {
    std::string pattern = (fs::temp_directory_path() / "luminal-gguf-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path = pattern;
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  /// Writes `bytes` to a file of this directory and returns its path.
  std::string write(const std::string& bytes, const std::string& name = "model.gguf") const {
    const fs::path file = path / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + file.string());
    return file.string();
  }
};

/// Little-endian pieces of a GGUF file.
struct le_bytes {
  std::string out;
  template <class T>
  le_bytes& put(T value) {
    const auto bits = std::bit_cast<std::conditional_t<sizeof(T) == 1, std::uint8_t, std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                   std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>>(value);
    for (std::size_t k = 0; k < sizeof(T); ++k) out += char((std::uint64_t(bits) >> (8 * k)) & 0xff);
    return *this;
  }
  le_bytes& str(std::string_view s) {
    put(std::uint64_t(s.size()));
    out += s;
    return *this;
  }
};

/// A GGUF writer for the tests: metadata and tensors in the order they are added, each
/// tensor's data placed at the next multiple of `alignment` (no padding after the last).
/// The counts written can be overridden to build hostile headers.
struct gguf_writer {
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  le_bytes kv, infos;
  std::string data;
  std::uint64_t kv_count = 0, tensor_count = 0;
  std::optional<std::uint64_t> kv_count_written, tensor_count_written;

  template <class T>
  gguf_writer& scalar(std::string_view key, gguf_type type, T value) {
    kv.str(key).put(std::uint32_t(type)).put(value);
    ++kv_count;
    return *this;
  }
  gguf_writer& string(std::string_view key, std::string_view value) {
    kv.str(key).put(std::uint32_t(gguf_type::string)).str(value);
    ++kv_count;
    return *this;
  }
  template <class T>
  gguf_writer& array(std::string_view key, gguf_type element, const std::vector<T>& values) {
    kv.str(key).put(std::uint32_t(gguf_type::array)).put(std::uint32_t(element)).put(std::uint64_t(values.size()));
    for (const T& v : values) kv.put(v);
    ++kv_count;
    return *this;
  }
  gguf_writer& strings(std::string_view key, const std::vector<std::string>& values) {
    kv.str(key).put(std::uint32_t(gguf_type::array)).put(std::uint32_t(gguf_type::string)).put(std::uint64_t(values.size()));
    for (const std::string& v : values) kv.str(v);
    ++kv_count;
    return *this;
  }
  /// A key followed by any bytes (its type and value, right or wrong).
  gguf_writer& raw(std::string_view key, const std::string& type_and_value) {
    kv.str(key).out += type_and_value;
    ++kv_count;
    return *this;
  }
  /// A tensor info with the given offset, and no data.
  gguf_writer& info(std::string_view name, const std::vector<std::uint64_t>& ne, std::uint32_t type, std::uint64_t offset) {
    infos.str(name).put(std::uint32_t(ne.size()));
    for (std::uint64_t e : ne) infos.put(e);
    infos.put(type).put(offset);
    ++tensor_count;
    return *this;
  }
  /// A tensor and its bytes.
  gguf_writer& tensor(std::string_view name, const std::vector<std::uint64_t>& ne, std::uint32_t type, const std::string& bytes) {
    data.append((alignment - data.size() % alignment) % alignment, '\0');
    info(name, ne, type, data.size());
    data += bytes;
    return *this;
  }
  std::string bytes() const {
    le_bytes out;
    out.out = "GGUF";
    out.put(version).put(tensor_count_written.value_or(tensor_count)).put(kv_count_written.value_or(kv_count));
    out.out += kv.out + infos.out;
    if (!data.empty()) out.out.append((alignment - out.out.size() % alignment) % alignment, '\0');
    return out.out + data;
  }
};

}  // namespace test
