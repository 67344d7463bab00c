// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), the
// format PyTorch, JAX and Hugging Face use to exchange weights:
//
//   [8 bytes]  N, the header length, little-endian u64
//   [N bytes]  UTF-8 JSON: {"__metadata__": {"k": "v", ...},
//                           "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//              padded with spaces so that 8 + N is a multiple of 8
//   [rest]     the tensors' bytes, row-major, little-endian; data_offsets are [begin, end)
//              relative to the first byte after the header
//
// luminal reads and writes the dtypes F32, F64, I32 and BOOL (one byte, 0 or 1).
#pragma once
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tensor_store.hpp"

#if defined(_WIN32)
#include <process.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

namespace luminal {

/// A checkpoint could not be written, or a file is not a valid checkpoint. The message
/// names the file and what is wrong with it.
class checkpoint_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// The step count ("luminal.step") of a checkpoint that holds optimizer state, as
/// train_step and parameter_optimizer write it. Throws checkpoint_error naming `origin`
/// when it is missing or not a non-negative integer.
inline std::int64_t checkpoint_step_count(const tensor_store& values, const std::string& origin) {
  auto it = values.metadata.find("luminal.step");
  if (it == values.metadata.end())
    throw checkpoint_error("luminal: " + origin + " has optimizer state but no step count (luminal.step)");
  try {
    std::size_t used = 0;
    std::int64_t steps = std::stoll(it->second, &used);
    if (used != it->second.size() || steps < 0) throw std::invalid_argument("");
    return steps;
  } catch (const std::exception&) {
    throw checkpoint_error("luminal: " + origin + " has a bad step count '" + it->second + "'");
  }
}
}  // namespace detail

namespace detail::safetensors {

/// The largest header accepted (the reference implementation's limit too).
inline constexpr std::uint64_t max_header_bytes = std::uint64_t(100) << 20;

constexpr std::string_view format_dtype(dtype_tag tag) {
  switch (tag) {
    case dtype_tag::f32: return "F32";
    case dtype_tag::f64: return "F64";
    case dtype_tag::i32: return "I32";
    default: return "BOOL";
  }
}

inline bool parse_dtype(std::string_view name, dtype_tag& out) {
  if (name == "F32") out = dtype_tag::f32;
  else if (name == "F64") out = dtype_tag::f64;
  else if (name == "I32") out = dtype_tag::i32;
  else if (name == "BOOL") out = dtype_tag::boolean;
  else return false;
  return true;
}

/// safetensors dtypes that are valid in the format but that luminal does not hold.
inline bool known_other_dtype(std::string_view name) {
  static constexpr std::string_view others[] = {"F16", "BF16", "F8_E4M3", "F8_E5M2", "I8", "I16", "I64",
                                                "U8",  "U16",  "U32",     "U64",     "C64"};
  return std::find(std::begin(others), std::end(others), name) != std::end(others);
}

[[noreturn]] inline void fail(const std::filesystem::path& path, const std::string& what) {
  throw checkpoint_error("luminal: checkpoint '" + path.string() + "': " + what);
}

inline std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// JSON string literal for `text`; fails (naming `what`) on invalid UTF-8.
inline std::string quote(const std::filesystem::path& path, const std::string& text, std::string_view what) {
  try {
    return nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    fail(path, std::string(what) + " '" + text + "' is not valid UTF-8");
  }
}

/// Closes a FILE* on scope exit.
struct file_closer {
  std::FILE* file = nullptr;
  ~file_closer() {
    if (file) std::fclose(file);
  }
};

/// A temporary file next to the target that is removed unless commit() renamed it.
class temp_file {
 public:
  explicit temp_file(const std::filesystem::path& target) : target_(target) {
    static std::atomic<unsigned long> counter{0};
#if defined(_WIN32)
    const long pid = long(_getpid());
#else
    const long pid = long(::getpid());
#endif
    for (int attempt = 0; attempt < 64; ++attempt) {
      path_ = target;
      path_ += ".tmp-" + std::to_string(pid) + "-" + std::to_string(counter.fetch_add(1));
      errno = 0;
      file_ = std::fopen(path_.string().c_str(), "wbx");  // "x": fail if it exists
      if (file_) return;
      if (errno != EEXIST) {
        const int err = errno;
        fail(target, "cannot create the temporary file '" + path_.string() + "': " + errno_text(err));
      }
    }
    fail(target, "cannot create a temporary file next to it (all names taken)");
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() {
    if (file_) std::fclose(file_);
    if (!committed_) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }

  void write(const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) {
      const int err = errno;
      fail(target_, "writing '" + path_.string() + "' failed: " + errno_text(err));
    }
  }

