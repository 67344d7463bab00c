// GGUF files (ggml's model format, as llama.cpp writes and reads them), versions 2 and 3,
// little-endian:
//
//   "GGUF"  u32 version  u64 tensor_count  u64 kv_count
//   kv_count x   { string key, u32 value type, value }
//   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset }
//   padding to general.alignment (default 32), then the data section: each tensor's bytes
//   at its offset from the section's start, a multiple of the alignment
//
// A string is a u64 byte count and the bytes; an array a u32 element type, a u64 count
// and the elements. The file is memory-mapped and nothing of the weights is copied:
// tensor data, string values and names are views into the mapping, valid while the
// gguf_file lives (moving it keeps them valid).
//
//     luminal::gguf_file model = luminal::gguf_file::open("SmolLM2-135M-Instruct.Q4_1.gguf");
//     std::uint32_t layers = model.get_u32("llama.block_count");          // 30
//     std::vector<std::string_view> tokens = model.get_string_array("tokenizer.ggml.tokens");
//     const luminal::gguf_tensor_info& q = model.tensor("blk.0.attn_q.weight");
//     luminal::quant_format f = model.tensor_format(q);                   // q4_1
//     std::span<const std::byte> bytes = q.data;                          // into the mapping
//
// Every count, length, dimension and offset is checked against the file before it is
// used, so any file, however corrupt, is either read or refused with one gguf_error
// naming the file and the field; memory used while parsing is proportional to the file.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf_types.hpp"
#include "mapped_file.hpp"

namespace luminal {

/// An open GGUF file: its metadata and tensor table, parsed and checked, over a read-only
/// mapping of the file. Move-only; a moved-from gguf_file may only be destroyed or
/// assigned to.
class gguf_file {
 public:
  /// The largest general.alignment accepted: far above any writer's (32 by default), and
  /// small enough that the padding arithmetic cannot overflow.
  static constexpr std::uint64_t max_alignment = std::uint64_t(1) << 24;
  /// The longest tensor name (the GGUF specification's limit).
  static constexpr std::size_t max_tensor_name_bytes = 64;

  /// Opens, maps and parses `path`. Throws gguf_error naming the file and the field when
  /// the file is missing or unreadable, or:
  ///   - lacks the magic, is GGUF version 1 (32-bit counts), big-endian, or of a version
  ///     other than 2 and 3;
  ///   - declares more key/values or tensors than its bytes could hold (checked before
  ///     anything is allocated), or any string, array or field runs past its end;
  ///   - has a value type outside 0-12, an array of arrays, a bool other than 0 or 1, a key
  ///     or tensor name that is not UTF-8 or appears twice, a name over 64 bytes;
  ///   - has a general.alignment that is not an integer power of two up to 2^24;
  ///   - has a tensor with n_dims over 4, a dimension of 0, more than 2^63 - 1 elements, a
  ///     ggml type id that is unknown or removed from ggml, a row length ne[0] that is
  ///     not whole blocks of its type, an offset that is not a multiple of the alignment,
  ///     or bytes past the end of the file. Tensors may overlap, as in ggml.
  /// Parsing is one pass over the metadata and tensor table; the tensor data is not read.
  static gguf_file open(const std::string& path);

  gguf_file(gguf_file&&) noexcept = default;
  gguf_file& operator=(gguf_file&&) noexcept = default;

  const std::string& path() const { return s().path; }
  std::uint32_t version() const { return s().version; }
  std::uint64_t alignment() const { return s().alignment; }
  /// The file offset of the data section (the tensor table's end, aligned).
  std::uint64_t data_offset() const { return s().data_offset; }
  /// The whole file.
  std::span<const std::byte> bytes() const { return s().map.bytes(); }

