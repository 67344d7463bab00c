// BERT's uncased WordPiece tokenizer, matching Hugging Face `tokenizers` (BertNormalizer with
// lowercase + BertPreTokenizer + WordPiece + the [CLS] ... [SEP] template) as configured for
// sentence-transformers/all-MiniLM-L6-v2 and the other uncased BERT vocabularies.
//
//     luminal::wordpiece::tokenizer tok("all-MiniLM-L6-v2/vocab.txt");
//     std::vector<std::int32_t> ids = tok.encode("Café naïve!");  // {101, 7668, 15743, 999, 102}
//     tok.wordpieces("unaffable");                                 // {"una", "##ffa", "##ble"}
//
// The steps, as in `tokenizers`:
//  - the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] written literally in the text (case
//    sensitive) are kept whole as their own ids (HF's added tokens, not normalized);
//  - the rest is cleaned (U+0000, U+FFFD and categories Cc Cf Co other than \t \n \r dropped,
//    unassigned code points kept; White_Space mapped to ' '), CJK ideographs get spaces around
//    them, NFD with the Mn marks removed, lower-cased (Rust's char::to_lowercase);
//  - words are split on whitespace, each punctuation character (ASCII punctuation or Unicode
//    P*) becoming a word of its own;
//  - each word is split greedily longest-match-first, continuations prefixed "##"; a word of
//    more than 100 code points, or one that cannot be split, becomes [UNK].
// tokenizers takes the categories (Cc Cf Co, Mn, P*) from Unicode 8.0 tables: characters
// added later count as ordinary letters here too (newer_than_unicode_8 below).
//
// The text is read one character at a time and encoding stops once the pieces fill
// max_tokens: the memory and time of an encoding are bounded by the ids it returns, not by
// the length of the text (a 50 MB line costs what its first 256 pieces cost, and UTF-8
// after the cut is not looked at). wordpiece::encoder takes the text in parts, as it is
// read:
//
//     luminal::wordpiece::encoder enc(tok, 256);
//     while (enc.wants_more() && read_some(buffer)) enc.feed(buffer);  // stops reading early
//     std::vector<std::int32_t> ids = enc.finish();
//
// Unicode data comes from utf8proc rather than ICU because it is small and does exactly the
// NFD, general-category and case mapping needed here. Link with -lutf8proc.
#pragma once
#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace luminal::wordpiece {

/// A vocabulary that cannot be loaded, text that is not valid UTF-8, an unknown token or id.
class tokenizer_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Appends code point `c` to `s` as UTF-8.
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

/// Ranges holding the code points assigned after Unicode 8.0 whose category (in utf8proc 2.8's
/// Unicode 15.0 or in Unicode 17.0) is Mn, P* or C*; the gaps inside a range hold only
/// characters that count as ordinary anyway. tokenizers classifies characters with the
/// unicode_categories crate, whose tables are Unicode 8.0: to it all of these are ordinary.
/// Found by comparing every code point with HF tokenizers 0.23.
struct cp_range { char32_t first, last; };
inline constexpr cp_range newer_than_unicode_8[] = {
    {0x5C8, 0x5C9}, {0x61D, 0x61D}, {0x7FD, 0x7FD}, {0x890, 0x8E2}, {0x9FD, 0x9FE}, {0xA76, 0xA76},
    {0xAFA, 0xAFF}, {0xB53, 0xB55}, {0xC04, 0xC3C}, {0xC77, 0xC77}, {0xC84, 0xC84}, {0xD00, 0xD00},
    {0xD3B, 0xD3C}, {0xD81, 0xD81}, {0xEBA, 0xEBA}, {0xECE, 0xECE}, {0x180F, 0x180F}, {0x1885, 0x1886},
    {0x1ABF, 0x1AF0}, {0x1B4E, 0x1B4F}, {0x1B7D, 0x1B7F}, {0x1DF6, 0x1DFB}, {0x2E43, 0x2E63}, {0xA82C, 0xA82C},
    {0xA8C5, 0xA8C5}, {0xA8FF, 0xA8FF}, {0xA9BD, 0xA9BD}, {0x10D24, 0x10D27}, {0x10D69, 0x10D6E},
    {0x10EAB, 0x10EFF}, {0x10F46, 0x10F89}, {0x11070, 0x11074}, {0x110C2, 0x110CD}, {0x111CF, 0x111CF},
    {0x1123E, 0x11241}, {0x1133B, 0x1133B}, {0x113BB, 0x113E2}, {0x11438, 0x1145E}, {0x11660, 0x1166C},
    {0x116B9, 0x116B9}, {0x1182F, 0x1183B}, {0x1193B, 0x11946}, {0x119D4, 0x11AA2}, {0x11B00, 0x11B09},
    {0x11B60, 0x11B66}, {0x11BE1, 0x11BE1}, {0x11C30, 0x11CB6}, {0x11D31, 0x11D47}, {0x11D90, 0x11D97},
    {0x11DF0, 0x11DF0}, {0x11EF3, 0x11F5A}, {0x11FFF, 0x11FFF}, {0x12FF1, 0x12FF2}, {0x13430, 0x13455},
    {0x1611E, 0x1612F}, {0x16D6D, 0x16D6F}, {0x16E97, 0x16E9A}, {0x16F4F, 0x16F4F}, {0x16FE2, 0x16FE4},
    {0x1CF00, 0x1CF46}, {0x1D127, 0x1D128}, {0x1D25B, 0x1D25C}, {0x1E000, 0x1E02A}, {0x1E08F, 0x1E08F},
    {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1E5EE, 0x1E5FF}, {0x1E6E3, 0x1E6F5},
    {0x1E944, 0x1E95F}
};

