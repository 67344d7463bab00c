// A GPT-2 style byte-level BPE tokenizer built from the plain data a GGUF file carries
// (tokenizer.ggml.tokens / merges / token_type / pre), matching Hugging Face tokenizers and
// llama.cpp on SmolLM2 (pre-tokenizer "smollm"), GPT-2 ("gpt2") and Llama 3 ("llama-bpe").
//
//     luminal::bpe::vocabulary v;               // from the GGUF reader
//     v.tokens = ...; v.merges = ...; v.token_types = ...; v.pre = "smollm";
//     luminal::bpe::tokenizer tok(v);
//     auto ids = tok.encode("<|im_start|>user\nHi 42<|im_end|>");  // {1, 4093, 198, 26843, 216, 36, 34, 2}
//     std::string text = tok.decode(ids);       // the same text back
//     luminal::bpe::stream_decoder out(tok);    // while generating:
//     std::cout << out.push(next_id);           // complete UTF-8 characters only
//
// Encoding: the text must be valid UTF-8 (else tokenizer_error naming the byte offset; HF takes
// only Python str, llama.cpp takes bytes). Control, user-defined and unknown tokens written in
// the text keep their ids (leftmost, longest first, as HF's added tokens) unless `as_text` is
// asked for; the text between them is pre-tokenized (bpe_pretokenize.hpp), each piece's bytes
// mapped to GPT-2's byte alphabet, and merged by rank: always the best-ranked adjacent pair,
// leftmost on ties (a heap over the pairs for long pieces). A piece that is a token of its
// own is looked up, not merged (with llama3 any token, HF's and llama.cpp's ignore_merges;
// otherwise only those that merging gives back, found once when the tokenizer is built).
// A byte with no token of its own is dropped as HF and llama.cpp drop it, its neighbours then
// merging as HF merges them (llama.cpp does not merge across it); `unknown_bytes::error`
// refuses such text instead. SmolLM2 has no token for 21 bytes: the control characters U+0004,
// U+0006, U+0013, U+0014, U+0016, U+001D, the lead bytes of the unassigned U+40000..U+BFFFF,
// and bytes that UTF-8 never uses.
//
// Decoding gives the bytes the tokens stand for: normal tokens through GPT-2's byte alphabet,
// control and user-defined tokens as their text. No space clean-up is done. stream_decoder
// holds back an incomplete UTF-8 sequence until its last byte arrives and replaces bytes that
// can never form a character with U+FFFD (one per maximal invalid subpart, as Python's
// errors="replace"); finish() replaces a held-back incomplete tail with one U+FFFD.
//
// Written by hand because the alternatives are heavy or inexact here: HF tokenizers (and its C
// bindings, tokenizers-cpp) needs a Rust toolchain and a runtime library; sentencepiece does not
// do GPT-2's byte-level BPE; tiktoken ports read rank files rather than merges and need PCRE2;
// llama.cpp's tokenizer is not separable from llama.cpp. utf8proc is already luminal::text's.
#pragma once
#include "bpe_pretokenize.hpp"
#include "bpe_tables.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace luminal::bpe {

/// GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class token_type : std::int32_t { undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

/// What a GGUF's tokenizer metadata holds, as plain data.
struct vocabulary {
  std::vector<std::string> tokens;        ///< tokenizer.ggml.tokens: id -> text (GPT-2 byte alphabet)
  std::vector<std::string> merges;        ///< tokenizer.ggml.merges: "left right", best rank first
  std::vector<std::int32_t> token_types;  ///< tokenizer.ggml.token_type; empty: all normal
  std::string pre = "gpt2";               ///< tokenizer.ggml.pre (pre_tokenizer_from_name)
  std::int32_t bos_id = -1;               ///< tokenizer.ggml.bos_token_id, -1 if none
  std::int32_t eos_id = -1;               ///< tokenizer.ggml.eos_token_id, -1 if none
};

/// Special tokens written in the text: recognised (HF, llama.cpp parse_special) or plain text.
enum class special_tokens { parse, as_text };
/// Bytes that have no token: dropped (HF, llama.cpp) or refused with tokenizer_error.
enum class unknown_bytes { drop, error };
/// Control and unknown tokens when decoding: their text, or nothing (HF skip_special_tokens).
enum class special_output { text, skip };

