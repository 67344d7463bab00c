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
#include <map>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocation_error.hpp"
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

/// What a reader expects of one tensor of a safetensors file: load_safetensors(path,
/// expected) checks every one against the header before it reads any data.
struct tensor_spec {
  std::string name;
  dtype_tag dtype = dtype_tag::f32;
  std::vector<index_t> shape;
  /// false: loaded when the file has it, else left out (an optimizer's state, which a
  /// file of parameters alone does not hold).
  bool required = true;
};

/// What load_safetensors(path, expected, ...) does with a tensor that no spec names.
enum class other_tensors {
  refuse,  ///< the file is another model's (more layers, say): checkpoint_error naming it
  skip     ///< not read (a pooler the model does not use)
};

/// A safetensors file's header without its data: the metadata and each tensor's name,
/// element type and shape (as tensor_specs), and the bytes of data the tensors hold.
struct safetensors_header {
  std::map<std::string, std::string, std::less<>> metadata;
  std::vector<tensor_spec> tensors;  // sorted by name
  std::uint64_t data_bytes = 0;
};

namespace detail::safetensors {

/// The physical memory of this machine in bytes, or 0 where it cannot be asked.
inline std::uint64_t physical_memory_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) return std::uint64_t(pages) * std::uint64_t(page);
#endif
  return 0;
}

/// An open safetensors file whose header is read and checked (also that the tensors tile
/// the data section exactly); the data is not read yet.
struct opened_file {
  file_closer in;
  header parsed;
  std::uint64_t data_start = 0, data_size = 0;
  std::vector<std::size_t> by_offset;  // indices into parsed.tensors, in file order
};

inline void open_and_check(const std::string& path, opened_file& out) {
  const files::status status = files::inspect(path);
  using files::entry_kind;
  if (status.kind == entry_kind::missing) fail(path, "file does not exist");
  if (status.error) fail(path, "cannot be looked up: " + errno_text(status.error));
  if (status.kind == entry_kind::directory) fail(path, "is a directory, not a safetensors file");
  if (status.kind != entry_kind::regular) fail(path, "is not a regular file");
  const std::uint64_t file_size = status.size;

  errno = 0;
  out.in.file = std::fopen(path.c_str(), "rb");
  if (!out.in.file) {
    const int err = errno;
    fail(path, "cannot be opened: " + errno_text(err));
  }
  auto read_exact = [&](void* to, std::uint64_t bytes, const char* what) {
    if (bytes && std::fread(to, 1, std::size_t(bytes), out.in.file) != bytes)
      fail(path, "could not read " + std::string(what) +
                     " (the file is shorter than its size said; was it changed while reading?)");
  };
  if (file_size < 8)
    fail(path, "is " + std::to_string(file_size) + " bytes long, too short for the 8-byte header length");
  unsigned char length_bytes[8];
  read_exact(length_bytes, 8, "the header length");
  std::uint64_t header_size = 0;
  for (int k = 7; k >= 0; --k) header_size = (header_size << 8) | length_bytes[k];
  if (header_size > file_size - 8)
    fail(path, "header length " + std::to_string(header_size) + " is larger than the rest of the file (" +
                   std::to_string(file_size - 8) + " bytes); the file is truncated or not a safetensors file");
  if (header_size > max_header_bytes)
    fail(path, "header length " + std::to_string(header_size) + " is over the limit of " +
                   std::to_string(max_header_bytes) + " bytes");
  if (header_size < 2) fail(path, "header length " + std::to_string(header_size) + " is too small for a JSON object");

  std::string text(std::size_t(header_size), '\0');
  read_exact(text.data(), header_size, "the header");
  out.data_start = 8 + header_size;
  out.data_size = file_size - 8 - header_size;
  out.parsed = parse_header(text, out.data_size, path);

  // The tensors must tile the data: checked in the order of their offsets.
  const auto& items = out.parsed.tensors;
  out.by_offset.resize(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) out.by_offset[i] = i;
  std::sort(out.by_offset.begin(), out.by_offset.end(), [&](std::size_t a, std::size_t b) {
    return items[a].begin != items[b].begin ? items[a].begin < items[b].begin : items[a].end < items[b].end;
  });
  std::uint64_t covered = 0;
  const tensor_header* previous = nullptr;
  for (std::size_t i : out.by_offset) {
    const tensor_header& it = items[i];
    if (it.begin < covered)
      fail(path, "tensors '" + excerpt(previous->name) + "' and '" + excerpt(it.name) + "' overlap (bytes " +
                     std::to_string(it.begin) + " to " + std::to_string(covered) + ")");
    if (it.begin > covered)
      fail(path, "bytes " + std::to_string(covered) + " to " + std::to_string(it.begin) +
                     " of the data belong to no tensor (a gap before '" + excerpt(it.name) + "')");
    covered = it.end;
    previous = &it;
  }
  if (covered != out.data_size)
    fail(path, "has " + std::to_string(out.data_size - covered) + " trailing bytes after the last tensor (the header " +
                   "describes " + std::to_string(covered) + " bytes of data, the file holds " +
                   std::to_string(out.data_size) + ")");
}

