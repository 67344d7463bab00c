// The header of a safetensors file (io/safetensors.hpp): its JSON read into tensor entries
// and metadata, every number checked as a scalar against the dtype and the data size.
// As strict as the reference implementation (Rust safetensors with serde_json), and
// stricter only where the reference silently keeps the last of two equal keys: a key
// appearing twice at the top, in "__metadata__", or a "dtype", "shape" or "data_offsets"
// appearing twice in one tensor is refused. Other keys in a tensor's object are ignored,
// as the reference ignores them. After the object only whitespace may follow (the
// writers pad with spaces); NUL padding is refused.
//
//     auto h = luminal::detail::safetensors::parse_header(text, data_bytes, "model.safetensors");
//     for (const auto& t : h.tensors) use(t.name, t.entry.dtype, t.entry.shape, t.begin, t.end);
//
// F16 and BF16 load as luminal's f16 and bf16 (core/half_types.hpp); a caller that reads
// them itself gets them marked instead (half_floats::accept, as io/safetensors_mapped.hpp
// does for models whose kernels take half-precision weights as they lie).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "safetensors_json.hpp"
#include "tensor_store.hpp"

namespace luminal::detail::safetensors {

constexpr std::string_view format_dtype(dtype_tag tag) {
  switch (tag) {
    case dtype_tag::f32: return "F32";
    case dtype_tag::f64: return "F64";
    case dtype_tag::i32: return "I32";
    case dtype_tag::bf16: return "BF16";
    case dtype_tag::f16: return "F16";
    default: return "BOOL";
  }
}

inline bool parse_dtype(std::string_view name, dtype_tag& out) {
  if (name == "F32") out = dtype_tag::f32;
  else if (name == "F64") out = dtype_tag::f64;
  else if (name == "I32") out = dtype_tag::i32;
  else if (name == "BOOL") out = dtype_tag::boolean;
  else if (name == "BF16") out = dtype_tag::bf16;
  else if (name == "F16") out = dtype_tag::f16;
  else return false;
  return true;
}

/// safetensors dtypes that are valid in the format but that luminal does not hold.
inline bool known_other_dtype(std::string_view name) {
  static constexpr std::string_view others[] = {"F8_E4M3", "F8_E5M2", "I8", "I16", "U8", "U16", "U32", "U64", "C64"};
  return std::find(std::begin(others), std::end(others), name) != std::end(others);
}

/// Whether parse_header marks F16 and BF16 tensors as half_float (their entry's dtype left
/// f32, for a caller that reads their bytes itself) or reads them as dtype_tag::f16 and
/// dtype_tag::bf16, as load_safetensors does.
enum class half_floats { as_elements, accept };

/// A half-precision dtype of the file (only with half_floats::accept).
enum class half_float : std::uint8_t { none, f16, bf16 };

/// One tensor's entry of the header, already checked against its dtype and the data size.
/// `entry` holds the dtype and the shape; the loader fills in its data.
struct tensor_header {
  std::string name;
  tensor_store::entry entry;
  std::uint64_t begin = 0, end = 0;  // data_offsets, relative to the data section
  bool narrowed_from_i64 = false;    // I64 in the file, held as i32 (the loader narrows it)
  half_float half = half_float::none;  // F16 or BF16 in the file; entry.dtype then says f32
};

struct header {
  std::map<std::string, std::string, std::less<>> metadata;
  std::vector<tensor_header> tensors;
};

/// "[2, 3]" for messages; at most 16 extents are shown.
inline std::string format_shape(const std::vector<index_t>& shape) {
  std::string out = "[";
  for (std::size_t k = 0; k < shape.size() && k < 16; ++k) out += (k ? ", " : "") + std::to_string(shape[k]);
  if (shape.size() > 16) out += ", ... (" + std::to_string(shape.size()) + " extents)";
  return out + "]";
}

/// "tensor 'name'", the name cut to a readable length.
inline std::string tensor_label(std::string_view name) { return "tensor '" + excerpt(name) + "'"; }

/// Reads one tensor's object (the scanner is before its '{'). Messages are built only
/// when something is wrong: this runs once per tensor of headers with a million of them.
inline tensor_header read_tensor(json_scanner& scan, std::string name, std::uint64_t data_size,
                                 half_floats halves = half_floats::as_elements) {
  auto where = [&] { return tensor_label(name); };
  if (scan.peek_value() != '{') scan.fail_here(where() + " is not described by a JSON object");
  scan.open('{');
  tensor_header t;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  std::string dtype_text;
  std::uint64_t offsets[2] = {0, 0};
  auto once = [&](bool& seen, const char* key) {
    if (seen) scan.fail_here(where() + " has \"" + std::string(key) + "\" more than once");
    seen = true;
  };
  std::string key;
  if (!scan.close_if_empty()) do {
      scan.read_string_into(key);
      scan.expect(':');
      if (key == "dtype") {
        once(has_dtype, "dtype");
        if (scan.peek_value() != '"') scan.fail_here(where() + ": \"dtype\" is not a string");
        scan.read_string_into(dtype_text);
        // PyTorch stores integer buffers (position ids, counters) as I64: they load as i32
        // when every value fits, which the loader checks.
        t.narrowed_from_i64 = dtype_text == "I64";
        if (t.narrowed_from_i64) {
          t.entry.dtype = dtype_tag::i32;
        } else if (halves == half_floats::accept && (dtype_text == "F16" || dtype_text == "BF16")) {
          t.half = dtype_text == "F16" ? half_float::f16 : half_float::bf16;
        } else if (!parse_dtype(dtype_text, t.entry.dtype)) {
          if (known_other_dtype(dtype_text))
            scan.fail_here(where() + " has dtype " + dtype_text +
                           ", which luminal does not support (F32, F64, BF16, F16, I32, BOOL, and I64 read as I32)");
          scan.fail_here(where() + " has unknown dtype '" + excerpt(dtype_text) + "'");
        }
      } else if (key == "shape") {
        once(has_shape, "shape");
        if (scan.peek_value() != '[') scan.fail_here(where() + ": \"shape\" is not a list");
        scan.open('[');
        if (!scan.close_if_empty()) do {
            std::uint64_t extent = 0;
            if (!scan.read_unsigned(extent, std::uint64_t(std::numeric_limits<index_t>::max())) && scan.peek_value())
              scan.fail_here(where() + ": shape[" + std::to_string(t.entry.shape.size()) + "] is " + scan.next_token_text() +
                             "; extents must be non-negative integers");
            t.entry.shape.push_back(index_t(extent));
          } while (scan.next_member());
      } else if (key == "data_offsets") {
        once(has_offsets, "data_offsets");
        auto wrong = [&] { return where() + ": \"data_offsets\" is not two non-negative integers"; };
        if (scan.peek_value() != '[') scan.fail_here(wrong() + " (found " + scan.next_token_text() + ")");
        scan.open('[');
        for (int k = 0; k < 2; ++k) {
          // (an empty list is valid JSON, a ']' after a ',' is not)
          if (!scan.read_unsigned(offsets[k], std::numeric_limits<std::uint64_t>::max()) &&
              ((k == 0 && scan.peek() == ']') || scan.peek_value()))
            scan.fail_here(wrong() + " (element " + std::to_string(k) + " is " + scan.next_token_text() + ")");
          if (scan.next_member() != (k == 0))
            scan.fail_here(wrong() + (k == 0 ? " (it has one element)" : " (it has more than two)"));
        }
      } else {
        scan.skip_value();
      }
    } while (scan.next_member());

  if (!has_dtype) scan.fail_here(where() + " has no \"dtype\"");
  if (!has_shape) scan.fail_here(where() + " has no \"shape\"");
  if (!has_offsets) scan.fail_here(where() + " has no \"data_offsets\"");
  std::uint64_t bytes = t.narrowed_from_i64 ? 8 : t.half != half_float::none ? 2 : dtype_size(t.entry.dtype);
  for (index_t extent : t.entry.shape) {
    const auto e = std::uint64_t(extent);
    if (e != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / e)
      scan.fail_here(where() + ": shape " + format_shape(t.entry.shape) + " is too large (its byte size overflows)");
    bytes *= e;
  }
  t.begin = offsets[0];
  t.end = offsets[1];
  auto range = [&] { return "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]"; };
  if (t.begin > t.end) scan.fail_here(where() + ": data_offsets " + range() + " end before they begin");
  if (t.end > data_size)
    scan.fail_here(where() + ": data_offsets " + range() + " run past the end of the data (" + std::to_string(data_size) +
                   " bytes after the header)");
  if (t.end - t.begin != bytes)
    scan.fail_here(where() + ": data_offsets " + range() + " hold " + std::to_string(t.end - t.begin) + " bytes, but shape " +
                   format_shape(t.entry.shape) + " of " + dtype_text + " needs " + std::to_string(bytes));
  t.name = std::move(name);
  return t;
}

/// Reads "__metadata__"'s value (the scanner is before it): null, or an object of strings.
inline void read_metadata(json_scanner& scan, std::map<std::string, std::string, std::less<>>& metadata) {
  if (scan.peek_value() == 'n') {
    scan.skip_value();  // checks that it is the literal null
    return;
  }
  if (scan.peek() != '{') scan.fail_here("\"__metadata__\" is not a JSON object");
  scan.open('{');
  if (scan.close_if_empty()) return;
  do {
    std::string key = scan.read_key();
    if (scan.peek_value() != '"') scan.fail_here("\"__metadata__\" value of '" + excerpt(key) + "' is not a string");
    std::string value = scan.read_string();
    auto [it, inserted] = metadata.try_emplace(std::move(key), std::move(value));
    if (!inserted) scan.fail_here("\"__metadata__\" has the key '" + excerpt(it->first) + "' more than once");
  } while (scan.next_member());
}

/// Narrows an entry read as I64 (8 little-endian bytes per element) to i32 in place;
/// a value outside i32's range fails, naming the tensor, the element and the value.
inline void narrow_i64(tensor_store::entry& entry, std::string_view name, const std::string& path) {
  const std::size_t count = entry.data.size() / 8;
  for (std::size_t k = 0; k < count; ++k) {
    std::uint64_t bits = 0;
    for (int b = 7; b >= 0; --b) bits = (bits << 8) | std::to_integer<std::uint64_t>(entry.data[8 * k + b]);
    const auto value = static_cast<std::int64_t>(bits);
    if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max())
      fail(path, tensor_label(name) + " (I64) holds " + std::to_string(value) + " at element " + std::to_string(k) +
                     ", outside the range of i32, which luminal holds integers as");
    const auto narrow = static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
    for (int b = 0; b < 4; ++b) entry.data[4 * k + b] = std::byte((narrow >> (8 * b)) & 0xff);
  }
  entry.data.resize(4 * count);
}