/// A byte-level BPE tokenizer. Immutable after construction: encode and decode may run on
/// several threads at once.
class tokenizer {
 public:
  /// Builds the tokenizer. Throws tokenizer_error if the vocabulary is empty or larger than
  /// int32, a token type is not 0..6, token_types and tokens differ in length, a merge is not
  /// "left right" of two tokens whose concatenation is a token, bos/eos is out of range, or
  /// the pre-tokenizer is unknown. A repeated merge keeps its first rank (as llama.cpp); a
  /// repeated token text maps to its last id (as HF and llama.cpp).
  explicit tokenizer(const vocabulary& v) : pre_(pre_tokenizer_from_name(v.pre)) {
    const std::size_t n = v.tokens.size();
    if (n == 0) throw tokenizer_error("luminal: the BPE vocabulary holds no tokens");
    if (n > std::size_t(std::numeric_limits<std::int32_t>::max()))
      throw tokenizer_error("luminal: the BPE vocabulary holds " + std::to_string(n) + " tokens, more than int32 ids can name");
    if (!v.token_types.empty() && v.token_types.size() != n)
      throw tokenizer_error("luminal: the BPE vocabulary has " + std::to_string(n) + " tokens but " +
                            std::to_string(v.token_types.size()) + " token types");
    ignore_merges_ = pre_ == pre_tokenizer::llama3;  // llama.cpp and HF's Llama 3 tokenizer.json
    bytes_.resize(n);
    texts_ = v.tokens;
    types_.assign(n, token_type::normal);
    ids_.reserve(n);
    byte_token_.fill(-1);
    std::string bytes;
    std::vector<std::int32_t> indexed;  // the tokens found by their bytes
    for (std::size_t id = 0; id < n; ++id) {
      const std::string& text = v.tokens[id];
      if (!v.token_types.empty()) {
        const std::int32_t t = v.token_types[id];
        if (t < 0 || t > 6)
          throw tokenizer_error("luminal: BPE token " + std::to_string(id) + " has type " + std::to_string(t) +
                                ", expected 0..6 (GGUF token types)");
        types_[id] = token_type(t);
      }
      ids_[text] = std::int32_t(id);
      const bool special = is_special(types_[id]);
      // Normal tokens are written in the byte alphabet; special ones, and any normal one that
      // is not (as HF's ByteLevel decoder does), stand for their own UTF-8 text.
      const bool byte_level = detail::bytes_of_byte_level(text, bytes);
      bytes_[id] = special || !byte_level ? text : bytes;
      if (byte_level && bytes_[id] == bytes) indexed.push_back(std::int32_t(id));
      if (special && !text.empty()) specials_.push_back(std::int32_t(id));
    }
    for (unsigned b = 0; b < 256; ++b) {
      std::string one;
      detail::append_utf8(one, detail::byte_to_code_point()[b]);
      if (auto it = ids_.find(one); it != ids_.end()) byte_token_[b] = it->second;
    }
    merges_.reserve(v.merges.size());
    for (std::size_t rank = 0; rank < v.merges.size(); ++rank) add_merge(v.merges[rank], rank);
    // Longest first, so that the first special token matching at a position is the longest.
    std::stable_sort(specials_.begin(), specials_.end(),
                     [&](std::int32_t a, std::int32_t b) { return bytes_[a].size() > bytes_[b].size(); });
    for (std::int32_t id : specials_) special_first_byte_[(unsigned char)bytes_[id][0]] = true;
    auto check_id = [&](std::int32_t id, const char* what) {
      if (id < -1 || id >= std::int32_t(n))
        throw tokenizer_error(std::string("luminal: the BPE vocabulary's ") + what + " id " + std::to_string(id) +
                              " is outside the vocabulary (size " + std::to_string(n) + ")");
      return id;
    };
    bos_ = check_id(v.bos_id, "BOS");
    eos_ = check_id(v.eos_id, "EOS");
    // A piece whose bytes are a token that BPE makes of those bytes needs no merging: most
    // words are. Which tokens are so is found by merging each once.
    by_bytes_.build(bytes_, indexed);
    whole_.assign(n, 0);
    merger m;
    std::vector<std::int32_t> got;
    for (std::int32_t id : indexed) {
      got.clear();
      m.run(*this, bytes_[std::size_t(id)], got, [](std::size_t) {});
      whole_[std::size_t(id)] = got.size() == 1 && got[0] == id;
    }
  }

