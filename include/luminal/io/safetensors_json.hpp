// The JSON lexer behind load_safetensors (safetensors_header.hpp reads the header with
// it). A small scanner instead of a general JSON library, because a checkpoint may come
// from anyone:
//   - no recursion: nesting is a counted vector of open brackets, limited to 127 levels
//     (serde_json, the reference implementation's parser, refuses the 128th), so a
//     deeply nested file cannot overflow the stack;
//   - one pass, linear in the text; nothing is kept but what the caller reads;
//   - exactly JSON's grammar (RFC 8259): whitespace is space, tab, CR and LF only, strings
//     must escape control characters, lone surrogates in \u escapes are refused;
//   - error messages quote at most a short excerpt of the text, never a whole value.
//
//     luminal::detail::safetensors::json_scanner scan(R"({"a": [1, 2]})", "model.safetensors");
//     scan.open('{');
//     std::string key = scan.read_key();   // "a"
//     scan.skip_value();                   // [1, 2]
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace luminal {

/// A checkpoint could not be written, or a file is not a valid checkpoint. The message
/// names the file and what is wrong with it.
class checkpoint_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail::safetensors {

[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw checkpoint_error("luminal: checkpoint '" + path + "': " + what);
}

inline std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// At most `limit` bytes of `text` (cut at a UTF-8 character boundary) and "..." if
/// cut: names and tokens from a hostile file can be megabytes long.
inline std::string excerpt(std::string_view text, std::size_t limit = 80) {
  if (text.size() <= limit) return std::string(text);
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

/// Index of the first byte of `text` that is not valid UTF-8 (as Rust's from_utf8 defines
/// it: no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
inline std::size_t invalid_utf8_at(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

/// serde_json refuses a value nested 128 arrays or objects deep (its recursion limit).
inline constexpr std::size_t max_nesting = 127;

/// A cursor over the header text with JSON's lexical rules. Nesting is tracked in a
/// vector of open brackets (never by recursion) and bounded by max_nesting.
class json_scanner {
 public:
  json_scanner(std::string_view text, std::string path) : text_(text), path_(std::move(path)) {
    open_.reserve(max_nesting);
  }

  [[noreturn]] void syntax_error(const std::string& what) const {
    fail(path_, "header is not valid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  [[noreturn]] void fail_here(const std::string& what) const { fail(path_, what); }

  void skip_whitespace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++pos_;
    }
  }
  /// The next significant character (after whitespace), or '\0' at the end of the text.
  char peek() {
    skip_whitespace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool at_end() { return peek() == '\0' && pos_ == text_.size(); }
  std::size_t position() const { return pos_; }

  void expect(char c) {
    if (peek() != c) syntax_error(std::string("expected '") + c + "', found " + describe_next());
    ++pos_;
  }

  /// Opens an array or object ('[' or '{' is next): counts one nesting level.
  void open(char bracket) {
    expect(bracket);
    if (open_.size() >= max_nesting)
      fail(path_, "header nests arrays and objects " + std::to_string(max_nesting + 1) + " deep at byte " +
                      std::to_string(pos_ - 1) + "; at most " + std::to_string(max_nesting) + " levels are allowed");
    open_.push_back(bracket);
  }
  /// After a member of the innermost array or object: true if another follows (the ','
  /// is consumed), false if it closed (the bracket is consumed).
  bool next_member() {
    const char close = open_.back() == '{' ? '}' : ']';
    const char c = peek();
    if (c == ',') {
      ++pos_;
      return true;
    }
    if (c == close) {
      ++pos_;
      open_.pop_back();
      return false;
    }
    syntax_error(std::string("expected ',' or '") + close + "', found " + describe_next());
  }
  /// Right after open(): true if the array or object is empty (and now closed).
  bool close_if_empty() {
    const char close = open_.back() == '{' ? '}' : ']';
    if (peek() != close) return false;
    ++pos_;
    open_.pop_back();
    return true;
  }

  /// A string, unescaped. The text is known to be UTF-8 (checked before scanning).
  std::string read_string() {
    std::string out;
    read_string_into(out);
    return out;
  }
  void read_string_into(std::string& out) {
    out.clear();
    if (peek() != '"') syntax_error("expected a string, found " + describe_next());
    ++pos_;
    for (;;) {
      std::size_t run = pos_;
      while (run < text_.size() && text_[run] != '"' && text_[run] != '\\' &&
             static_cast<unsigned char>(text_[run]) >= 0x20)
        ++run;
      out.append(text_.substr(pos_, run - pos_));
      pos_ = run;
      if (pos_ >= text_.size()) syntax_error("the text ends inside a string");
      const char c = text_[pos_++];
      if (c == '"') return;
      if (c != '\\') {
        --pos_;
        syntax_error("control character in a string (it must be escaped)");
      }
      if (pos_ >= text_.size()) syntax_error("the text ends inside a string");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, read_code_point()); break;
        default: --pos_, syntax_error(std::string("invalid escape '\\") + e + "' in a string");
      }
    }
  }

  /// A number token, checked against JSON's grammar; returns its text.
  std::string_view read_number() {
    const std::size_t start = (skip_whitespace(), pos_);
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') ++pos_;
    else if (digits() == 0) syntax_error("expected a value, found " + describe_next());
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) syntax_error("expected a digit after the decimal point");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) syntax_error("expected a digit in the exponent");
    }
    return text_.substr(start, pos_ - start);
  }

  /// A non-negative integer no larger than `max`: reads it into `out` and returns true, or
  /// returns false leaving the position unchanged (the caller reports what it found).
  bool read_unsigned(std::uint64_t& out, std::uint64_t max) {
    const char c = peek();
    if (c < '0' || c > '9') return false;
    const std::size_t start = pos_;
    const std::string_view token = read_number();
    std::uint64_t value = 0;
    for (char d : token) {
      if (d < '0' || d > '9' || value > (max - std::uint64_t(d - '0')) / 10) {
        pos_ = start;
        return false;
      }
      value = value * 10 + std::uint64_t(d - '0');
    }
    out = value;
    return true;
  }

  /// Skips one value of any kind, checking its syntax and its nesting, in a loop.
  void skip_value() {
    const std::size_t base = open_.size();
    for (;;) {
      // A value starts here.
      switch (peek()) {
        case '{':
          open('{');
          if (close_if_empty()) break;
          read_key();
          continue;  // its first member's value
        case '[':
          open('[');
          if (close_if_empty()) break;
          continue;
        case '"': {
          std::string ignored;
          read_string_into(ignored);
          break;
        }
        case 't': read_literal("true"); break;
        case 'f': read_literal("false"); break;
        case 'n': read_literal("null"); break;
        default: read_number(); break;
      }
      // A value ended: close brackets until another member follows, or `base` is reached.
      for (;;) {
        if (open_.size() == base) return;
        if (next_member()) {
          if (open_.back() == '{') read_key();
          break;
        }
      }
    }
  }

  /// The text at the current position, cut short, for error messages: "-2", "\"2\"",
  /// "[[[[...", or "nothing" at the end of the header.
  std::string next_token_text() {
    skip_whitespace();
    if (pos_ >= text_.size()) return "nothing";
    std::size_t end = pos_ + 1;
    while (end < text_.size() && end - pos_ < 40 && text_[end] != ',' && text_[end] != '}' && text_[end] != ']' &&
           text_[end] != ':')
      ++end;
    std::string shown = excerpt(text_.substr(pos_, end - pos_), 32);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    return shown;
  }
  /// next_token_text() quoted, or "the end of the header".
  std::string describe_next() {
    skip_whitespace();
    return pos_ >= text_.size() ? std::string("the end of the header") : "'" + next_token_text() + "'";
  }

  /// The first character of the next value: fails with a syntax error if no JSON value
  /// can start there, so that a wrong kind of value is told apart from broken JSON.
  char peek_value() {
    const char c = peek();
    const bool starts_value = c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' ||
                              (c >= '0' && c <= '9');
    if (!starts_value) syntax_error("expected a value, found " + describe_next());
    return c;
  }

  /// An object key and the ':' after it.
  std::string read_key() {
    std::string key = read_string();
    expect(':');
    return key;
  }

 private:
  void read_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) syntax_error("expected a value, found " + describe_next());
    pos_ += word.size();
  }

  unsigned read_hex4() {
    if (text_.size() - pos_ < 4) syntax_error("the text ends inside a \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = text_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= unsigned(h - '0');
      else if (h >= 'a' && h <= 'f') v |= unsigned(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= unsigned(h - 'A' + 10);
      else --pos_, syntax_error("invalid hex digit in a \\u escape");
    }
    return v;
  }
  /// After "\u": a code point, joining a surrogate pair; a lone surrogate is an error.
  std::uint32_t read_code_point() {
    const unsigned first = read_hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) syntax_error("lone low surrogate in a \\u escape");
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (text_.substr(pos_, 2) != "\\u") syntax_error("lone high surrogate in a \\u escape");
    pos_ += 2;
    const unsigned second = read_hex4();
    if (second < 0xDC00 || second > 0xDFFF) syntax_error("lone high surrogate in a \\u escape");
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  std::string path_;
  std::size_t pos_ = 0;
  std::vector<char> open_;  // the brackets of the arrays and objects we are inside
};

}  // namespace detail::safetensors
}  // namespace luminal