  /// Flushes, syncs and closes the temporary file, then renames it over the target.
  void commit() {
    if (std::fflush(file_) != 0) {
      const int err = errno;
      fail(target_, "writing '" + path_.string() + "' failed: " + errno_text(err));
    }
#if !defined(_WIN32)
    if (::fsync(::fileno(file_)) != 0) {
      const int err = errno;
      fail(target_, "fsync of '" + path_.string() + "' failed: " + errno_text(err));
    }
#endif
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) {
      const int err = errno;
      fail(target_, "closing '" + path_.string() + "' failed: " + errno_text(err));
    }
    std::error_code ec;
    std::filesystem::rename(path_, target_, ec);
    if (ec) fail(target_, "cannot replace it with the new file: " + ec.message());
    committed_ = true;
#if !defined(_WIN32)
    // Make the rename itself durable (best effort: not every file system allows it).
    std::filesystem::path dir = target_.parent_path();
    if (dir.empty()) dir = ".";
    int fd = ::open(dir.string().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      (void)::fsync(fd);
      ::close(fd);
    }
#endif
  }

 private:
  std::filesystem::path target_;
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace detail::safetensors

/// Writes `store` to `path` as a safetensors file, atomically: the data goes to a temporary
/// file in the same directory (`<path>.tmp-<pid>-<n>`), which is synced and then renamed
/// over `path`. On any failure the temporary file is removed, an existing file at `path`
/// is left untouched, and checkpoint_error is thrown.
///
///     luminal::tensor_store store;
///     store.set("fc1.weight", weights);
///     store.metadata["step"] = "1000";
///     luminal::save_safetensors(store, "ckpt/model.safetensors");
///
/// Tensors are laid out by element size (8-byte, then 4-byte, then 1-byte types), by name
/// within each size, so that every tensor is aligned to its element size in the file. The
/// header is compact JSON with "__metadata__" first (omitted when empty), then the
/// tensors in layout order, padded with spaces to a multiple of 8 bytes.
inline void save_safetensors(const tensor_store& store, const std::filesystem::path& path) {
  namespace st = detail::safetensors;
  using item = std::pair<const std::string, tensor_store::entry>;
  std::vector<const item*> order;
  order.reserve(store.size());
  for (const item& kv : store) order.push_back(&kv);
  std::stable_sort(order.begin(), order.end(), [](const item* a, const item* b) {
    return dtype_size(a->second.dtype) > dtype_size(b->second.dtype);
  });

  std::string header = "{";
  bool first = true;
  if (!store.metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : store.metadata) {
      if (!first) header += ',';
      first = false;
      header += st::quote(path, key, "metadata key");
      header += ':';
      header += st::quote(path, value, "the value of metadata key '" + key + "',");
    }
    header += '}';
    first = false;
  }
  std::uint64_t offset = 0;
  for (const item* kv : order) {
    const auto& [name, e] = *kv;
    if (name == "__metadata__") st::fail(path, "a tensor may not be named '__metadata__' (reserved by the format)");
    if (e.data.size() != e.element_count() * dtype_size(e.dtype))
      st::fail(path, "tensor '" + name + "' holds " + std::to_string(e.data.size()) + " bytes, which does not match its shape");
    if (!first) header += ',';
    first = false;
    header += st::quote(path, name, "tensor name");
    header += ":{\"dtype\":\"";
    header += st::format_dtype(e.dtype);
    header += "\",\"shape\":[";
    for (std::size_t k = 0; k < e.shape.size(); ++k) {
      if (k) header += ',';
      header += std::to_string(e.shape[k]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += e.data.size();
    header += std::to_string(offset) + "]}";
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  unsigned char length[8];
  for (int k = 0; k < 8; ++k) length[k] = static_cast<unsigned char>(std::uint64_t(header.size()) >> (8 * k));

  st::temp_file out(path);
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (const item* kv : order) out.write(kv->second.data.data(), kv->second.data.size());
  out.commit();
}

/// Reads a safetensors file written by luminal, PyTorch (safetensors.torch.save_file), or
/// any other conforming writer. Throws checkpoint_error naming the file and the problem
/// when the file is missing or not valid:
///   - shorter than 8 bytes, header length past the end of the file or over 100 MiB;
///   - header not a JSON object (or not UTF-8), a duplicated key, a "__metadata__" that is
///     not an object of strings;
///   - a dtype other than F32, F64, I32, BOOL; a shape that is not a list of non-negative
///     integers, or whose byte size overflows; data_offsets that are not two integers
///     begin <= end, that run past the data, or whose length is not shape * dtype size;
///   - tensors that overlap or leave gaps: the tensors must tile the data section exactly.
///     Trailing bytes after the last tensor are refused (as the reference implementation
///     does), since they mean the file is not what its header says;
///   - a BOOL byte other than 0 or 1.
/// Nothing is allocated from the header's numbers before they are checked against the
/// file's size, so a corrupt file costs at most about its own size in memory.
///
///     luminal::tensor_store store = luminal::load_safetensors("model.safetensors");
///     xt::xarray<float> w = store.get<float>("fc1.weight");
inline tensor_store load_safetensors(const std::filesystem::path& path) {
  namespace st = detail::safetensors;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) st::fail(path, "file does not exist");
  if (fs::is_directory(status)) st::fail(path, "is a directory, not a safetensors file");
  if (!fs::is_regular_file(status)) st::fail(path, "is not a regular file");
  const std::uint64_t file_size = fs::file_size(path, ec);
  if (ec) st::fail(path, "cannot read its size: " + ec.message());

  errno = 0;
  st::file_closer in{std::fopen(path.string().c_str(), "rb")};
  if (!in.file) {
    const int err = errno;
    st::fail(path, "cannot be opened: " + st::errno_text(err));
  }
  auto read_exact = [&](void* out, std::uint64_t bytes, const char* what) {
    if (bytes && std::fread(out, 1, std::size_t(bytes), in.file) != bytes)
      st::fail(path, std::string("could not read ") + what + " (the file is shorter than its size said; was it changed while reading?)");
  };

  if (file_size < 8)
    st::fail(path, "is " + std::to_string(file_size) + " bytes long, too short for the 8-byte header length");
  unsigned char length_bytes[8];
  read_exact(length_bytes, 8, "the header length");
  std::uint64_t header_size = 0;
  for (int k = 7; k >= 0; --k) header_size = (header_size << 8) | length_bytes[k];
  if (header_size > file_size - 8)
    st::fail(path, "header length " + std::to_string(header_size) + " is larger than the rest of the file (" +
                       std::to_string(file_size - 8) + " bytes); the file is truncated or not a safetensors file");
  if (header_size > st::max_header_bytes)
    st::fail(path, "header length " + std::to_string(header_size) + " is over the limit of " +
                       std::to_string(st::max_header_bytes) + " bytes");
  if (header_size < 2) st::fail(path, "header length " + std::to_string(header_size) + " is too small for a JSON object");

  std::string header(std::size_t(header_size), '\0');
  read_exact(header.data(), header_size, "the header");
  if (header[0] != '{') st::fail(path, "header does not start with '{'; this is not a safetensors file");

  std::set<std::string, std::less<>> seen;
  std::string duplicate;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(
        header, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
              !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
            duplicate = parsed.get<std::string>();
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    st::fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!json.is_object()) st::fail(path, "header is not a JSON object");
  if (!duplicate.empty()) st::fail(path, "header has the key '" + duplicate + "' more than once");

  const std::uint64_t data_size = file_size - 8 - header_size;
  struct item {
    std::string name;
    tensor_store::entry entry;
    std::uint64_t begin = 0, end = 0;
  };
  std::vector<item> items;
  items.reserve(json.size());
  tensor_store store;

  for (auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) st::fail(path, "\"__metadata__\" is not a JSON object");
      for (auto& [key, text] : value.items()) {
        if (!text.is_string()) st::fail(path, "\"__metadata__\" value of '" + key + "' is not a string");
        store.metadata.emplace(key, text.get<std::string>());
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object()) st::fail(path, where + " is not described by a JSON object");
    item it;
    it.name = name;

    auto dtype = value.find("dtype");
    if (dtype == value.end()) st::fail(path, where + " has no \"dtype\"");
    if (!dtype->is_string()) st::fail(path, where + ": \"dtype\" is not a string");
    const std::string dtype_text = dtype->get<std::string>();
    if (!st::parse_dtype(dtype_text, it.entry.dtype)) {
      if (st::known_other_dtype(dtype_text))
        st::fail(path, where + " has dtype " + dtype_text + ", which luminal does not support (F32, F64, I32, BOOL)");
      st::fail(path, where + " has unknown dtype '" + dtype_text + "'");
    }
    const std::uint64_t element_bytes = dtype_size(it.entry.dtype);

    auto shape = value.find("shape");
    if (shape == value.end()) st::fail(path, where + " has no \"shape\"");
    if (!shape->is_array()) st::fail(path, where + ": \"shape\" is not a list");
    std::uint64_t bytes = element_bytes;
    bool overflow = false;
    for (std::size_t k = 0; k < shape->size(); ++k) {
      const auto& extent = (*shape)[k];
      if (!extent.is_number_unsigned() ||
          extent.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<index_t>::max()))
        st::fail(path, where + ": shape[" + std::to_string(k) + "] is " + extent.dump() +
                           "; extents must be non-negative integers");
      const std::uint64_t e = extent.get<std::uint64_t>();
      if (e != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / e) overflow = true;
      bytes *= e;
      it.entry.shape.push_back(index_t(e));
    }
    if (overflow) st::fail(path, where + ": shape " + shape->dump() + " is too large (its byte size overflows)");

    auto offsets = value.find("data_offsets");
    if (offsets == value.end()) st::fail(path, where + " has no \"data_offsets\"");
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      st::fail(path, where + ": \"data_offsets\" " + offsets->dump() + " is not two non-negative integers");
    it.begin = (*offsets)[0].get<std::uint64_t>();
    it.end = (*offsets)[1].get<std::uint64_t>();
    const std::string range = "[" + std::to_string(it.begin) + ", " + std::to_string(it.end) + "]";
    if (it.begin > it.end) st::fail(path, where + ": data_offsets " + range + " end before they begin");
    if (it.end > data_size)
      st::fail(path, where + ": data_offsets " + range + " run past the end of the data (" +
                         std::to_string(data_size) + " bytes after the header)");
    if (it.end - it.begin != bytes)
      st::fail(path, where + ": data_offsets " + range + " hold " + std::to_string(it.end - it.begin) +
                         " bytes, but shape " + shape->dump() + " of " + dtype_text + " needs " + std::to_string(bytes));
    items.push_back(std::move(it));
  }