/// Reads and checks the header `text` of a file whose data section holds `data_size`
/// bytes. Throws checkpoint_error naming `path` and what is wrong. The tensors come
/// sorted by name; their overlap and coverage of the data are the caller's to check.
inline header parse_header(std::string_view text, std::uint64_t data_size, const std::string& path,
                           half_floats halves = half_floats::as_elements) {
  if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
    fail(path, "header is not valid JSON: it is not UTF-8 (byte " + std::to_string(bad) + ")");
  json_scanner scan(text, path);
  if (scan.peek() != '{') fail(path, "header does not start with '{'; this is not a safetensors file");
  header out;
  bool has_metadata = false;
  scan.open('{');
  if (!scan.close_if_empty()) do {
      std::string name = scan.read_key();
      if (name != "__metadata__") {
        out.tensors.push_back(read_tensor(scan, std::move(name), data_size, halves));
        continue;
      }
      if (has_metadata) fail(path, "header has the key '__metadata__' more than once");
      has_metadata = true;
      read_metadata(scan, out.metadata);
    } while (scan.next_member());
  if (!scan.at_end()) {
    const std::size_t at = scan.position();
    const unsigned char c = static_cast<unsigned char>(text[at]);
    if (c == 0)
      fail(path, "header is not valid JSON at byte " + std::to_string(at) +
                     ": NUL bytes after the closing '}' (only spaces may pad a header)");
    scan.syntax_error("unexpected " + scan.describe_next() + " after the closing '}'");
  }
  // Sorted by name, a repeated name is found in O(n log n) comparisons, never worse (a
  // hash set could be flooded with colliding names), and the store is filled in order.
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const tensor_header& a, const tensor_header& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < out.tensors.size(); ++i)
    if (out.tensors[i].name == out.tensors[i - 1].name)
      fail(path, "header has the key '" + excerpt(out.tensors[i].name) + "' more than once");
  return out;
}

}  // namespace luminal::detail::safetensors