  /// Metadata in file order.
  std::span<const gguf_value> metadata() const { return s().values; }
  const gguf_value* find(std::string_view key) const {
    const state& st = s();
    auto it = std::lower_bound(st.values_by_key.begin(), st.values_by_key.end(), key,
                               [&](std::size_t i, std::string_view k) { return st.values[i].key() < k; });
    return it != st.values_by_key.end() && st.values[*it].key() == key ? &st.values[*it] : nullptr;
  }
  const gguf_value& at(std::string_view key) const {
    if (const gguf_value* v = find(key)) return *v;
    detail::gguf::fail(path(), "has no metadata key '" + detail::gguf::excerpt(key) + "'");
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  std::string_view get_string(std::string_view key) const { return at(key).as_string(); }
  std::uint32_t get_u32(std::string_view key) const { return at(key).as_u32(); }
  std::int32_t get_i32(std::string_view key) const { return at(key).as_i32(); }
  std::uint64_t get_u64(std::string_view key) const { return at(key).as_u64(); }
  float get_f32(std::string_view key) const { return at(key).as_f32(); }
  bool get_bool(std::string_view key) const { return at(key).as_bool(); }
  std::vector<std::string_view> get_string_array(std::string_view key) const { return at(key).as_string_array(); }
  std::vector<std::int32_t> get_i32_array(std::string_view key) const { return at(key).as_i32_array(); }
  std::vector<float> get_f32_array(std::string_view key) const { return at(key).as_f32_array(); }

  /// Tensors in file order.
  std::span<const gguf_tensor_info> tensors() const { return s().tensors; }
  const gguf_tensor_info* find_tensor(std::string_view name) const {
    const state& st = s();
    auto it = std::lower_bound(st.tensors_by_name.begin(), st.tensors_by_name.end(), name,
                               [&](std::size_t i, std::string_view n) { return st.tensors[i].name < n; });
    return it != st.tensors_by_name.end() && st.tensors[*it].name == name ? &st.tensors[*it] : nullptr;
  }
  const gguf_tensor_info& tensor(std::string_view name) const {
    if (const gguf_tensor_info* t = find_tensor(name)) return *t;
    detail::gguf::fail(path(), "has no tensor '" + detail::gguf::excerpt(name) + "'");
  }
  std::span<const std::byte> tensor_data(std::string_view name) const { return tensor(name).data; }
  /// The tensor's format; throws gguf_error naming the tensor and its type when luminal
  /// does not compute with that type.
  quant_format tensor_format(const gguf_tensor_info& t) const {
    if (auto f = t.format()) return *f;
    detail::gguf::fail(path(), "tensor '" + detail::gguf::excerpt(t.name) + "' has ggml type " + std::string(t.type_name) +
                                   ", which luminal does not read (it reads F32, F16, BF16, Q4_0, Q4_1 and Q8_0)");
  }

 private:
  friend class detail::gguf::parser;
  struct state {
    std::string path;
    mapped_file map;
    std::uint32_t version = 0;
    std::uint64_t alignment = 32, data_offset = 0;
    std::vector<gguf_value> values;
    std::vector<gguf_tensor_info> tensors;
    std::vector<std::size_t> values_by_key, tensors_by_name;  // indices, sorted
  };
  // On the heap, so that the views into it (the path in values) survive moves.
  std::unique_ptr<state> state_;

  gguf_file() = default;
  const state& s() const {
    if (!state_) throw gguf_error("luminal: a moved-from gguf_file was used");
    return *state_;
  }
};

namespace detail::gguf {

/// Reads a mapped file into a gguf_file's state, checking every number against the bytes
/// that remain before it is used.
class parser {
 public:
  explicit parser(gguf_file::state& st) : st_(st), base_(st.map.bytes().data()), size_(st.map.size()) {}

  void run() {
    read_header();
    read_metadata();
    read_tensor_infos();
    place_tensors();
  }

 private:
  gguf_file::state& st_;
  const std::byte* base_;
  std::uint64_t size_, pos_ = 0;
  std::uint64_t tensor_count_ = 0, kv_count_ = 0;

  [[noreturn]] void fail(const std::string& what) const { gguf::fail(st_.path, what); }
  static std::string str(std::uint64_t n) { return std::to_string(n); }

