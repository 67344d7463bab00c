// luminal::wordpiece::tokenizer against the all-MiniLM-L6-v2 vocabulary. The expected
// ids below came from HF tokenizers 0.23 (tokenizers.Tokenizer.from_file(tokenizer.json) with
// no_padding() and enable_truncation(256), as sentence-transformers uses it).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <luminal/text/wordpiece.hpp>

#include "minilm_dir.hpp"

namespace {

namespace fs = std::filesystem;
using luminal::wordpiece::tokenizer_error;
using luminal::wordpiece::tokenizer;
using ids = std::vector<std::int32_t>;

/// The MiniLM tokenizer (minilm_dir.hpp: fails the test when the model is missing).
const tokenizer& minilm() {
  static std::unique_ptr<tokenizer> tok;
  if (!tok) tok = std::make_unique<tokenizer>(test::minilm_dir() / "vocab.txt");
  return *tok;
}

/// A file in the temporary folder holding `content`, removed when the test ends.
struct temp_vocab {
  fs::path path;
  explicit temp_vocab(const std::string& content) {
    static int counter = 0;
    path = fs::temp_directory_path() / ("luminal_wordpiece_test_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "_" +
                                        std::to_string(counter++) + ".txt");
    std::ofstream(path, std::ios::binary) << content;
  }
  ~temp_vocab() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("the MiniLM vocabulary loads with its special tokens where BERT puts them", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.vocab_size() == 30522);
  CHECK(tok.pad_id() == 0);
  CHECK(tok.unk_id() == 100);
  CHECK(tok.cls_id() == 101);
  CHECK(tok.sep_id() == 102);
  CHECK(tok.id("[MASK]") == 103);
  CHECK(tok.id("##ization") == 3989);
  CHECK(tok.token(101) == "[CLS]");
  CHECK(tok.token(30521) == "##～");
  CHECK_THROWS_AS(tok.id("no-such-token"), tokenizer_error);
  CHECK_THROWS_AS(tok.token(-1), tokenizer_error);
  CHECK_THROWS_AS(tok.token(30522), tokenizer_error);
}

TEST_CASE("accented Latin text is lower-cased and stripped of its accents", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("Café naïve résumé") == ids{101, 7668, 15743, 13746, 102});
  CHECK(tok.encode("Ünïcödé ÅNGSTRÖM ﬁne") == ids{101, 27260, 17076, 15687, 1984, 2638, 102});
  CHECK(tok.encode("straße") == ids{101, 2358, 27807, 102});
}

TEST_CASE("a dotted capital I becomes a plain i", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("İ") == ids{101, 1045, 102});
  CHECK(tok.encode("İstanbul") == ids{101, 9960, 102});
}

TEST_CASE("Greek, Cyrillic and Arabic words split into single-letter pieces", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("Η γρήγορη καφέ αλεπού") == ids{101, 1161, 1157, 29732, 24824, 29721, 29730, 29732, 24824, 1164,
                                                   14608, 29736, 29723, 1155, 29727, 29723, 29731, 26789, 102});
  CHECK(tok.encode("Привет, мир! Ёлка") ==
        ids{101, 1194, 16856, 10325, 25529, 15290, 22919, 1010, 1191, 10325, 16856, 999, 1185, 29436, 28598, 102});
  CHECK(tok.encode("مرحبا بالعالم") ==
        ids{101, 1295, 17149, 29820, 29816, 25573, 1271, 25573, 23673, 29830, 25573, 23673, 22192, 102});
}

TEST_CASE("Chinese and Japanese ideographs each become a word of their own", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("我爱自然语言处理。") == ids{101, 1855, 100, 100, 100, 100, 100, 100, 100, 1636, 102});
  CHECK(tok.encode("東京は日本の首都です。カタカナ") ==
        ids{101, 1879, 1755, 1672, 1864, 1876, 1671, 100, 1961, 1665, 30184, 1636, 1700, 30235, 30226, 30241, 102});
  // tokenizers' CJK range starts at U+2B920, not BERT's U+2B820: U+2B820 stays inside its word.
  CHECK(tok.encode("a\U0002B820 a\U0002B920") == ids{101, 100, 1037, 100, 102});
}