  std::sort(items.begin(), items.end(),
            [](const item& a, const item& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t covered = 0;
  const item* previous = nullptr;
  for (const item& it : items) {
    if (it.begin < covered)
      st::fail(path, "tensors '" + previous->name + "' and '" + it.name + "' overlap (bytes " +
                         std::to_string(it.begin) + " to " + std::to_string(covered) + ")");
    if (it.begin > covered)
      st::fail(path, "bytes " + std::to_string(covered) + " to " + std::to_string(it.begin) +
                         " of the data belong to no tensor (a gap before '" + it.name + "')");
    covered = it.end;
    previous = &it;
  }
  if (covered != data_size)
    st::fail(path, "has " + std::to_string(data_size - covered) + " trailing bytes after the last tensor (the header " +
                       "describes " + std::to_string(covered) + " bytes of data, the file holds " +
                       std::to_string(data_size) + ")");

  for (item& it : items) {
    it.entry.data.resize(std::size_t(it.end - it.begin));
    read_exact(it.entry.data.data(), it.end - it.begin, ("the data of tensor '" + it.name + "'").c_str());
    if (it.entry.dtype == dtype_tag::boolean)
      for (std::size_t i = 0; i < it.entry.data.size(); ++i)
        if (it.entry.data[i] != std::byte{0} && it.entry.data[i] != std::byte{1})
          st::fail(path, "tensor '" + it.name + "' (BOOL) has the byte " +
                             std::to_string(std::to_integer<int>(it.entry.data[i])) + " at element " +
                             std::to_string(i) + "; BOOL bytes must be 0 or 1");
    store.insert(std::move(it.name), std::move(it.entry));
  }
  return store;
}

}  // namespace luminal
