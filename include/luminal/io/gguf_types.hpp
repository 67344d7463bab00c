// The pieces of a GGUF file (io/gguf.hpp) that describe its contents: metadata value types,
// ggml's tensor types and their block layouts, one metadata value (gguf_value) and one
// tensor's description (gguf_tensor_info), as views into the file's mapping.
//
//     const luminal::gguf_value& v = file.at("llama.block_count");
//     std::uint32_t layers = v.as_u32();           // any integer type whose value fits
//     std::optional<luminal::ggml_type_traits> q6k = luminal::ggml_type_info(14);  // "Q6_K", 256, 210
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

#include "../core/quant_format.hpp"

namespace luminal {

/// A GGUF file could not be read, is not valid, or does not hold what was asked of it.
/// The message names the file and the field.
class gguf_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The type of a metadata value, with GGUF's ids.
enum class gguf_type : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

constexpr std::string_view gguf_type_name(gguf_type t) {
  constexpr std::string_view names[] = {"u8", "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
  return std::uint32_t(t) < std::size(names) ? names[std::uint32_t(t)] : "unknown";
}

/// ggml's name and block layout of a tensor type: `block_elements` consecutive elements
/// of a row are stored in `block_bytes` bytes.
struct ggml_type_traits {
  std::string_view name;
  std::uint64_t block_elements = 0;
  std::uint64_t block_bytes = 0;
};

/// The traits of a ggml type id, as ggml's type table has them; nothing for ids that are
/// not (or no longer) ggml types. luminal computes only with the types quant_format_of
/// knows; the others are listed so that files holding them can be read and sized.
constexpr std::optional<ggml_type_traits> ggml_type_info(std::uint32_t type) {
  constexpr ggml_type_traits table[] = {
      {"F32", 1, 4},       {"F16", 1, 2},       {"Q4_0", 32, 18},    {"Q4_1", 32, 20},   {},  // 4: Q4_2, removed
      {},                  {"Q5_0", 32, 22},    {"Q5_1", 32, 24},    {"Q8_0", 32, 34},   {"Q8_1", 32, 36},
      {"Q2_K", 256, 84},   {"Q3_K", 256, 110},  {"Q4_K", 256, 144},  {"Q5_K", 256, 176}, {"Q6_K", 256, 210},
      {"Q8_K", 256, 292},  {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
      {"IQ4_NL", 32, 18},  {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136}, {"I8", 1, 1},
      {"I16", 1, 2},       {"I32", 1, 4},       {"I64", 1, 8},       {"F64", 1, 8},      {"IQ1_M", 256, 56},
      {"BF16", 1, 2},      {},                  {},                  {},                 {"TQ1_0", 256, 54},  // 31-33 removed
      {"TQ2_0", 256, 66},  {},                  {},                  {},                 {"MXFP4", 32, 17},   // 36-38 removed
      {"NVFP4", 64, 36},   {"Q1_0", 128, 18},
  };
  if (type >= std::size(table) || table[type].block_elements == 0) return std::nullopt;
  return table[type];
}

// The formats luminal computes with must have the layout ggml gives them.
static_assert([] {
  for (quant_format f : {quant_format::f32, quant_format::f16, quant_format::q4_0, quant_format::q4_1,
                         quant_format::q8_0, quant_format::bf16}) {
    const auto t = ggml_type_info(std::uint32_t(f));
    if (!t || t->name != format_info(f).name || t->block_elements != format_info(f).block_elements ||
        t->block_bytes != format_info(f).block_bytes)
      return false;
  }
  return true;
}());

namespace detail::gguf {

[[noreturn]] inline void fail(std::string_view path, const std::string& what) {
  throw gguf_error("luminal: " + std::string(path) + ": " + what);
}

/// Bytes of the UTF-8 character at the start of `s` (n bytes available), 0 if invalid
/// (overlong forms, surrogates and code points above U+10FFFF are invalid).
inline std::size_t utf8_length(const unsigned char* s, std::size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if ((s[k] & 0xC0) != 0x80) return 0;
  return len;
}

/// Whether `text` is entirely UTF-8.
inline bool is_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0, len; i < text.size(); i += len)
    if ((len = utf8_length(s + i, text.size() - i)) == 0) return false;
  return true;
}

/// `text` for a message: at most about `limit` bytes ("..." when cut), with control
/// characters and bytes that are not UTF-8 shown as \xNN, so that a hostile name can
/// neither flood nor corrupt the message.
inline std::string excerpt(std::string_view text, std::size_t limit = 80) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  for (std::size_t i = 0, len; i < text.size(); i += len) {
    if (out.size() >= limit) return out + "...";
    len = utf8_length(s + i, text.size() - i);
    if (len == 0 || s[i] < 0x20 || s[i] == 0x7f) {
      out += {'\\', 'x', hex[s[i] >> 4], hex[s[i] & 15]};
      len = 1;
    } else {
      out.append(text.substr(i, len));
    }
  }
  return out;
}

/// Bytes of one scalar of type `t`; 0 for string, array and unknown types.
constexpr std::uint64_t scalar_bytes(gguf_type t) {
  switch (t) {
    case gguf_type::u8: case gguf_type::i8: case gguf_type::boolean: return 1;
    case gguf_type::u16: case gguf_type::i16: return 2;
    case gguf_type::u32: case gguf_type::i32: case gguf_type::f32: return 4;
    case gguf_type::u64: case gguf_type::i64: case gguf_type::f64: return 8;
    default: return 0;
  }
}

constexpr bool is_integer(gguf_type t) { return scalar_bytes(t) && t != gguf_type::boolean && t != gguf_type::f32 && t != gguf_type::f64; }

template <class T>
T load(const std::byte* p) {  // little-endian, any alignment
  std::make_unsigned_t<T> bits = 0;
  for (std::size_t k = sizeof(T); k-- > 0;) bits = (bits << 8) | std::to_integer<std::make_unsigned_t<T>>(p[k]);
  return static_cast<T>(bits);
}

inline double load_float(gguf_type t, const std::byte* p) {
  return t == gguf_type::f32 ? double(std::bit_cast<float>(load<std::uint32_t>(p))) : std::bit_cast<double>(load<std::uint64_t>(p));
}

/// The integer of type `t` at `p` as T, if it fits.
template <class T>
std::optional<T> load_integer(gguf_type t, const std::byte* p) {
  auto fit = [](auto v) -> std::optional<T> { return std::in_range<T>(v) ? std::optional<T>(T(v)) : std::nullopt; };
  switch (t) {
    case gguf_type::u8: return fit(load<std::uint8_t>(p));
    case gguf_type::i8: return fit(load<std::int8_t>(p));
    case gguf_type::u16: return fit(load<std::uint16_t>(p));
    case gguf_type::i16: return fit(load<std::int16_t>(p));
    case gguf_type::u32: return fit(load<std::uint32_t>(p));
    case gguf_type::i32: return fit(load<std::int32_t>(p));
    case gguf_type::u64: return fit(load<std::uint64_t>(p));
    case gguf_type::i64: return fit(load<std::int64_t>(p));
    default: return std::nullopt;
  }
}

inline std::string integer_text(gguf_type t, const std::byte* p) {
  if (auto v = load_integer<std::int64_t>(t, p)) return std::to_string(*v);
  return std::to_string(load<std::uint64_t>(p));  // a u64 above i64's range
}

class parser;

}  // namespace detail::gguf