/// The general category as tokenizers sees it (Unicode 8.0 for Mn, P* and C*).
inline utf8proc_category_t category(char32_t c) {
  auto it = std::upper_bound(std::begin(newer_than_unicode_8), std::end(newer_than_unicode_8), c,
                             [](char32_t v, const cp_range& r) { return v < r.first; });
  if (it != std::begin(newer_than_unicode_8) && c <= std::prev(it)->last) return UTF8PROC_CATEGORY_CN;
  if (c == 0x1734 || c == 0x1171E) return UTF8PROC_CATEGORY_MN;  // Mn in Unicode 8.0, Mc later
  if (c == 0x166D || c == 0x111C9) return UTF8PROC_CATEGORY_PO;  // Po in Unicode 8.0, So / Mn later
  return utf8proc_category(utf8proc_int32_t(c));
}

/// Rust's char::is_whitespace (the White_Space property).
inline bool is_whitespace(char32_t c) {
  if ((c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85) return true;
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

/// tokenizers' is_control: category Cc, Cf, Cs or Co, except \t \n \r (Cn is kept).
inline bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const auto k = category(c);
  return k >= UTF8PROC_CATEGORY_CC && k <= UTF8PROC_CATEGORY_CO;
}

/// tokenizers' is_chinese_char. Note 0x2B920, not BERT's 0x2B820: the Rust crate's range
/// starts there, so U+2B820..U+2B91F get no spaces around them.
inline bool is_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// ASCII punctuation (including the symbols $ + < = > ^ ` |) or Unicode category P*.
inline bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  const auto k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

}  // namespace detail