TEST_CASE("emoji outside the vocabulary become [UNK]", "[text][wordpiece]") {
  CHECK(minilm().encode("I love pizza 🍕😀!") == ids{101, 1045, 2293, 10733, 100, 999, 102});
}

TEST_CASE("every punctuation character is a word of its own", "[text][wordpiece]") {
  CHECK(minilm().encode("Hello!!! What?? (yes) -- \"quoted\" [brackets] {braces} $100.00 a+b=c <tag> @user "
                        "#hash ~tilde `tick` |pipe| ^caret") ==
        ids{101,  7592, 999,  999,  999,  2054, 1029, 1029,  1006, 2748, 1007, 1011, 1011, 1000,  9339, 1000, 1031,
            19719, 1033, 1063, 17180, 2015, 1065, 1002, 2531, 1012, 4002, 1037, 1009, 1038, 1027, 1039, 1026, 6415,
            1028, 1030, 5310, 1001, 23325, 1066, 18681, 3207, 1036, 16356, 1036, 1064, 8667, 1064, 1034, 2729, 2102,
            102});
}

TEST_CASE("a single word splits into its longest matching pieces", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("Tokenization") == ids{101, 19204, 3989, 102});
  CHECK(tok.wordpieces("unaffable") == std::vector<std::string>{"una", "##ffa", "##ble"});
}

TEST_CASE("a word of more than 100 characters becomes [UNK]", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode(std::string(101, 'a')) == ids{101, 100, 102});
  std::string ab;
  for (int i = 0; i < 50; ++i) ab += "ab";  // exactly 100 characters: still split
  ids expected{101, 19557};
  expected.insert(expected.end(), 48, 3676);
  expected.insert(expected.end(), {2497, 102});
  CHECK(tok.encode(ab) == expected);
}

TEST_CASE("empty and whitespace-only text encode to [CLS] [SEP]", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("") == ids{101, 102});
  CHECK(tok.encode(" \t\n\u3000\u00a0 ") == ids{101, 102});
  CHECK(tok.wordpieces("").empty());
}

TEST_CASE("control and format characters, NUL and U+FFFD are dropped", "[text][wordpiece]") {
  using namespace std::string_literals;
  CHECK(minilm().encode("a\x01" "b\x7f" "c\u200b" "d\0e\ufffd" "f\u0085g"s) == ids{101, 5925, 3207, 2546, 2290, 102});
}

TEST_CASE("marks added to Unicode after 8.0 are kept, as tokenizers' tables know only 8.0", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("a\U0001E944b") == ids{101, 100, 102});  // U+1E944 (Mn, Unicode 9): not stripped
  CHECK(tok.encode("a\u1734b") == ids{101, 11113, 102});     // U+1734 (Mn in 8.0, Mc now): stripped
}

TEST_CASE("special tokens written in the text keep their ids, case-sensitively", "[text][wordpiece]") {
  CHECK(minilm().encode("hello [MASK] world [mask] [CLS]") == ids{101, 7592, 103, 2088, 1031, 7308, 1033, 101, 102});
  CHECK(minilm().encode("[MASK][MASK]x[SEP]") == ids{101, 103, 103, 1060, 102, 102});
}

TEST_CASE("long text is truncated to 256 ids by default, [SEP] last", "[text][wordpiece]") {
  const auto& tok = minilm();
  std::string text;
  for (int i = 0; i < 500; ++i) text += "the quick brown fox ";  // 10,000 characters, 2,000 words
  const ids got = tok.encode(text);
  ids expected{101};
  const std::int32_t words[] = {1996, 4248, 2829, 4419};  // the quick brown fox
  for (int i = 0; i < 254; ++i) expected.push_back(words[i % 4]);
  expected.push_back(102);
  CHECK(got == expected);
  CHECK(tok.wordpieces(text).size() == 2000);
}