/// One metadata value: a view into the file's mapping, valid while the gguf_file lives.
/// Integer getters accept any integer type whose value fits the type asked for (as
/// llama.cpp does); as_f32 and as_f64 accept f32 and f64. A value of another type throws
/// gguf_error naming the file, the key, and the type found.
class gguf_value {
 public:
  std::string_view key() const { return key_; }
  gguf_type type() const { return type_; }
  /// An array's element type; type() for anything else.
  gguf_type element_type() const { return element_type_; }
  bool is_array() const { return type_ == gguf_type::array; }
  /// An array's element count; 1 for anything else.
  std::uint64_t size() const { return is_array() ? count_ : 1; }
  /// "u32", "string", "array of string".
  std::string type_description() const {
    return is_array() ? "array of " + std::string(gguf_type_name(element_type_)) : std::string(gguf_type_name(type_));
  }
  /// The value's bytes in the file (after the length of a string, after the element type
  /// and count of an array).
  std::span<const std::byte> raw() const { return {payload_, std::size_t(payload_bytes_)}; }

  std::uint32_t as_u32() const { return integer<std::uint32_t>("u32"); }
  std::int32_t as_i32() const { return integer<std::int32_t>("i32"); }
  std::uint64_t as_u64() const { return integer<std::uint64_t>("u64"); }
  std::int64_t as_i64() const { return integer<std::int64_t>("i64"); }
  double as_f64() const {
    if (type_ != gguf_type::f32 && type_ != gguf_type::f64) wrong_type("a float");
    return detail::gguf::load_float(type_, payload_);
  }
  float as_f32() const { return narrow(as_f64(), ""); }
  bool as_bool() const {
    if (type_ != gguf_type::boolean) wrong_type("a bool");
    return payload_[0] != std::byte{0};
  }
  /// The string's bytes as stored. Values are not checked for UTF-8 (writers have stored
  /// other bytes in tokens); keys and tensor names are.
  std::string_view as_string() const {
    if (type_ != gguf_type::string) wrong_type("a string");
    return {reinterpret_cast<const char*>(payload_), std::size_t(count_)};
  }

