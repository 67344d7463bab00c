// The pieces of the byte-level BPE pre-tokenizers that llama.cpp names in a GGUF's
// `tokenizer.ggml.pre` (the split of text into words before BPE merges run on each word), and
// the strict UTF-8 checks the BPE tokenizer (bpe.hpp) makes.
//
//     using namespace luminal::bpe;
//     pre_tokenize("I'm 42 ok!!", pre_tokenizer::smollm);  // {"I", "'m", " ", "4", "2", " ok", "!!"}
//     pre_tokenize("I'm 42 ok!!", pre_tokenizer::gpt2);    // {"I", "'m", " 42", " ok", "!!"}
//     first_invalid_utf8("ab\xC3");                       // 2
//
// The splits are those regular expressions written out by hand over code points (no std::regex:
// it is slow and knows nothing of Unicode categories), with Oniguruma's leftmost-first
// alternation and backtracking semantics, as Hugging Face tokenizers runs them:
//  - gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//            (HF's ByteLevel pre-tokenizer; llama.cpp's "gpt-2" and its synonyms);
//  - smollm: every \p{N} character a piece of its own first, then gpt2 on each stretch between
//            them (HF's Sequence[Digits(individual_digits), ByteLevel], SmolLM2's tokenizer.json;
//            llama.cpp's "smollm", "starcoder", "refact", ...);
//  - llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (llama.cpp's "llama-bpe").
// "\s+(?!\S)" takes a run of whitespace but its last character when a non-space follows, so
// that " word" keeps its space; a lone whitespace character before a non-space is "\s+".
//
// Character classes as HF tokenizers 0.23 sees them (checked on every code point): \p{L} and \p{N}
// are Oniguruma's (Unicode 16.0), \s is White_Space (25 code points), and the digits split uses
// Rust's char::is_numeric (Unicode 17.0). Categories come from utf8proc; utf8proc 2.8 knows
// Unicode 15.0, so the letters and numbers assigned since are listed below.
#pragma once
#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::bpe {

/// A vocabulary that cannot be used, text that is not valid UTF-8 (or holds a byte the
/// vocabulary cannot encode, when asked to refuse those), an unknown token or id.
class tokenizer_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The pre-tokenizers implemented here (see the header comment).
enum class pre_tokenizer { gpt2, smollm, llama3 };

/// The pre-tokenizer llama.cpp uses for a GGUF's `tokenizer.ggml.pre` value. Throws
/// tokenizer_error naming the value when it is not one whose split is implemented here.
inline pre_tokenizer pre_tokenizer_from_name(std::string_view name) {
  for (std::string_view n : {"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais"})
    if (name == n) return pre_tokenizer::gpt2;
  for (std::string_view n : {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})
    if (name == n) return pre_tokenizer::smollm;
  for (std::string_view n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})
    if (name == n) return pre_tokenizer::llama3;
  throw tokenizer_error("luminal: the BPE pre-tokenizer '" + std::string(name) +
                        "' is not supported (supported: gpt2, smollm and llama-bpe, with llama.cpp's synonyms)");
}