  /// The ids of `utf8`. Throws tokenizer_error naming the byte offset if it is not valid UTF-8,
  /// or (unknown_bytes::error) holds a byte that has no token. Adds no BOS or EOS.
  std::vector<std::int32_t> encode(std::string_view utf8, special_tokens specials = special_tokens::parse,
                                   unknown_bytes unknown = unknown_bytes::drop) const {
    detail::require_utf8(utf8);
    std::vector<std::int32_t> out;
    out.reserve(utf8.size() / 3 + 4);
    session s{*this, utf8, unknown, out};
    std::size_t plain = 0;
    if (specials == special_tokens::parse && !specials_.empty()) {
      for (std::size_t i = 0; i < utf8.size(); ++i) {
        if (!special_first_byte_[(unsigned char)utf8[i]]) continue;
        for (std::int32_t id : specials_) {
          const std::string& t = bytes_[std::size_t(id)];
          if (utf8.compare(i, t.size(), t) != 0) continue;
          s.plain(plain, i);
          out.push_back(id);
          plain = i + t.size();
          i = plain - 1;
          break;
        }
      }
    }
    s.plain(plain, utf8.size());
    return out;
  }

  /// The bytes `ids` stand for (not always valid UTF-8: a token may end inside a character).
  /// Throws tokenizer_error naming the position of an id outside the vocabulary.
  std::string decode(std::span<const std::int32_t> ids, special_output specials = special_output::text) const {
    std::string out;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::int32_t id = checked(ids[k], k);
      if (specials == special_output::skip && (types_[id] == token_type::control || types_[id] == token_type::unknown))
        continue;
      out += bytes_[std::size_t(id)];
    }
    return out;
  }

  /// The bytes one token stands for.
  const std::string& token_bytes(std::int32_t id) const { return bytes_[std::size_t(checked(id, 0))]; }
  /// The token's text as the vocabulary writes it (GPT-2's byte alphabet for normal tokens).
  const std::string& token(std::int32_t id) const { return texts_[std::size_t(checked(id, 0))]; }
  /// The id of a token text as the vocabulary writes it; throws tokenizer_error if absent.
  std::int32_t id(std::string_view text) const {
    auto it = ids_.find(std::string(text));
    if (it == ids_.end()) throw tokenizer_error("luminal: the BPE vocabulary has no token '" + std::string(text) + "'");
    return it->second;
  }
  /// The id of the token of the single byte `b`, -1 if the vocabulary has none (encode drops it).
  std::int32_t byte_id(unsigned char b) const { return byte_token_[b]; }
  token_type type(std::int32_t id) const { return types_[std::size_t(checked(id, 0))]; }
  std::size_t vocab_size() const { return bytes_.size(); }
  std::size_t merge_count() const { return merge_count_; }
  pre_tokenizer pre() const { return pre_; }
  std::int32_t bos_id() const { return bos_; }  ///< -1 if the vocabulary names none
  std::int32_t eos_id() const { return eos_; }  ///< -1 if the vocabulary names none

 private:
  pre_tokenizer pre_;
  bool ignore_merges_ = false;
  std::vector<std::string> bytes_;                    // id -> the bytes it stands for
  std::vector<token_type> types_;
  std::unordered_map<std::string, std::int32_t> ids_;       // vocabulary text -> id
  detail::bytes_index by_bytes_;                      // bytes -> id (tokens written in the byte alphabet)
  std::vector<std::uint8_t> whole_;                   // id -> BPE of its bytes gives this token
  std::vector<std::string> texts_;                    // id -> text as the vocabulary writes it
  std::array<std::int32_t, 256> byte_token_{};        // byte -> id of its one-character token
  detail::merge_table merges_;
  std::size_t merge_count_ = 0;
  std::vector<std::int32_t> specials_;                // control/user-defined/unknown, longest first
  std::array<bool, 256> special_first_byte_{};
  std::int32_t bos_ = -1, eos_ = -1;

  static bool is_special(token_type t) {
    return t == token_type::control || t == token_type::user_defined || t == token_type::unknown;
  }

  std::int32_t checked(std::int32_t id, std::size_t position) const {
    if (id < 0 || std::size_t(id) >= bytes_.size())
      throw tokenizer_error("luminal: token id " + std::to_string(id) + " at position " + std::to_string(position) +
                            " is outside the vocabulary (size " + std::to_string(bytes_.size()) + ")");
    return id;
  }

  void add_merge(const std::string& m, std::size_t rank) {
    const std::size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    auto fail = [&](const std::string& why) {
      throw tokenizer_error("luminal: BPE merge " + std::to_string(rank) + " '" + m + "' " + why);
    };
    if (space == std::string::npos || space + 1 >= m.size()) fail("is not two tokens separated by a space");
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const auto l = ids_.find(left), r = ids_.find(right), joined = ids_.find(left + right);
    if (l == ids_.end()) fail("names '" + left + "', which is not a token");
    if (r == ids_.end()) fail("names '" + right + "', which is not a token");
    if (joined == ids_.end()) fail("makes '" + left + right + "', which is not a token");
    if (rank >= std::size_t(detail::merge_table::none)) fail("is past the last rank int32 can hold");
    if (merges_.insert(l->second, r->second, std::int32_t(rank), joined->second)) ++merge_count_;
  }

  /// BPE on one piece: merge the best-ranked adjacent pair, leftmost on ties, until none is
  /// left. Holds its buffers between pieces.
  struct merger {
    std::vector<std::int32_t> sym, prev, next;
    struct candidate { std::int32_t rank, pos; };
    std::vector<candidate> heap;

    /// Appends the ids of `piece` to out; calls unknown(k) for each byte piece[k] without a
    /// token, then leaves it out (its neighbours become adjacent, as in HF).
    template <class Unknown>
    void run(const tokenizer& tok, std::string_view piece, std::vector<std::int32_t>& out, Unknown&& unknown) {
      sym.clear();
      for (std::size_t k = 0; k < piece.size(); ++k) {
        const std::int32_t id = tok.byte_token_[(unsigned char)piece[k]];
        if (id >= 0) sym.push_back(id);
        else unknown(k);
      }
      if (sym.size() <= 48) short_piece(tok, out);
      else long_piece(tok, out);
    }

    /// A scan for the best pair: cheaper than a heap for the short pieces most are.
    void short_piece(const tokenizer& tok, std::vector<std::int32_t>& out) {
      std::size_t m = sym.size();
      std::array<std::int32_t, 48> rank{};
      auto rank_at = [&](std::size_t k) {
        const auto* e = tok.merges_.find(sym[k], sym[k + 1]);
        return e ? e->rank : detail::merge_table::none;
      };
      for (std::size_t k = 0; k + 1 < m; ++k) rank[k] = rank_at(k);
      while (m > 1) {
        std::size_t best = 0;
        for (std::size_t k = 1; k + 1 < m; ++k)
          if (rank[k] < rank[best]) best = k;
        if (rank[best] == detail::merge_table::none) break;
        sym[best] = tok.merges_.find(sym[best], sym[best + 1])->result;
        sym.erase(sym.begin() + std::ptrdiff_t(best) + 1);
        if (best + 2 < m)  // the pairs right of the merged one move down by one
          std::copy(rank.begin() + std::ptrdiff_t(best) + 2, rank.begin() + std::ptrdiff_t(m) - 1,
                    rank.begin() + std::ptrdiff_t(best) + 1);
        --m;
        if (best + 1 < m) rank[best] = rank_at(best);
        if (best > 0) rank[best - 1] = rank_at(best - 1);
      }
      out.insert(out.end(), sym.begin(), sym.begin() + std::ptrdiff_t(m));
    }

    /// Long pieces: doubly linked symbols and a heap of candidate pairs, stale ones skipped.
    void long_piece(const tokenizer& tok, std::vector<std::int32_t>& out) {
      const std::size_t m = sym.size();
      prev.resize(m);
      next.resize(m);
      for (std::size_t k = 0; k < m; ++k) { prev[k] = std::int32_t(k) - 1; next[k] = std::int32_t(k) + 1; }
      next[m - 1] = -1;
      heap.clear();
      auto later = [](const candidate& a, const candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
      auto consider = [&](std::int32_t pos) {
        if (pos < 0 || next[std::size_t(pos)] < 0) return;
        if (const auto* e = tok.merges_.find(sym[std::size_t(pos)], sym[std::size_t(next[std::size_t(pos)])])) {
          heap.push_back({e->rank, pos});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      };
      for (std::size_t k = 0; k + 1 < m; ++k) consider(std::int32_t(k));
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const candidate c = heap.back();
        heap.pop_back();
        const auto pos = std::size_t(c.pos);
        if (sym[pos] < 0 || next[pos] < 0) continue;
        const auto right = std::size_t(next[pos]);
        const auto* e = tok.merges_.find(sym[pos], sym[right]);
        if (!e || e->rank != c.rank) continue;  // the pair changed since it was queued
        sym[pos] = e->result;
        sym[right] = -1;
        next[pos] = next[right];
        if (next[right] >= 0) prev[std::size_t(next[right])] = c.pos;
        consider(prev[pos]);
        consider(c.pos);
      }
      for (std::size_t k = 0; k < m; ++k)
        if (sym[k] >= 0) out.push_back(sym[k]);
    }
  };

  /// One encode call: the pieces of the text, and a cache of the pieces merged in it.
  struct session {
    const tokenizer& tok;
    std::string_view text;
    unknown_bytes unknown;
    std::vector<std::int32_t>& out;
    detail::splitter splitter{};
    merger bpe{};
    std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache{};
    std::vector<std::int32_t> cached{};  // the ids of the cached pieces, end to end

    /// Encodes text[first, last), which holds no special token.
    void plain(std::size_t first, std::size_t last) {
      if (first >= last) return;
      splitter.split(text.substr(first, last - first), tok.pre_, [&](std::string_view piece) { word(piece); });
    }

    void word(std::string_view piece) {
      if (piece.size() == 1) {
        const std::int32_t id = tok.byte_token_[(unsigned char)piece[0]];
        if (id >= 0) out.push_back(id);
        else unknown_byte(piece, 0);
        return;
      }
      // A token of its own; with llama3 (ignore_merges) any token, as HF and llama.cpp do.
      if (const std::int32_t id = tok.by_bytes_.find(piece, tok.bytes_);
          id >= 0 && (tok.ignore_merges_ || tok.whole_[std::size_t(id)])) {
        out.push_back(id);
        return;
      }
      const bool cacheable = piece.size() <= 256;
      if (cacheable) {
        if (auto it = cache.find(piece); it != cache.end()) {
          const auto first = cached.begin() + it->second.first;
          out.insert(out.end(), first, first + it->second.second);
          return;
        }
      }
      const std::size_t before = out.size();
      bpe.run(tok, piece, out, [&](std::size_t k) { unknown_byte(piece, k); });
      if (cacheable) {
        cache.emplace(piece, std::pair{std::uint32_t(cached.size()), std::uint32_t(out.size() - before)});
        cached.insert(cached.end(), out.begin() + std::ptrdiff_t(before), out.end());
      }
    }

    void unknown_byte(std::string_view piece, std::size_t k) const {
      if (unknown == unknown_bytes::drop) return;
      const std::size_t at = std::size_t(piece.data() - text.data()) + k;
      throw tokenizer_error("luminal: byte " + std::to_string(at) + " of the text (value " +
                            std::to_string((unsigned char)piece[k]) + ") has no token in this vocabulary");
    }
  };
};