/// "f32 [2, 3]".
inline std::string describe(dtype_tag dtype, const std::vector<index_t>& shape) {
  return std::string(dtype_name(dtype)) + " " + format_shape(shape);
}

/// Reads the data of the tensors of `file` marked in `wanted` (by index into
/// parsed.tensors) into a store, after checking that their bytes fit in memory.
inline tensor_store read_tensors(const std::string& path, opened_file& file, const std::vector<bool>& wanted) {
  auto& items = file.parsed.tensors;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (wanted[i]) total += items[i].end - items[i].begin;
  if (const std::uint64_t memory = physical_memory_bytes(); memory != 0 && total > memory)
    fail(path, "holds " + allocation_error::describe_bytes(std::size_t(total)) +
                   " of tensors to read, more than this machine's memory (" +
                   allocation_error::describe_bytes(std::size_t(memory)) + ")");
  tensor_store store;
  store.metadata = std::move(file.parsed.metadata);
  std::uint64_t position = file.data_start;  // where the stream is
  for (std::size_t i : file.by_offset) {  // read in file order, stored by name
    if (!wanted[i]) continue;
    tensor_header& it = items[i];
    tensor_store::entry& entry = it.entry;
    const std::uint64_t bytes = it.end - it.begin;
    try {
      entry.data.resize(std::size_t(bytes));
    } catch (const std::bad_alloc&) {
      throw checkpoint_error("luminal: checkpoint '" + path + "': cannot allocate " +
                             allocation_error::describe_bytes(std::size_t(bytes)) + " for " + tensor_label(it.name));
    }
    if (file.data_start + it.begin != position) {
#if defined(_WIN32)
      const int moved = ::_fseeki64(file.in.file, std::int64_t(file.data_start + it.begin), SEEK_SET);
#else
      const int moved = ::fseeko(file.in.file, off_t(file.data_start + it.begin), SEEK_SET);
#endif
      if (moved != 0)
        fail(path, "cannot seek to the data of " + tensor_label(it.name));
    }
    if (bytes && std::fread(entry.data.data(), 1, std::size_t(bytes), file.in.file) != bytes)
      fail(path, "could not read the data of " + tensor_label(it.name) +
                     " (the file is shorter than its size said; was it changed while reading?)");
    position = file.data_start + it.end;
    if (it.narrowed_from_i64) narrow_i64(entry, it.name, path);
    if (entry.dtype == dtype_tag::boolean)
      for (std::size_t k = 0; k < entry.data.size(); ++k)
        if (entry.data[k] != std::byte{0} && entry.data[k] != std::byte{1})
          fail(path, tensor_label(it.name) + " (BOOL) has the byte " + std::to_string(std::to_integer<int>(entry.data[k])) +
                         " at element " + std::to_string(k) + "; BOOL bytes must be 0 or 1");
  }
  for (std::size_t i = 0; i < items.size(); ++i)
    if (wanted[i]) store.insert(std::move(items[i].name), std::move(items[i].entry));
  return store;
}

}  // namespace detail::safetensors

/// Reads a safetensors file written by luminal, PyTorch (safetensors.torch.save_file), or
/// any other conforming writer. Throws checkpoint_error naming the file and the problem
/// when the file is missing or not valid:
///   - shorter than 8 bytes, header length past the end of the file or over 100 MiB;
///   - a header that is not a JSON object (or not UTF-8, or followed by anything but
///     whitespace), nests deeper than 127 levels, repeats a key (at the top, in
///     "__metadata__", or within a tensor), or has a "__metadata__" that is not an
///     object of strings (safetensors_header.hpp);
///   - a dtype other than F32, F64, BF16, F16, I32, BOOL and I64 (which loads as i32, and is refused
///     when a value does not fit); a shape that is not a list of non-negative
///     integers, or whose byte size overflows; data_offsets that are not two integers
///     begin <= end, that run past the data, or whose length is not shape * dtype size;
///   - tensors that overlap or leave gaps: the tensors must tile the data section exactly.
///     Trailing bytes after the last tensor are refused (as the reference implementation
///     does), since they mean the file is not what its header says;
///   - a BOOL byte other than 0 or 1;
///   - tensors whose bytes together exceed this machine's memory, or one whose memory
///     cannot be allocated (the message names the tensor and its size).
/// The header is read in one linear pass without recursion, and nothing is allocated
/// from its numbers before they are checked against the file's size, so a corrupt file
/// costs at most a small multiple of its own size in memory and time.
///
///     luminal::tensor_store store = luminal::load_safetensors("model.safetensors");
///     xt::xarray<float> w = store.get<float>("fc1.weight");
inline tensor_store load_safetensors(const std::string& path) {
  detail::safetensors::opened_file file;
  detail::safetensors::open_and_check(path, file);
  return detail::safetensors::read_tensors(path, file, std::vector<bool>(file.parsed.tensors.size(), true));
}