/// The byte offset of the first byte that does not belong to a valid UTF-8 sequence (strict:
/// no overlong forms, surrogates or values above U+10FFFF), or npos when `s` is valid.
inline std::size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned b = p[i];
    if (b < 0x80) { ++i; continue; }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) { len = 3; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
    else if (b >= 0xF0 && b <= 0xF4) { len = 4; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
    if (len == 0 || i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

/// Whether `s` is valid UTF-8 (as first_invalid_utf8).
inline bool is_valid_utf8(std::string_view s) { return first_invalid_utf8(s) == std::string_view::npos; }

namespace detail {

/// Throws tokenizer_error naming the offset of the first invalid byte, counted from `base`.
inline void require_utf8(std::string_view s, std::size_t base = 0) {
  if (const std::size_t at = first_invalid_utf8(s); at != std::string_view::npos)
    throw tokenizer_error("luminal: the text is not valid UTF-8 at byte " + std::to_string(base + at) +
                          " (value 0x" + "0123456789ABCDEF"[(unsigned char)s[at] >> 4] +
                          "0123456789ABCDEF"[(unsigned char)s[at] & 15] + ")");
}

/// The code point starting at p[i] of valid UTF-8; advances i past it.
inline char32_t next_code_point(const unsigned char* p, std::size_t& i) {
  const unsigned b = p[i];
  if (b < 0x80) { ++i; return b; }
  if (b < 0xE0) { i += 2; return char32_t((b & 0x1F) << 6 | (p[i - 1] & 0x3F)); }
  if (b < 0xF0) { i += 3; return char32_t((b & 0x0F) << 12 | (p[i - 2] & 0x3F) << 6 | (p[i - 1] & 0x3F)); }
  i += 4;
  return char32_t((b & 0x07) << 18 | (p[i - 3] & 0x3F) << 12 | (p[i - 2] & 0x3F) << 6 | (p[i - 1] & 0x3F));
}

struct cp_range { char32_t first, last; };

/// Letters (Lo, Lm, Ll, Lu) assigned in Unicode 15.1 and 16.0: \p{L} to Oniguruma, unassigned
/// to utf8proc 2.8.
inline constexpr cp_range letters_after_unicode_15[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0xA7CD}, {0xA7DA, 0xA7DC}, {0x105C0, 0x105F3}, {0x10D4A, 0x10D65},
    {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E},
    {0x11390, 0x113B5}, {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0},
    {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF}, {0x1E5D0, 0x1E5ED},
    {0x1E5F0, 0x1E5F0}, {0x2EBF0, 0x2EE5D}};

/// Decimal digits assigned in Unicode 16.0: \p{N} to Oniguruma and numeric to Rust.
inline constexpr cp_range numbers_after_unicode_15[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1E5F1, 0x1E5FA}};

/// Digits assigned in Unicode 17.0: numeric to Rust (HF's Digits pre-tokenizer) only.
inline constexpr cp_range numbers_of_unicode_17[] = {{0x11DE0, 0x11DE9}, {0x16FF4, 0x16FF6}};

template <std::size_t N>
inline bool in_ranges(const cp_range (&ranges)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                             [](char32_t v, const cp_range& r) { return v < r.first; });
  return it != std::begin(ranges) && c <= std::prev(it)->last;
}

/// The classes the pre-tokenizers' expressions test: \p{L}, \p{N}, \s, anything else; plus
/// `digit_flag` for the characters the smollm pre-split isolates (Rust's is_numeric).
enum char_class : std::uint8_t { letter = 0, number = 1, space = 2, other = 3 };
inline constexpr std::uint8_t class_mask = 3, digit_flag = 4;

inline std::uint8_t classify(char32_t c) {
  if (c < 0x80) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return letter;
    if (c >= '0' && c <= '9') return number | digit_flag;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return space;
    return other;
  }
  switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return letter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return number | digit_flag;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      return space;
    case UTF8PROC_CATEGORY_CN:
      if (in_ranges(letters_after_unicode_15, c)) return letter;
      if (in_ranges(numbers_after_unicode_15, c)) return number | digit_flag;
      if (in_ranges(numbers_of_unicode_17, c)) return other | digit_flag;
      return other;
    default:
      return c == 0x85 ? space : other;  // NEL is White_Space but Cc
  }
}