  /// Fails unless `n` bytes remain; `what()` names what was being read.
  template <class What>
  void need(std::uint64_t n, What&& what) const {
    if (size_ - pos_ < n)
      fail(what() + " at byte " + str(pos_) + " runs past the end of the file (" + str(size_) +
           " bytes); the file is truncated or corrupt");
  }
  template <class T, class What>
  T read(What&& what) {
    need(sizeof(T), what);
    const T v = load<T>(base_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  template <class What>
  std::string_view read_string(What&& what) {
    const std::uint64_t at = pos_;
    const auto n = read<std::uint64_t>([&] { return what() + ": the string length"; });
    if (n > size_ - pos_)
      fail(what() + ": string length " + str(n) + " at byte " + str(at) + " runs past the end of the file (" +
           str(size_ - pos_) + " bytes remain); the file is truncated or corrupt");
    const std::string_view s(reinterpret_cast<const char*>(base_ + pos_), std::size_t(n));
    pos_ += n;
    return s;
  }

  void read_header() {
    if (size_ < 4) fail("is " + str(size_) + " bytes long, too short to be a GGUF file");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
      static constexpr char hex[] = "0123456789abcdef";
      std::string found;
      for (int k = 0; k < 4; ++k) {
        const auto c = std::to_integer<unsigned>(base_[k]);
        found += std::string(k ? " " : "") + hex[c >> 4] + hex[c & 15];
      }
      fail("does not start with the magic 'GGUF' (its first bytes are " + found + "); it is not a GGUF file");
    }
    pos_ = 4;
    const auto version = read<std::uint32_t>([] { return std::string("the version"); });
    const std::uint32_t swapped = (version >> 24) | ((version >> 8) & 0xff00) | ((version << 8) & 0xff0000) | (version << 24);
    if ((version & 0xffff) == 0 && swapped >= 1 && swapped <= 3)
      fail("is a big-endian GGUF file (version " + str(swapped) + " stored big-endian); luminal reads little-endian files only");
    if (version == 1)
      fail("is GGUF version 1, an early format with 32-bit counts that luminal does not read (it reads versions 2 and 3); "
           "convert the model again with a current llama.cpp");
    if (version < 2 || version > 3) fail("has GGUF version " + str(version) + "; luminal reads versions 2 and 3");
    st_.version = version;
    tensor_count_ = read<std::uint64_t>([] { return std::string("the tensor count"); });
    kv_count_ = read<std::uint64_t>([] { return std::string("the metadata count"); });
    // Refused before anything is allocated from them: a key/value takes at least 13 bytes
    // (a length, a type, a one-byte value), a tensor info at least 24.
    const std::uint64_t rest = size_ - pos_;
    if (kv_count_ > rest / 13)
      fail("metadata count " + str(kv_count_) + " cannot fit in the " + str(rest) + " bytes after the header (each entry takes at least 13)");
    if (tensor_count_ > rest / 24)
      fail("tensor count " + str(tensor_count_) + " cannot fit in the " + str(rest) +
           " bytes after the header (each tensor info takes at least 24)");
  }

  gguf_type read_type(const std::string& what) {
    const std::uint64_t at = pos_;
    const auto t = read<std::uint32_t>([&] { return what; });
    if (t > std::uint32_t(gguf_type::f64))
      fail(what + " " + str(t) + " at byte " + str(at) + " is not a GGUF value type (those are 0 to 12)");
    return gguf_type(t);
  }

  void check_bools(std::string_view key, std::uint64_t count) const {
    for (std::uint64_t k = 0; k < count; ++k)
      if (const auto b = std::to_integer<unsigned>(base_[pos_ + k]); b > 1)
        fail("metadata '" + excerpt(key) + "': bool " + str(b) + " at byte " + str(pos_ + k) + " is neither 0 nor 1");
  }

  gguf_value read_value(std::string_view key) {
    const auto where = [&] { return "metadata '" + excerpt(key) + "'"; };
    gguf_value v;
    v.path_ = st_.path;
    v.key_ = key;
    v.type_ = v.element_type_ = read_type(where() + ": value type");
    const std::uint64_t start = pos_;
    if (v.type_ == gguf_type::string) {
      v.count_ = read_string(where).size();
      v.payload_ = base_ + pos_ - v.count_;
    } else if (v.type_ != gguf_type::array) {
      const std::uint64_t bytes = scalar_bytes(v.type_);
      need(bytes, [&] { return where() + ": the " + std::string(gguf_type_name(v.type_)) + " value"; });
      if (v.type_ == gguf_type::boolean) check_bools(key, 1);
      v.count_ = 1;
      v.payload_ = base_ + pos_;
      pos_ += bytes;
    } else {
      v.element_type_ = read_type(where() + ": array element type");
      if (v.element_type_ == gguf_type::array) fail(where() + " is an array of arrays, which luminal does not read");
      v.count_ = read<std::uint64_t>([&] { return where() + ": the array length"; });
      const std::uint64_t rest = size_ - pos_;
      const std::uint64_t least = v.element_type_ == gguf_type::string ? 8 : scalar_bytes(v.element_type_);
      if (v.count_ > rest / least)
        fail(where() + ": an array of " + str(v.count_) + " " + std::string(gguf_type_name(v.element_type_)) +
             " cannot fit in the " + str(rest) + " bytes that remain (each takes at least " + str(least) + ")");
      v.payload_ = base_ + pos_;
      if (v.element_type_ == gguf_type::string) {
        for (std::uint64_t k = 0; k < v.count_; ++k) read_string([&] { return where() + ": element " + str(k); });
      } else {
        if (v.element_type_ == gguf_type::boolean) check_bools(key, v.count_);
        pos_ += v.count_ * least;
      }
    }
    v.payload_bytes_ = pos_ - start - (v.type_ == gguf_type::string ? 8 : v.type_ == gguf_type::array ? 12 : 0);
    return v;
  }

  /// Sorts `order` (indices into `items`) by name and fails on a name that appears twice.
  template <class Items, class Name>
  void sort_unique(const Items& items, std::vector<std::size_t>& order, Name name, const char* what) const {
    order.resize(items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Sorting finds repeats in O(n log n) comparisons whatever the names (a hash set could
    // be flooded with colliding ones).
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const auto x = name(items[a]), y = name(items[b]);
      return x != y ? x < y : a < b;  // repeats in file order, for the message
    });
    for (std::size_t k = 1; k < order.size(); ++k)
      if (name(items[order[k]]) == name(items[order[k - 1]]))
        fail(std::string(what) + " '" + excerpt(name(items[order[k]])) + "' appears twice (entries " + str(order[k - 1]) +
             " and " + str(order[k]) + ")");
  }

  void read_metadata() {
    st_.values.reserve(std::size_t(kv_count_));
    for (std::uint64_t i = 0; i < kv_count_; ++i) {
      const std::string_view key = read_string([&] { return "metadata key #" + str(i); });
      if (!is_utf8(key)) fail("metadata key #" + str(i) + " ('" + excerpt(key) + "') is not valid UTF-8");
      st_.values.push_back(read_value(key));
    }
    sort_unique(st_.values, st_.values_by_key, [](const gguf_value& v) { return v.key(); }, "metadata key");
    auto it = std::lower_bound(st_.values_by_key.begin(), st_.values_by_key.end(), std::string_view("general.alignment"),
                               [&](std::size_t i, std::string_view k) { return st_.values[i].key() < k; });
    if (it == st_.values_by_key.end() || st_.values[*it].key() != "general.alignment") return;
    const std::uint64_t a = st_.values[*it].as_u64();
    if (a == 0 || (a & (a - 1)) != 0) fail("general.alignment " + str(a) + " is not a power of two");
    if (a > gguf_file::max_alignment)
      fail("general.alignment " + str(a) + " is over the limit of " + str(gguf_file::max_alignment));
    st_.alignment = a;
  }

  void read_tensor_infos() {
    st_.tensors.reserve(std::size_t(tensor_count_));
    for (std::uint64_t i = 0; i < tensor_count_; ++i) {
      gguf_tensor_info t;
      t.name = read_string([&] { return "tensor #" + str(i) + ": the name"; });
      if (!is_utf8(t.name)) fail("tensor #" + str(i) + ": the name '" + excerpt(t.name) + "' is not valid UTF-8");
      const auto where = [&] { return "tensor '" + excerpt(t.name) + "'"; };
      if (t.name.size() > gguf_file::max_tensor_name_bytes)
        fail(where() + ": the name is " + str(t.name.size()) + " bytes long, over GGUF's limit of " +
             str(gguf_file::max_tensor_name_bytes));
      t.n_dims = read<std::uint32_t>([&] { return where() + ": n_dims"; });
      if (t.n_dims > 4) fail(where() + ": n_dims " + str(t.n_dims) + " is over ggml's limit of 4");
      for (std::uint32_t d = 0; d < t.n_dims; ++d) {
        t.ne[d] = read<std::uint64_t>([&] { return where() + ": ne[" + str(d) + "]"; });
        if (t.ne[d] == 0) fail(where() + ": ne[" + str(d) + "] is 0; every dimension must be at least 1");
      }
      t.ggml_type = read<std::uint32_t>([&] { return where() + ": the ggml type"; });
      const auto traits = ggml_type_info(t.ggml_type);
      if (!traits) fail(where() + ": " + str(t.ggml_type) + " is not a ggml tensor type that luminal knows");
      t.type_name = traits->name;
      t.offset = read<std::uint64_t>([&] { return where() + ": the data offset"; });
      if (t.offset % st_.alignment != 0)
        fail(where() + ": offset " + str(t.offset) + " is not a multiple of the alignment " + str(st_.alignment));
      size_tensor(t, *traits, where);
      st_.tensors.push_back(t);
    }
    sort_unique(st_.tensors, st_.tensors_by_name, [](const gguf_tensor_info& t) { return t.name; }, "tensor name");
  }

  template <class Where>
  void size_tensor(gguf_tensor_info& t, const ggml_type_traits& traits, const Where& where) const {
    auto dims = [&] {
      std::string out = "[";
      for (std::uint32_t d = 0; d < t.n_dims; ++d) out += (d ? ", " : "") + str(t.ne[d]);
      return out + "]";
    };
    if (t.ne[0] % traits.block_elements != 0)
      fail(where() + ": the row length ne[0] = " + str(t.ne[0]) + " is not a multiple of " + std::string(traits.name) +
           "'s block of " + str(traits.block_elements) + " elements");
    // ggml counts elements in int64_t: more than 2^63 - 1 cannot be a ggml tensor.
    constexpr auto most = std::uint64_t(std::numeric_limits<std::int64_t>::max());
    std::uint64_t elements = 1;
    for (std::uint64_t e : t.ne) {
      if (elements > most / e) fail(where() + ": dimensions " + dims() + " hold more than 2^63 - 1 elements");
      elements *= e;
    }
    const std::uint64_t blocks = elements / traits.block_elements;
    if (blocks > std::numeric_limits<std::uint64_t>::max() / traits.block_bytes)
      fail(where() + ": dimensions " + dims() + " of " + std::string(traits.name) + " overflow a 64-bit byte size");
    t.byte_size = blocks * traits.block_bytes;
  }

  void place_tensors() {
    const std::uint64_t a = st_.alignment;
    st_.data_offset = pos_ + (a - pos_ % a) % a;  // pos_ <= size_ < 2^64 - 2^24: no overflow
    for (gguf_tensor_info& t : st_.tensors) {
      const std::uint64_t room = st_.data_offset <= size_ ? size_ - st_.data_offset : 0;
      if (t.offset > room || t.byte_size > room - t.offset)
        fail("tensor '" + excerpt(t.name) + "': its " + str(t.byte_size) + " bytes at offset " + str(t.offset) +
             " of the data section (file byte " + str(st_.data_offset) + " + " + str(t.offset) +
             ") run past the end of the file (" + str(size_) + " bytes); the file is truncated or corrupt");
      t.data = {base_ + st_.data_offset + t.offset, std::size_t(t.byte_size)};
    }
  }
};

}  // namespace detail::gguf

inline gguf_file gguf_file::open(const std::string& path) {
  gguf_file file;
  file.state_ = std::make_unique<state>();
  file.state_->path = path;
  try {
    file.state_->map = mapped_file::open(path);
  } catch (const mapped_file_error& e) {
    throw gguf_error(e.what());
  }
  detail::gguf::parser(*file.state_).run();
  return file;
}

}  // namespace luminal