/// load_safetensors for a model that knows what it needs: every tensor of `expected` is
/// checked against the header (present if required, with its element type and shape), and
/// so is every tensor of the file that no spec names (`others`: refused, or skipped),
/// before any tensor's data is read, so a file that will be refused costs only its header.
/// Only the tensors named in `expected` are read. The messages name the file and the tensor:
///     checkpoint 'gpt.st': has no tensor 'h.1.ln1.weight', which the model needs (f32 [128])
///     checkpoint 'gpt.st': holds 'wte.weight' as f32 [256, 64], but the model's is f32 [256, 128]
///     checkpoint 'gpt.st': holds 'h.2.ln1.weight', which the model does not have (and 15 more)
///
///     std::vector<tensor_spec> specs{{"fc.weight", dtype_tag::f32, {3, 4}}, {"fc.bias", dtype_tag::f32, {3}}};
///     tensor_store weights = load_safetensors("fc.safetensors", specs);
inline tensor_store load_safetensors(const std::string& path, std::span<const tensor_spec> expected,
                                     other_tensors others = other_tensors::refuse) {
  namespace st = detail::safetensors;
  st::opened_file file;
  st::open_and_check(path, file);
  const auto& items = file.parsed.tensors;  // sorted by name
  auto find = [&](std::string_view name) -> std::ptrdiff_t {
    auto it = std::lower_bound(items.begin(), items.end(), name,
                               [](const st::tensor_header& t, std::string_view n) { return t.name < n; });
    return it != items.end() && it->name == name ? it - items.begin() : -1;
  };
  std::vector<bool> wanted(items.size(), false);
  for (const tensor_spec& spec : expected) {
    const std::ptrdiff_t i = find(spec.name);
    if (i < 0) {
      if (!spec.required) continue;
      st::fail(path, "has no tensor '" + st::excerpt(spec.name) + "', which the model needs (" +
                         st::describe(spec.dtype, spec.shape) + ")");
    }
    const tensor_store::entry& e = items[std::size_t(i)].entry;
    if (e.dtype != spec.dtype || e.shape != spec.shape)
      st::fail(path, "holds '" + st::excerpt(spec.name) + "' as " + st::describe(e.dtype, e.shape) +
                         ", but the model's is " + st::describe(spec.dtype, spec.shape));
    wanted[std::size_t(i)] = true;
  }
  if (others == other_tensors::refuse) {
    std::size_t unknown = 0, first = 0;
    for (std::size_t i = 0; i < items.size(); ++i)
      if (!wanted[i] && std::none_of(expected.begin(), expected.end(),
                                     [&](const tensor_spec& s) { return s.name == items[i].name; }))
        first = unknown++ == 0 ? i : first;
    if (unknown > 0)
      st::fail(path, "holds '" + st::excerpt(items[first].name) + "', which the model does not have" +
                         (unknown > 1 ? " (and " + std::to_string(unknown - 1) + " more)" : std::string()) +
                         ": it was saved from another model");
  }
  return st::read_tensors(path, file, wanted);
}

/// The header of a safetensors file: its metadata and its tensors' names, element types
/// and shapes, checked as load_safetensors checks them, without reading any tensor data.
///     auto header = luminal::read_safetensors_header("gpt.safetensors");
///     if (header.metadata.contains("run.layers")) ...
inline safetensors_header read_safetensors_header(const std::string& path) {
  detail::safetensors::opened_file file;
  detail::safetensors::open_and_check(path, file);
  safetensors_header out;
  out.metadata = std::move(file.parsed.metadata);
  out.data_bytes = file.data_size;
  out.tensors.reserve(file.parsed.tensors.size());
  for (auto& t : file.parsed.tensors) out.tensors.push_back({std::move(t.name), t.entry.dtype, std::move(t.entry.shape)});
  return out;
}

/// Removes the temporary files that saves to `path` left behind when they were killed
/// ("<path>.tmp-<pid>-<n>" of processes that no longer run; a save in progress is never
/// touched), and returns how many. save_safetensors does this before it writes; a program
/// that resumes from `path` calls it at start, so that a resume that fails leaves no
/// debris either. Errors are ignored.
inline std::size_t remove_interrupted_saves(const std::string& path) {
  return detail::safetensors::remove_stale_temp_files(path);
}

}  // namespace luminal
