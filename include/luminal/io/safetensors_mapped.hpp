// A safetensors file read in place: the file memory-mapped (io/mapped_file.hpp), its header
// read and checked as load_safetensors checks it (io/safetensors_header.hpp), and each tensor
// a view of its bytes in the mapping, in the file's own dtype. Unlike load_safetensors,
// which fills a tensor_store and refuses half precision, this reads F16 and BF16 too: for
// models whose kernels take half-precision weights as they lie (nn/llama.hpp), with no copy.
//
//     luminal::mapped_safetensors file = luminal::mapped_safetensors::open("model.safetensors");
//     const luminal::mapped_tensor& w = file.tensor("model.embed_tokens.weight");
//     if (w.dtype == luminal::stored_dtype::bf16) use(w.bytes, w.shape);  // [vocab, width], in the map
//
// The views stay valid while the mapped_safetensors lives, and when it is moved.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/quant_format.hpp"
#include "mapped_file.hpp"
#include "safetensors.hpp"
#include "safetensors_header.hpp"

namespace luminal {

/// A tensor's element type as the file stores it.
enum class stored_dtype : std::uint8_t { f32, f64, i32, i64, boolean, f16, bf16 };

/// "BF16": the dtype as safetensors spells it.
constexpr std::string_view stored_dtype_name(stored_dtype d) {
  switch (d) {
    case stored_dtype::f32: return "F32";
    case stored_dtype::f64: return "F64";
    case stored_dtype::i32: return "I32";
    case stored_dtype::i64: return "I64";
    case stored_dtype::boolean: return "BOOL";
    case stored_dtype::f16: return "F16";
    case stored_dtype::bf16: return "BF16";
  }
  return "?";
}

/// The weight format of a floating dtype (the quantized kernels' f32, f16 and bf16), or
/// nothing for the others.
constexpr std::optional<quant_format> quant_format_of(stored_dtype d) {
  switch (d) {
    case stored_dtype::f32: return quant_format::f32;
    case stored_dtype::f16: return quant_format::f16;
    case stored_dtype::bf16: return quant_format::bf16;
    default: return std::nullopt;
  }
}

/// One tensor of a mapped_safetensors: its bytes in the mapping, row-major, little-endian.
struct mapped_tensor {
  std::string name;
  stored_dtype dtype = stored_dtype::f32;
  std::vector<index_t> shape;
  std::span<const std::byte> bytes;
};

class mapped_safetensors {
 public:
  /// Maps `path` and checks its header. Throws mapped_file_error when the file is missing or
  /// unreadable, and checkpoint_error naming the file and the field as load_safetensors does
  /// (a header past the end or over 100 MiB, invalid JSON, an unknown dtype, data_offsets
  /// that do not fit the shape or the data, tensors that overlap or leave gaps).
  static mapped_safetensors open(const std::string& path) {
    namespace st = detail::safetensors;
    mapped_safetensors out;
    out.path_ = path;
    out.map_ = mapped_file::open(path);
    const std::span<const std::byte> all = out.map_.bytes();
    if (all.size() < 8)
      st::fail(path, "is " + std::to_string(all.size()) + " bytes long, too short for the 8-byte header length");
    std::uint64_t header_size = 0;
    for (int k = 7; k >= 0; --k) header_size = (header_size << 8) | std::to_integer<std::uint64_t>(all[std::size_t(k)]);
    const std::uint64_t rest = all.size() - 8;
    if (header_size > rest)
      st::fail(path, "header length " + std::to_string(header_size) + " is larger than the rest of the file (" +
                         std::to_string(rest) + " bytes); the file is truncated or not a safetensors file");
    if (header_size > st::max_header_bytes)
      st::fail(path, "header length " + std::to_string(header_size) + " is over the limit of " +
                         std::to_string(st::max_header_bytes) + " bytes");
    if (header_size < 2) st::fail(path, "header length " + std::to_string(header_size) + " is too small for a JSON object");
    const std::string_view text(reinterpret_cast<const char*>(all.data() + 8), std::size_t(header_size));
    const std::span<const std::byte> data = all.subspan(8 + std::size_t(header_size));
    st::header parsed = st::parse_header(text, data.size(), path, st::half_floats::accept);
    check_tiling(path, parsed.tensors, data.size());
    out.metadata_ = std::move(parsed.metadata);
    out.tensors_.reserve(parsed.tensors.size());
    for (st::tensor_header& t : parsed.tensors)  // sorted by name
      out.tensors_.push_back({std::move(t.name), dtype_of(t), std::move(t.entry.shape),
                              data.subspan(std::size_t(t.begin), std::size_t(t.end - t.begin))});
    return out;
  }

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }
  /// Every tensor, sorted by name.
  std::span<const mapped_tensor> tensors() const { return tensors_; }
  const mapped_tensor* find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const mapped_tensor& t, std::string_view n) { return t.name < n; });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
  }
  /// Throws checkpoint_error naming the file and the tensor when it has none of that name.
  const mapped_tensor& tensor(std::string_view name) const {
    if (const mapped_tensor* t = find(name)) return *t;
    detail::safetensors::fail(path_, "has no tensor '" + detail::safetensors::excerpt(name) + "'");
  }

 private:
  std::string path_;
  mapped_file map_;
  std::map<std::string, std::string, std::less<>> metadata_;
  std::vector<mapped_tensor> tensors_;

  static stored_dtype dtype_of(const detail::safetensors::tensor_header& t) {
    using detail::safetensors::half_float;
    if (t.half != half_float::none) return t.half == half_float::f16 ? stored_dtype::f16 : stored_dtype::bf16;
    if (t.narrowed_from_i64) return stored_dtype::i64;
    switch (t.entry.dtype) {
      case dtype_tag::f64: return stored_dtype::f64;
      case dtype_tag::i32: return stored_dtype::i32;
      case dtype_tag::boolean: return stored_dtype::boolean;
      default: return stored_dtype::f32;
    }
  }

  /// The tensors must tile the data exactly, as load_safetensors requires.
  static void check_tiling(const std::string& path, const std::vector<detail::safetensors::tensor_header>& items,
                           std::uint64_t data_size) {
    namespace st = detail::safetensors;
    std::vector<std::size_t> order(items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return items[a].begin != items[b].begin ? items[a].begin < items[b].begin : items[a].end < items[b].end;
    });
    std::uint64_t covered = 0;
    const st::tensor_header* previous = nullptr;
    for (std::size_t i : order) {
      const st::tensor_header& t = items[i];
      if (t.begin < covered)
        st::fail(path, "tensors '" + st::excerpt(previous->name) + "' and '" + st::excerpt(t.name) + "' overlap");
      if (t.begin > covered)
        st::fail(path, "bytes " + std::to_string(covered) + " to " + std::to_string(t.begin) +
                           " of the data belong to no tensor (a gap before '" + st::excerpt(t.name) + "')");
      covered = t.end;
      previous = &t;
    }
    if (covered != data_size)
      st::fail(path, "has " + std::to_string(data_size - covered) + " trailing bytes after the last tensor");
  }
};

}  // namespace luminal