  /// An array of strings, as views into the mapping.
  std::vector<std::string_view> as_string_array() const {
    if (element_type_ != gguf_type::string || !is_array()) wrong_type("an array of string");
    std::vector<std::string_view> out;
    out.reserve(static_cast<std::size_t>(count_));
    const std::byte* p = payload_;  // lengths were checked when the file was parsed
    for (std::uint64_t i = 0; i < count_; ++i) {
      const auto n = std::size_t(detail::gguf::load<std::uint64_t>(p));
      out.emplace_back(reinterpret_cast<const char*>(p + 8), n);
      p += 8 + n;
    }
    return out;
  }
  std::vector<std::int32_t> as_i32_array() const { return integer_array<std::int32_t>("i32"); }
  std::vector<std::int64_t> as_i64_array() const { return integer_array<std::int64_t>("i64"); }
  std::vector<float> as_f32_array() const {
    if (!is_array() || (element_type_ != gguf_type::f32 && element_type_ != gguf_type::f64)) wrong_type("an array of float");
    std::vector<float> out(static_cast<std::size_t>(count_));
    const std::uint64_t step = detail::gguf::scalar_bytes(element_type_);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = narrow(detail::gguf::load_float(element_type_, payload_ + i * step), " at element " + std::to_string(i));
    return out;
  }

 private:
  friend class detail::gguf::parser;
  std::string_view path_, key_;
  gguf_type type_ = gguf_type::u8, element_type_ = gguf_type::u8;
  std::uint64_t count_ = 0;  // array elements, string bytes, or 1
  const std::byte* payload_ = nullptr;
  std::uint64_t payload_bytes_ = 0;

  [[noreturn]] void wrong_type(std::string_view wanted) const {
    detail::gguf::fail(path_, "metadata '" + detail::gguf::excerpt(key_) + "' is " + type_description() + ", not " + std::string(wanted));
  }
  float narrow(double d, const std::string& where) const {  // an f64 beyond f32's range is refused, not made inf
    if (std::isfinite(d) && std::abs(d) > double(std::numeric_limits<float>::max()))
      detail::gguf::fail(path_, "metadata '" + detail::gguf::excerpt(key_) + "' holds " + std::to_string(d) + where +
                                    ", which does not fit f32");
    return float(d);
  }
  template <class T>
  T integer(std::string_view name) const {
    if (!detail::gguf::is_integer(type_)) wrong_type("an integer");
    if (auto v = detail::gguf::load_integer<T>(type_, payload_)) return *v;
    detail::gguf::fail(path_, "metadata '" + detail::gguf::excerpt(key_) + "' holds " + detail::gguf::integer_text(type_, payload_) +
                                  ", which does not fit " + std::string(name));
  }
  template <class T>
  std::vector<T> integer_array(std::string_view name) const {
    if (!is_array() || !detail::gguf::is_integer(element_type_)) wrong_type("an array of integers");
    std::vector<T> out(static_cast<std::size_t>(count_));
    const std::uint64_t step = detail::gguf::scalar_bytes(element_type_);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::byte* p = payload_ + i * step;
      auto v = detail::gguf::load_integer<T>(element_type_, p);
      if (!v)
        detail::gguf::fail(path_, "metadata '" + detail::gguf::excerpt(key_) + "' holds " + detail::gguf::integer_text(element_type_, p) +
                                      " at element " + std::to_string(i) + ", which does not fit " + std::string(name));
      out[i] = *v;
    }
    return out;
  }
};

/// One tensor of a GGUF file. Dimensions are in ggml's order: ne[0] is the row length
/// (the innermost, contiguous extent), ne[n_dims-1] the outermost; shape() gives the
/// row-major shape [ne[n_dims-1], ..., ne[0]] (a [576, 49152] embedding in ggml's order
/// is 49152 rows of 576). Views into the mapping, valid while the gguf_file lives.
struct gguf_tensor_info {
  std::string_view name;
  std::uint32_t ggml_type = 0;
  std::string_view type_name;            // "Q4_1", "F32", ... (ggml_type_info)
  std::uint32_t n_dims = 0;
  std::array<std::uint64_t, 4> ne{1, 1, 1, 1};  // extents past n_dims are 1
  std::uint64_t offset = 0;              // from the start of the data section
  std::uint64_t byte_size = 0;
  std::span<const std::byte> data;       // byte_size bytes of the mapping, at a multiple of the
                                         // file's alignment from the data section's start

  std::span<const std::uint64_t> dims() const { return {ne.data(), n_dims}; }
  std::vector<std::uint64_t> shape() const { return std::vector<std::uint64_t>(ne.rbegin() + (4 - n_dims), ne.rend()); }
  std::uint64_t element_count() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::uint64_t row_length() const { return ne[0]; }
  std::uint64_t row_count() const { return ne[1] * ne[2] * ne[3]; }
  /// The format, when luminal computes with this type (gguf_file::tensor_format throws instead).
  std::optional<quant_format> format() const { return quant_format_of(ggml_type); }
};

}  // namespace luminal