/// An uncased BERT WordPiece tokenizer over a vocab.txt (one token per line, id = line number).
class tokenizer {
 public:
  /// Loads `vocab_txt`. Throws tokenizer_error if the file is missing or unreadable, holds no
  /// tokens, repeats a token, or lacks one of [CLS] [SEP] [UNK] [PAD].
  explicit tokenizer(const std::filesystem::path& vocab_txt) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(vocab_txt, ec))
      throw tokenizer_error("luminal: the vocabulary file '" + vocab_txt.string() + "' does not exist or is not a file");
    std::ifstream in(vocab_txt, std::ios::binary);
    if (!in) throw tokenizer_error("luminal: cannot open the vocabulary file '" + vocab_txt.string() + "'");
    std::string all;
    try {
      all.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception& e) {
      throw tokenizer_error("luminal: cannot read the vocabulary file '" + vocab_txt.string() + "': " + e.what());
    }
    if (in.bad()) throw tokenizer_error("luminal: cannot read the vocabulary file '" + vocab_txt.string() + "'");
    std::size_t pos = 0;
    while (pos < all.size()) {
      std::size_t end = all.find('\n', pos);
      if (end == std::string::npos) end = all.size();
      std::string tok = all.substr(pos, end - pos);
      pos = end + 1;
      if (!tok.empty() && tok.back() == '\r') tok.pop_back();
      const auto id = std::int32_t(tokens_.size());
      if (!ids_.emplace(tok, id).second)
        throw tokenizer_error("luminal: vocabulary '" + vocab_txt.string() + "' repeats the token '" + tok +
                              "' on line " + std::to_string(id + 1) + " (first on line " +
                              std::to_string(ids_.at(tok) + 1) + ")");
      max_token_bytes_ = std::max(max_token_bytes_, tok.size());
      tokens_.push_back(std::move(tok));
    }
    if (tokens_.empty()) throw tokenizer_error("luminal: vocabulary '" + vocab_txt.string() + "' is empty");
    auto special = [&](const char* name) {
      auto it = ids_.find(name);
      if (it == ids_.end())
        throw tokenizer_error("luminal: vocabulary '" + vocab_txt.string() + "' has no " + name + " token");
      return it->second;
    };
    cls_ = special("[CLS]");
    sep_ = special("[SEP]");
    unk_ = special("[UNK]");
    pad_ = special("[PAD]");
  }

  /// The ids of `utf8`, [CLS] first and [SEP] last, truncated to at most `max_tokens` ids in all.
  /// Throws tokenizer_error for invalid UTF-8 (before the cut), std::invalid_argument if
  /// max_tokens < 2. Reads only as much of the text as those ids need.
  std::vector<std::int32_t> encode(std::string_view utf8, std::size_t max_tokens = 256) const;

  /// The word pieces of `utf8`, without [CLS], [SEP] or truncation (for debugging).
  std::vector<std::string> wordpieces(std::string_view utf8) const;

  std::size_t vocab_size() const { return tokens_.size(); }

  /// The id of `token`; throws tokenizer_error if the vocabulary lacks it.
  std::int32_t id(std::string_view token) const {
    auto it = ids_.find(std::string(token));
    if (it == ids_.end()) throw tokenizer_error("luminal: the vocabulary has no token '" + std::string(token) + "'");
    return it->second;
  }

  /// The token with id `id`; throws tokenizer_error if it is out of range.
  const std::string& token(std::int32_t id) const {
    if (id < 0 || std::size_t(id) >= tokens_.size())
      throw tokenizer_error("luminal: token id " + std::to_string(id) + " is outside the vocabulary (size " +
                            std::to_string(tokens_.size()) + ")");
    return tokens_[std::size_t(id)];
  }

  std::int32_t cls_id() const { return cls_; }
  std::int32_t sep_id() const { return sep_; }
  std::int32_t pad_id() const { return pad_; }
  std::int32_t unk_id() const { return unk_; }

 private:
  friend class encoder;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::size_t max_token_bytes_ = 0;
  std::int32_t cls_ = 0, sep_ = 0, unk_ = 0, pad_ = 0;

  /// The id of a special token of the vocabulary written at the start of `rest` (bytes:
  /// the names are ASCII), or -1; `partial` is set when `rest` is a proper prefix of one
  /// (more text could complete it).
  std::int32_t special_at(std::string_view rest, std::size_t& length, bool& partial) const {
    partial = false;
    for (const char* name : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
      const std::string_view s(name);
      if (rest.size() < s.size()) {
        if (s.starts_with(rest) && ids_.count(std::string(s))) partial = true;
        continue;
      }
      if (!rest.starts_with(s)) continue;
      auto it = ids_.find(std::string(s));
      if (it == ids_.end()) continue;
      length = s.size();
      return it->second;
    }
    return -1;
  }

  /// Greedy longest-match-first WordPiece on one word.
  template <class Emit>
  void split_word(const char32_t* first, const char32_t* last, std::size_t limit, std::size_t& count,
                  Emit& emit) const {
    const auto chars = std::size_t(last - first);
    if (chars > 100) { emit(unk_); ++count; return; }
    std::string word;
    std::vector<std::size_t> at;  // byte offset of each character, then the end
    for (const char32_t* p = first; p != last; ++p) {
      at.push_back(word.size());
      detail::append_utf8(word, *p);
    }
    at.push_back(word.size());
    std::vector<std::int32_t> pieces;
    std::string key;
    for (std::size_t start = 0; start < chars;) {
      const std::size_t prefix = start > 0 ? 2 : 0;
      std::size_t end = chars;
      // No vocabulary token is longer than max_token_bytes_: skip candidates that are.
      while (end > start && at[end] - at[start] + prefix > max_token_bytes_) --end;
      std::int32_t found = -1;
      for (; end > start; --end) {
        key.assign(start > 0 ? "##" : "");
        key.append(word, at[start], at[end] - at[start]);
        if (auto it = ids_.find(key); it != ids_.end()) { found = it->second; break; }
      }
      if (found < 0) { emit(unk_); ++count; return; }
      pieces.push_back(found);
      start = end;
    }
    for (std::size_t k = 0; k < pieces.size() && count < limit; ++k, ++count) emit(pieces[k]);
  }
};