/// Turns generated ids into printable UTF-8 as they come: each push returns the characters
/// completed so far, holding back the bytes of a character that is not complete yet.
///
///     luminal::bpe::stream_decoder out(tok);
///     for (std::int32_t id : generated) std::cout << out.push(id) << std::flush;
///     std::cout << out.finish();
class stream_decoder {
 public:
  explicit stream_decoder(const tokenizer& tok, special_output specials = special_output::text)
      : tok_(&tok), specials_(specials) {}

  /// The complete characters now available (valid UTF-8; bytes that can never form a character
  /// become U+FFFD). Throws tokenizer_error for an id outside the vocabulary.
  std::string push(std::int32_t id) {
    const std::int32_t one[] = {id};
    pending_ += tok_->decode(one, specials_);
    return drain(false);
  }

  /// What is still held back, an incomplete character becoming U+FFFD; the decoder is then empty.
  std::string finish() { return drain(true); }

 private:
  const tokenizer* tok_;
  special_output specials_;
  std::string pending_;

  std::string drain(bool at_end) {
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
    const std::size_t n = pending_.size();
    std::size_t i = 0;
    while (i < n) {
      const unsigned b = p[i];
      std::size_t len = 0;
      unsigned lo = 0x80, hi = 0xBF;
      if (b < 0x80) len = 1;
      else if (b >= 0xC2 && b <= 0xDF) len = 2;
      else if (b >= 0xE0 && b <= 0xEF) { len = 3; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
      else if (b >= 0xF0 && b <= 0xF4) { len = 4; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
      if (len == 0) { out += "\xEF\xBF\xBD"; ++i; continue; }  // never a lead byte
      // The maximal subpart: the lead and the continuation bytes that still fit a character.
      std::size_t k = 1;
      while (k < len && i + k < n && p[i + k] >= (k == 1 ? lo : 0x80) && p[i + k] <= (k == 1 ? hi : 0xBF)) ++k;
      if (k == len) { out.append(pending_, i, len); i += len; continue; }
      if (i + k == n && !at_end) break;  // may still complete: hold it back
      out += "\xEF\xBF\xBD";
      i += k;
    }
    pending_.erase(0, i);
    return out;
  }
};

}  // namespace luminal::bpe