TEST_CASE("a 10,000-character line without spaces encodes to [UNK], or to pieces cut at 256 ids", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode(std::string(10000, 'x')) == ids{101, 100, 102});
  const ids bangs = tok.encode(std::string(10000, '!'));
  CHECK(bangs.size() == 256);
  CHECK(bangs[1] == 999);
  CHECK(bangs[254] == 999);
  CHECK(bangs.back() == 102);
}

TEST_CASE("max_tokens truncates the pieces and keeps [CLS] and [SEP]", "[text][wordpiece]") {
  const auto& tok = minilm();
  CHECK(tok.encode("Café naïve résumé", 4) == ids{101, 7668, 15743, 102});
  CHECK(tok.encode("Café naïve résumé", 2) == ids{101, 102});
  CHECK(tok.encode("Café naïve résumé", 5) == ids{101, 7668, 15743, 13746, 102});
  CHECK(tok.encode("Café naïve résumé", 50) == ids{101, 7668, 15743, 13746, 102});
}

TEST_CASE("max_tokens below 2 is rejected", "[text][wordpiece]") {
  CHECK_THROWS_AS(minilm().encode("hello", 1), std::invalid_argument);
  CHECK_THROWS_AS(minilm().encode("hello", 0), std::invalid_argument);
}

TEST_CASE("invalid UTF-8 is rejected with the offset of the bad byte", "[text][wordpiece]") {
  const auto& tok = minilm();
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(tok.encode("ab\x80" "cd"), Contains("not valid UTF-8 at byte 2"));        // lone continuation
  CHECK_THROWS_WITH(tok.encode("abc\xe2\x82"), Contains("not valid UTF-8 at byte 3"));        // truncated sequence
  CHECK_THROWS_WITH(tok.encode("\xe2\x82x"), Contains("not valid UTF-8 at byte 0"));          // cut short by ASCII
  CHECK_THROWS_WITH(tok.encode("x\xc0\xaf"), Contains("not valid UTF-8 at byte 1"));          // overlong '/'
  CHECK_THROWS_WITH(tok.encode("xy\xe0\x80\xaf"), Contains("not valid UTF-8 at byte 2"));     // overlong, 3 bytes
  CHECK_THROWS_WITH(tok.encode("é\xed\xa0\x80"), Contains("not valid UTF-8 at byte 2"));      // surrogate U+D800
  CHECK_THROWS_WITH(tok.encode("\xf4\x90\x80\x80"), Contains("not valid UTF-8 at byte 0"));   // above U+10FFFF
  CHECK_THROWS_WITH(tok.encode("ok\xff"), Contains("not valid UTF-8 at byte 2"));             // never in UTF-8
  CHECK_THROWS_AS(tok.wordpieces("\x80"), tokenizer_error);
}

TEST_CASE("a missing or malformed vocabulary file is rejected clearly", "[text][wordpiece]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(tokenizer(fs::temp_directory_path() / "luminal_no_such_vocab.txt"),
                    Contains("does not exist"));
  CHECK_THROWS_AS(tokenizer(fs::temp_directory_path()), tokenizer_error);  // a folder
  const temp_vocab empty("");
  CHECK_THROWS_WITH(tokenizer(empty.path), Contains("empty"));
  const temp_vocab repeated("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\nhello\n");
  CHECK_THROWS_WITH(tokenizer(repeated.path), Contains("'hello' on line 7 (first on line 5)"));
  const temp_vocab no_cls("[PAD]\n[UNK]\n[SEP]\nhello\n");
  CHECK_THROWS_WITH(tokenizer(no_cls.path), Contains("no [CLS] token"));
  const temp_vocab tiny("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##s\n");
  const tokenizer t(tiny.path);
  CHECK(t.vocab_size() == 6);
  CHECK(t.encode("Hellos, world") == ids{2, 4, 5, 1, 1, 3});
}
