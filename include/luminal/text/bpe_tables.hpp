// The lookup tables of the byte-level BPE tokenizer (bpe.hpp): GPT-2's byte alphabet, merge
// ranks by pair of ids, and token ids by their bytes. Implementation details of bpe.hpp.
//
//     luminal::bpe::detail::byte_to_code_point()[' ']  // U+0120 'Ġ', the space of GPT-2's vocabularies
#pragma once
#include "bpe_pretokenize.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::bpe {

namespace detail {

/// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
/// for U+0100 onwards in byte order.
inline const std::array<char32_t, 256>& byte_to_code_point() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[b] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

inline void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) { s += char(c); return; }
  if (c < 0x800) { s += char(0xC0 | (c >> 6)); }
  else {
    if (c < 0x10000) { s += char(0xE0 | (c >> 12)); }
    else { s += char(0xF0 | (c >> 18)); s += char(0x80 | ((c >> 12) & 0x3F)); }
    s += char(0x80 | ((c >> 6) & 0x3F));
  }
  s += char(0x80 | (c & 0x3F));
}

/// The bytes a token's text stands for in GPT-2's byte alphabet; false if a character of it
/// (or invalid UTF-8) is outside that alphabet.
inline bool bytes_of_byte_level(std::string_view text, std::string& out) {
  static const std::vector<int> byte_of = [] {
    std::vector<int> t(324, -1);
    for (unsigned b = 0; b < 256; ++b) t[byte_to_code_point()[b]] = int(b);
    return t;
  }();
  out.clear();
  if (!is_valid_utf8(text)) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const char32_t c = next_code_point(p, i);
    if (c >= byte_of.size() || byte_of[c] < 0) return false;
    out += char(byte_of[c]);
  }
  return true;
}

/// Merge ranks by pair of ids: open addressing over 64-bit keys (far faster than
/// std::unordered_map on the BPE inner loop).
class merge_table {
 public:
  struct entry { std::uint64_t key; std::int32_t rank, result; };
  static constexpr std::int32_t none = std::numeric_limits<std::int32_t>::max();

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, entry{empty, none, -1});
  }
  /// Inserts (left, right) unless present; false if it was present.
  bool insert(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t result) {
    const std::uint64_t k = key(left, right);
    for (std::size_t i = slot(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k) return false;
      if (slots_[i].key == empty) { slots_[i] = {k, rank, result}; return true; }
    }
  }
  const entry* find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t k = key(left, right);
    for (std::size_t i = slot(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k) return &slots_[i];
      if (slots_[i].key == empty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t empty = ~std::uint64_t(0);
  std::vector<entry> slots_;
  static std::uint64_t key(std::int32_t l, std::int32_t r) { return std::uint64_t(std::uint32_t(l)) << 32 | std::uint32_t(r); }
  std::size_t slot(std::uint64_t k) const { return std::size_t((k * 0x9E3779B97F4A7C15ull) >> 20) & (slots_.size() - 1); }
};

/// Token ids by the bytes they stand for: open addressing, each slot holding the id and the
/// hash of its bytes, so that a probe reads a token's bytes only when the hashes agree.
class bytes_index {
 public:
  void build(const std::vector<std::string>& bytes, const std::vector<std::int32_t>& ids) {
    std::size_t cap = 16;
    while (cap < 2 * ids.size()) cap *= 2;
    slots_.assign(cap, slot{0, -1});
    for (std::int32_t id : ids) {  // a later id with the same bytes takes the slot (as HF's map)
      const std::uint64_t h = hash(bytes[std::size_t(id)]);
      std::size_t i = position(h);
      while (slots_[i].id >= 0 && !(slots_[i].hash == std::uint32_t(h) && bytes[std::size_t(slots_[i].id)] == bytes[std::size_t(id)]))
        i = (i + 1) & (cap - 1);
      slots_[i] = {std::uint32_t(h), id};
    }
  }
  std::int32_t find(std::string_view key, const std::vector<std::string>& bytes) const {
    if (slots_.empty()) return -1;
    const std::uint64_t h = hash(key);
    for (std::size_t i = position(h);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].id < 0) return -1;
      if (slots_[i].hash == std::uint32_t(h) && bytes[std::size_t(slots_[i].id)] == key) return slots_[i].id;
    }
  }

 private:
  struct slot { std::uint32_t hash; std::int32_t id; };
  std::vector<slot> slots_;
  static std::uint64_t hash(std::string_view s) {  // FNV-1a
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }
  std::size_t position(std::uint64_t h) const { return std::size_t((h * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1); }
};

}  // namespace detail

}  // namespace luminal::bpe
