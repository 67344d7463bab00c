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
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atomic_file.hpp"
#include "safetensors_header.hpp"
#include "tensor_store.hpp"

namespace luminal {

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
    throw checkpoint_error("luminal: " + origin + " has a bad step count '" + safetensors::excerpt(it->second) + "'");
  }
}
}  // namespace detail

namespace detail::safetensors {

/// The largest header accepted (the reference implementation's limit too).
inline constexpr std::uint64_t max_header_bytes = std::uint64_t(100) << 20;

/// JSON string literal for `text`, as serde_json and nlohmann::json write one: `"` and `\`
/// escaped, control characters as \b \f \n \r \t or \u00xx, every other byte as it is;
/// fails (naming `what`) on invalid UTF-8. Not nlohmann::json: for this one function, its
/// header was most of what every program that includes train.hpp parsed beyond xtensor,
/// and the compiler keeps every declaration it parses until the end.
inline std::string quote(const std::string& path, const std::string& text, std::string_view what) {
  if (invalid_utf8_at(text) != std::string_view::npos)
    fail(path, std::string(what) + " '" + text + "' is not valid UTF-8");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

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
inline void save_safetensors(const tensor_store& store, const std::string& path) {
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
///   - a header that is not a JSON object (or not UTF-8, or followed by anything but
///     whitespace), nests deeper than 127 levels, repeats a key (at the top, in
///     "__metadata__", or within a tensor), or has a "__metadata__" that is not an
///     object of strings (safetensors_header.hpp);
///   - a dtype other than F32, F64, I32, BOOL and I64 (which loads as i32, and is refused
///     when a value does not fit); a shape that is not a list of non-negative
///     integers, or whose byte size overflows; data_offsets that are not two integers
///     begin <= end, that run past the data, or whose length is not shape * dtype size;
///   - tensors that overlap or leave gaps: the tensors must tile the data section exactly.
///     Trailing bytes after the last tensor are refused (as the reference implementation
///     does), since they mean the file is not what its header says;
///   - a BOOL byte other than 0 or 1.
/// The header is read in one linear pass without recursion, and nothing is allocated
/// from its numbers before they are checked against the file's size, so a corrupt file
/// costs at most a small multiple of its own size in memory and time.
///
///     luminal::tensor_store store = luminal::load_safetensors("model.safetensors");
///     xt::xarray<float> w = store.get<float>("fc1.weight");
inline tensor_store load_safetensors(const std::string& path) {
  namespace st = detail::safetensors;
  const detail::files::status status = detail::files::inspect(path);
  using detail::files::entry_kind;
  if (status.kind == entry_kind::missing) st::fail(path, "file does not exist");
  if (status.error) st::fail(path, "cannot be looked up: " + st::errno_text(status.error));
  if (status.kind == entry_kind::directory) st::fail(path, "is a directory, not a safetensors file");
  if (status.kind != entry_kind::regular) st::fail(path, "is not a regular file");
  const std::uint64_t file_size = status.size;

  errno = 0;
  st::file_closer in{std::fopen(path.c_str(), "rb")};
  if (!in.file) {
    const int err = errno;
    st::fail(path, "cannot be opened: " + st::errno_text(err));
  }
  auto read_exact = [&](void* out, std::uint64_t bytes, auto what) {  // what(): the message, built on failure
    if (bytes && std::fread(out, 1, std::size_t(bytes), in.file) != bytes)
      st::fail(path, "could not read " + std::string(what()) + " (the file is shorter than its size said; was it changed while reading?)");
  };

  if (file_size < 8)
    st::fail(path, "is " + std::to_string(file_size) + " bytes long, too short for the 8-byte header length");
  unsigned char length_bytes[8];
  read_exact(length_bytes, 8, [] { return "the header length"; });
  std::uint64_t header_size = 0;
  for (int k = 7; k >= 0; --k) header_size = (header_size << 8) | length_bytes[k];
  if (header_size > file_size - 8)
    st::fail(path, "header length " + std::to_string(header_size) + " is larger than the rest of the file (" +
                       std::to_string(file_size - 8) + " bytes); the file is truncated or not a safetensors file");
  if (header_size > st::max_header_bytes)
    st::fail(path, "header length " + std::to_string(header_size) + " is over the limit of " +
                       std::to_string(st::max_header_bytes) + " bytes");
  if (header_size < 2) st::fail(path, "header length " + std::to_string(header_size) + " is too small for a JSON object");

  std::string text(std::size_t(header_size), '\0');
  read_exact(text.data(), header_size, [] { return "the header"; });
  const std::uint64_t data_size = file_size - 8 - header_size;
  st::header header = st::parse_header(text, data_size, path);
  text = std::string();  // the header's memory is not needed while the data is read

  // The tensors must tile the data: checked in the order of their offsets.
  const auto& items = header.tensors;
  std::vector<std::size_t> by_offset(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) by_offset[i] = i;
  std::sort(by_offset.begin(), by_offset.end(), [&](std::size_t a, std::size_t b) {
    return items[a].begin != items[b].begin ? items[a].begin < items[b].begin : items[a].end < items[b].end;
  });
  std::uint64_t covered = 0;
  const st::tensor_header* previous = nullptr;
  for (std::size_t i : by_offset) {
    const st::tensor_header& it = items[i];
    if (it.begin < covered)
      st::fail(path, "tensors '" + st::excerpt(previous->name) + "' and '" + st::excerpt(it.name) + "' overlap (bytes " +
                         std::to_string(it.begin) + " to " + std::to_string(covered) + ")");
    if (it.begin > covered)
      st::fail(path, "bytes " + std::to_string(covered) + " to " + std::to_string(it.begin) +
                         " of the data belong to no tensor (a gap before '" + st::excerpt(it.name) + "')");
    covered = it.end;
    previous = &it;
  }
  if (covered != data_size)
    st::fail(path, "has " + std::to_string(data_size - covered) + " trailing bytes after the last tensor (the header " +
                       "describes " + std::to_string(covered) + " bytes of data, the file holds " +
                       std::to_string(data_size) + ")");

  tensor_store store;
  store.metadata = std::move(header.metadata);
  for (std::size_t i : by_offset) {  // read in file order, stored by name
    st::tensor_header& it = header.tensors[i];
    tensor_store::entry& entry = it.entry;
    entry.data.resize(std::size_t(it.end - it.begin));
    read_exact(entry.data.data(), it.end - it.begin, [&] { return "the data of " + st::tensor_label(it.name); });
    if (it.narrowed_from_i64) st::narrow_i64(entry, it.name, path);
    if (entry.dtype == dtype_tag::boolean)
      for (std::size_t k = 0; k < entry.data.size(); ++k)
        if (entry.data[k] != std::byte{0} && entry.data[k] != std::byte{1})
          st::fail(path, st::tensor_label(it.name) + " (BOOL) has the byte " +
                             std::to_string(std::to_integer<int>(entry.data[k])) + " at element " + std::to_string(k) +
                             "; BOOL bytes must be 0 or 1");
  }
  for (st::tensor_header& it : header.tensors) store.insert(std::move(it.name), std::move(it.entry));
  return store;
}

}  // namespace luminal
