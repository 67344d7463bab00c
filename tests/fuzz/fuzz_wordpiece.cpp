// libFuzzer harness: any bytes through the WordPiece tokenizer with the all-MiniLM-L6-v2
// vocabulary ($LUMINAL_MINILM_DIR/vocab.txt; a small built-in vocabulary without it):
// encode() returns [CLS] ... [SEP] within max_tokens ids of the vocabulary, or throws
// tokenizer_error for invalid UTF-8; the same text fed to an encoder in parts gives the same
// ids, and encoding costs what the ids need, never the length of the text.
// The first input byte picks max_tokens and how the text is cut into parts.
//
//     LUMINAL_MINILM_DIR=<model/> ./fuzz_wordpiece -max_len=65536 corpus/wordpiece
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <luminal/text/wordpiece.hpp>
#include <memory>
#include <string>

#include "fuzz_input_file.hpp"

namespace {
using luminal::wordpiece::tokenizer;

const tokenizer& vocabulary() {
  static const std::unique_ptr<tokenizer> tok = [] {
    if (const char* dir = std::getenv("LUMINAL_MINILM_DIR"); dir && *dir)
      return std::make_unique<tokenizer>(std::filesystem::path(dir) / "vocab.txt");
    const std::filesystem::path file = fuzz::own_file();  // a vocabulary of a few pieces
    std::ofstream(file, std::ios::trunc) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nab\n##b\n##a\nthe\n!\n,\n"
                                            "\xc3\xa9\n\xe4\xb8\xad\n##\xc3\xa9\n";
    return std::make_unique<tokenizer>(file);
  }();
  return *tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const tokenizer& tok = vocabulary();
  const unsigned choice = data[0];
  const std::size_t max_tokens = 2 + choice % 40 * 7;  // 2 to 275
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::int32_t> whole;
  bool refused = false;
  try {
    whole = tok.encode(text, max_tokens);
  } catch (const luminal::wordpiece::tokenizer_error&) {
    refused = true;
  }
  if (!refused) {
    if (whole.size() < 2 || whole.size() > max_tokens || whole.front() != tok.cls_id() || whole.back() != tok.sep_id())
      std::abort();
    for (std::int32_t id : whole)
      if (id < 0 || std::size_t(id) >= tok.vocab_size()) std::abort();
  }
  // The same text in parts of 1 to 16 bytes: the same ids, or the same refusal.
  luminal::wordpiece::encoder parts(tok, max_tokens);
  const std::size_t step = 1 + (choice >> 4);
  bool parts_refused = false;
  std::vector<std::int32_t> in_parts;
  try {
    for (std::size_t at = 0; at < text.size() && parts.wants_more(); at += step) parts.feed(text.substr(at, step));
    in_parts = parts.finish();
  } catch (const luminal::wordpiece::tokenizer_error&) {
    parts_refused = true;
  }
  if (parts_refused != refused || in_parts != whole) std::abort();
  return 0;
}