/// Splits valid UTF-8 into pre-tokenizer pieces; reuses its buffers between calls.
class splitter {
 public:
  /// Calls emit(std::string_view) for each piece of `text` (valid UTF-8) in order.
  template <class Emit>
  void split(std::string_view text, pre_tokenizer kind, Emit&& emit) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    cps_.clear();
    cls_.clear();
    at_.clear();
    for (std::size_t i = 0; i < text.size();) {
      at_.push_back(i);
      const char32_t c = next_code_point(p, i);
      cps_.push_back(c);
      cls_.push_back(classify(c));
    }
    at_.push_back(text.size());
    const std::size_t n = cps_.size();
    auto piece = [&](std::size_t a, std::size_t b) { emit(text.substr(at_[a], at_[b] - at_[a])); };
    if (kind == pre_tokenizer::llama3) {
      for (std::size_t i = 0; i < n;) { const std::size_t e = llama3_match(i, n); piece(i, e); i = e; }
      return;
    }
    std::size_t start = 0;
    for (std::size_t d = 0; d <= n; ++d) {
      if (d < n && (kind != pre_tokenizer::smollm || !(cls_[d] & digit_flag))) continue;
      // [start, d) is a stretch without digits: the GPT-2 expression runs on it alone.
      for (std::size_t i = start; i < d;) { const std::size_t e = gpt2_match(i, d); piece(i, e); i = e; }
      if (d < n) piece(d, d + 1);
      start = d + 1;
    }
  }

 private:
  std::vector<char32_t> cps_;
  std::vector<std::uint8_t> cls_;
  std::vector<std::size_t> at_;  // byte offset of each code point, then the end

  char_class cls(std::size_t i) const { return char_class(cls_[i] & class_mask); }
  std::size_t run_end(std::size_t i, std::size_t n, char_class k) const {
    while (i < n && cls(i) == k) ++i;
    return i;
  }
  /// The end of "\s+(?!\S)|\s+" at i (a space character).
  std::size_t whitespace_end(std::size_t i, std::size_t n) const {
    const std::size_t e = run_end(i, n, space);
    return e < n && e - i >= 2 ? e - 1 : e;
  }

  /// The end of the GPT-2 expression's match at i, within [i, n).
  std::size_t gpt2_match(std::size_t i, std::size_t n) const {
    const char32_t c = cps_[i];
    if (c == '\'' && i + 1 < n) {
      const char32_t a = cps_[i + 1];
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
      if (i + 2 < n) {
        const char32_t b = cps_[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
      }
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space, then a run of one class.
    const char_class k = cls(i);
    if (c == ' ' && i + 1 < n && cls(i + 1) != space) return run_end(i + 1, n, cls(i + 1));
    if (k != space) return run_end(i, n, k);
    return whitespace_end(i, n);
  }

  static bool is_cr_lf(char32_t c) { return c == '\r' || c == '\n'; }
  /// (?i:...) letters: Oniguruma folds U+017F LATIN SMALL LETTER LONG S to 's'.
  static bool letter_is(char32_t c, char lower) {
    return c == char32_t(lower) || c == char32_t(lower - 32) || (lower == 's' && c == 0x17F);
  }

  /// The end of the Llama 3 expression's match at i, within [i, n).
  std::size_t llama3_match(std::size_t i, std::size_t n) const {
    const char32_t c = cps_[i];
    if (c == '\'' && i + 1 < n) {
      const char32_t a = cps_[i + 1];
      if (letter_is(a, 's') || letter_is(a, 't') || letter_is(a, 'm') || letter_is(a, 'd')) return i + 2;
      if (i + 2 < n) {
        const char32_t b = cps_[i + 2];
        if ((letter_is(a, 'r') && letter_is(b, 'e')) || (letter_is(a, 'v') && letter_is(b, 'e')) ||
            (letter_is(a, 'l') && letter_is(b, 'l')))
          return i + 3;
      }
    }
    const char_class k = cls(i);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (k == letter) return run_end(i, n, letter);
    if (k != number && !is_cr_lf(c) && i + 1 < n && cls(i + 1) == letter) return run_end(i + 1, n, letter);
    // \p{N}{1,3}
    if (k == number) return std::min(run_end(i, n, number), i + 3);
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    std::size_t j = i;
    if (c == ' ' && i + 1 < n && cls(i + 1) == other) j = i + 1;
    if (cls(j) == other) {
      j = run_end(j, n, other);
      while (j < n && is_cr_lf(cps_[j])) ++j;
      return j;
    }
    // \s*[\r\n]+ : the whitespace run up to its last CR or LF, if it holds one.
    const std::size_t e = run_end(i, n, space);
    for (std::size_t r = e; r > i; --r)
      if (is_cr_lf(cps_[r - 1])) return r;
    return whitespace_end(i, n);
  }
};

}  // namespace detail

/// The pieces of `utf8` (views into it) that BPE merges run on, one by one. Throws
/// tokenizer_error naming the byte offset if `utf8` is not valid UTF-8.
inline std::vector<std::string_view> pre_tokenize(std::string_view utf8, pre_tokenizer kind) {
  detail::require_utf8(utf8);
  std::vector<std::string_view> out;
  detail::splitter().split(utf8, kind, [&](std::string_view piece) { out.push_back(piece); });
  return out;
}

}  // namespace luminal::bpe
