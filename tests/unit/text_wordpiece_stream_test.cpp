// The WordPiece tokenizer reads only what its ids need (issue 63): text given in parts
// (wordpiece::encoder) encodes as the whole does, however it is cut, and encoding stops
// at max_tokens, so a long text costs what its first pieces cost.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <luminal/text/wordpiece.hpp>

#include "minilm_dir.hpp"

namespace {
using luminal::wordpiece::encoder;
using luminal::wordpiece::tokenizer;
const tokenizer& vocabulary() {
  static std::unique_ptr<tokenizer> tok;
  if (!tok) tok = std::make_unique<tokenizer>(test::minilm_dir() / "vocab.txt");
  return *tok;
}
}  // namespace

TEST_CASE("text fed to an encoder in parts encodes as the whole text does", "[text][wordpiece]") {
  const auto& tok = vocabulary();
  const std::string texts[] = {
      "Café naïve résumé, [CLS] Hello [SEP]world[MASK]!",  // special tokens, accents, punctuation
      "中文字符 and émoji 😀 \xe2\x80\x8b zero width, Ⅻ İstanbul",
      "a\xcc\x81\xcc\xa7\xcc\x80 e\xcc\xa7\xcc\x81 [SE [SEP [PA]D]",  // marks to reorder, partial specials
      std::string(150, 'z') + " " + std::string(99, 'y') + "!"};
  std::mt19937 rng(7);
  for (const std::string& text : texts) {
    for (std::size_t max : {std::size_t(3), std::size_t(16), std::size_t(256)}) {
      const auto whole = tok.encode(text, max);
      for (int trial = 0; trial < 50; ++trial) {
        encoder e(tok, max);
        for (std::size_t at = 0; at < text.size() && e.wants_more();) {
          const std::size_t n = 1 + rng() % 5;
          e.feed(std::string_view(text).substr(at, n));
          at += n;
        }
        INFO(text << " max " << max);
        CHECK(e.finish() == whole);
      }
    }
  }
}

TEST_CASE("encoding stops at max_tokens and does not look at the rest of the text", "[text][wordpiece]") {
  const auto& tok = vocabulary();
  std::string text;
  while (text.size() < (std::size_t(40) << 20)) text += "the quick brown fox ";  // 40 MB
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200));
  CHECK(ids.size() == 256);
  // Invalid UTF-8 after the cut is never decoded; before it, it is refused.
  CHECK(tok.encode("one two three \xff", 4).size() == 4);
  CHECK_THROWS_WITH(tok.encode("one \xff two", 4), Catch::Matchers::Contains("not valid UTF-8 at byte 4"));
  encoder e(tok, 5);  // [CLS], three pieces, [SEP]
  CHECK(e.feed("one two "));
  CHECK(!e.feed("three four"));  // full: the caller may stop reading
  CHECK(!e.wants_more());
  CHECK(e.finish().size() == 5);
}

TEST_CASE("a text that ends inside a UTF-8 sequence fed in parts names the byte", "[text][wordpiece]") {
  const auto& tok = vocabulary();
  encoder e(tok);
  e.feed("abc\xe2");
  e.feed("\x82");
  CHECK_THROWS_WITH(e.finish(), Catch::Matchers::Contains("not valid UTF-8 at byte 3"));
}