/// Encodes one text given in parts (see the file comment): feed() the bytes as they come,
/// while wants_more(), then finish(). The result is tokenizer::encode's for the whole text.
/// The state is bounded: a word is kept up to 101 characters (a longer one is [UNK]
/// whatever follows), a run of combining marks up to 101, an unfinished UTF-8 sequence or
/// special token up to 5 bytes.
class encoder {
 public:
  /// Throws std::invalid_argument if max_tokens < 2 (room for [CLS] and [SEP]).
  explicit encoder(const tokenizer& vocabulary, std::size_t max_tokens = 256)
      : tok_(vocabulary), limit_(max_tokens < 2 ? 0 : max_tokens - 2) {
    if (max_tokens < 2)
      throw std::invalid_argument("luminal: wordpiece::tokenizer::encode(): max_tokens must be at least 2 (room for "
                                  "[CLS] and [SEP]), got " + std::to_string(max_tokens));
  }

  /// Whether more text can still change the ids (the pieces do not fill max_tokens yet).
  bool wants_more() const { return pieces_.size() < limit_ && !finished_; }

  /// The next bytes of the text. Returns wants_more(). Throws tokenizer_error for invalid
  /// UTF-8, naming the byte's offset in the whole text.
  bool feed(std::string_view bytes) {
    if (!wants_more()) return false;
    if (!carry_.empty()) {
      // An unfinished character or special token: completed from the new bytes.
      const std::size_t had = carry_.size(), take = std::min<std::size_t>(bytes.size(), 8);
      carry_.append(bytes.substr(0, take));
      const std::size_t used = consume(carry_, false);
      if (used < had) {  // still unfinished (few new bytes)
        carry_.erase(0, used);
        return wants_more();
      }
      bytes.remove_prefix(used - had);
      carry_.clear();
    }
    const std::size_t used = consume(bytes, false);
    if (wants_more()) carry_.assign(bytes.substr(used));
    return wants_more();
  }

  /// Ends the text and returns its ids: [CLS], the pieces, [SEP]. Throws tokenizer_error if
  /// the text ends inside a UTF-8 sequence.
  std::vector<std::int32_t> finish() {
    if (!finished_) {
      if (wants_more()) {
        const std::string rest = std::move(carry_);
        carry_.clear();
        consume(rest, true);
        end_segment();
      }
      finished_ = true;
    }
    std::vector<std::int32_t> ids;
    ids.reserve(pieces_.size() + 2);
    ids.push_back(tok_.cls_);
    ids.insert(ids.end(), pieces_.begin(), pieces_.end());
    ids.push_back(tok_.sep_);
    return ids;
  }

  /// The pieces so far, without [CLS] and [SEP].
  const std::vector<std::int32_t>& pieces() const { return pieces_; }

 private:
  static constexpr std::size_t max_word = 100;  // longer words are [UNK] (tokenizers' limit)

  /// Reads whole characters and special tokens of `bytes` while the pieces are wanted;
  /// returns how many bytes it used. Stops before an unfinished one unless `last`.
  std::size_t consume(std::string_view bytes, bool last) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t n = bytes.size();
    std::size_t i = 0;
    while (i < n && wants_more()) {
      const unsigned b = p[i];
      if (b == '[') {
        std::size_t length = 0;
        bool partial = false;
        const std::int32_t special = tok_.special_at(bytes.substr(i), length, partial);
        if (special >= 0) {
          end_segment();
          if (wants_more()) pieces_.push_back(special);
          i += length, offset_ += length;
          continue;
        }
        if (partial && !last) break;  // "[SE" and more to come
      }
      std::size_t len = 0;
      char32_t c = 0, lo = 0;
      if (b < 0x80) len = 1, c = b;
      else if (b >= 0xC2 && b <= 0xDF) len = 2, c = b & 0x1F, lo = 0x80;
      else if (b >= 0xE0 && b <= 0xEF) len = 3, c = b & 0x0F, lo = 0x800;
      else if (b >= 0xF0 && b <= 0xF4) len = 4, c = b & 0x07, lo = 0x10000;
      bool ok = len != 0;
      std::size_t k = 1;
      for (; ok && k < len && i + k < n; ++k) {
        if ((p[i + k] & 0xC0) != 0x80) ok = false;
        else c = (c << 6) | (p[i + k] & 0x3F);
      }
      if (ok && k < len) {  // the sequence goes on past these bytes
        if (!last) break;
        ok = false;
      }
      if (!ok || c < lo || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        throw tokenizer_error("luminal: the text is not valid UTF-8 at byte " + std::to_string(offset_));
      take(c);
      i += len, offset_ += len;
    }
    return i;
  }

  /// One character of the text through BertNormalizer: cleaned, CJK spaced, decomposed.
  void take(char32_t c) {
    if (c == 0 || c == 0xFFFD || detail::is_control(c)) return;
    if (detail::is_whitespace(c)) return decomposed(U' ');
    const bool chinese = detail::is_chinese(c);
    if (chinese) decomposed(U' ');
    utf8proc_int32_t buf[32];
    const auto count = utf8proc_decompose_char(utf8proc_int32_t(c), buf, 32, UTF8PROC_DECOMPOSE, nullptr);
    if (count <= 0 || count > 32) decomposed(c);  // cannot happen for valid code points
    else
      for (utf8proc_ssize_t k = 0; k < count; ++k) decomposed(char32_t(buf[k]));
    if (chinese) decomposed(U' ');
  }

  /// One character of the NFD text, in order. A run of combining marks (class > 0) is put
  /// in canonical order when it ends; the Mn marks are dropped (strip accents), which the
  /// stable ordering of the others does not notice.
  void decomposed(char32_t d) {
    const auto ccc = utf8proc_get_property(utf8proc_int32_t(d))->combining_class;
    if (ccc == 0) {
      end_run();
      if (detail::category(d) != UTF8PROC_CATEGORY_MN) normalized(d);
      return;
    }
    if (detail::category(d) == UTF8PROC_CATEGORY_MN) return;
    // A run of more than max_word kept marks makes its word too long to be anything but
    // [UNK], in whatever order: they need not be kept.
    if (run_.size() < max_word + 1) run_.push_back(d);
    else run_overflow_ = true;
  }
  void end_run() {
    if (run_.empty() && !run_overflow_) return;
    auto ccc = [](char32_t c) { return utf8proc_get_property(utf8proc_int32_t(c))->combining_class; };
    std::stable_sort(run_.begin(), run_.end(), [&](char32_t a, char32_t b) { return ccc(a) < ccc(b); });
    for (char32_t d : run_) normalized(d);
    if (run_overflow_) word_too_long_ = true;
    run_.clear();
    run_overflow_ = false;
  }

  /// One character of the normalized text (lower-cased here): whitespace ends a word,
  /// punctuation is a word of its own, anything else extends the word.
  void normalized(char32_t d) {
    // The only multi-character lowercase mapping, U+0130 -> "i\u0307", cannot occur
    // after NFD (which splits U+0130 into I + U+0307); kept for the record.
    if (d == 0x130) {
      word_character(U'i');
      word_character(0x307);
      return;
    }
    const auto c = char32_t(utf8proc_tolower(utf8proc_int32_t(d)));
    if (detail::is_whitespace(c)) return end_word();
    if (detail::is_punctuation(c)) {
      end_word();
      word_character(c);
      return end_word();
    }
    word_character(c);
  }
  void word_character(char32_t c) {
    if (word_.size() < max_word) word_.push_back(c);
    else word_too_long_ = true;
  }
  void end_word() {
    if (word_too_long_) {
      if (wants_more()) pieces_.push_back(tok_.unk_);
    } else if (!word_.empty() && wants_more()) {
      std::size_t count = pieces_.size();
      auto emit = [&](std::int32_t id) { pieces_.push_back(id); };
      tok_.split_word(word_.data(), word_.data() + word_.size(), limit_, count, emit);
    }
    word_.clear();
    word_too_long_ = false;
  }
  /// The end of the text, or a special token: the plain text before it ends here.
  void end_segment() {
    end_run();
    end_word();
  }

  const tokenizer& tok_;
  std::size_t limit_;
  std::vector<std::int32_t> pieces_;
  std::vector<char32_t> run_, word_;
  bool run_overflow_ = false, word_too_long_ = false, finished_ = false;
  std::string carry_;        // an unfinished UTF-8 sequence or special token
  std::size_t offset_ = 0;   // bytes of the text consumed, for messages
};

inline std::vector<std::int32_t> tokenizer::encode(std::string_view utf8, std::size_t max_tokens) const {
  encoder e(*this, max_tokens);
  e.feed(utf8);
  return e.finish();
}

inline std::vector<std::string> tokenizer::wordpieces(std::string_view utf8) const {
  encoder e(*this, std::size_t(-1));
  e.feed(utf8);
  std::vector<std::string> out;
  for (std::int32_t id : e.finish()) out.push_back(tokens_[std::size_t(id)]);
  out.erase(out.begin());  // [CLS]
  out.pop_back();          // [SEP]
  return out;
}

}  // namespace luminal::wordpiece
