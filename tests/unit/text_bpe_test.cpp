// luminal::bpe::tokenizer (luminal/text/bpe.hpp) against SmolLM2-135M-Instruct's vocabulary
// read from its GGUF file, and the pieces on their own with a small built-in vocabulary. The
// expected ids in bpe_smollm.json came from HF tokenizers with SmolLM2's original
// tokenizer.json rebuilt from the same GGUF (tests/fixtures/make_bpe_fixtures.py).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <luminal/nn/llama_tokenizer.hpp>
#include <luminal/text/bpe.hpp>

#include "fixture_dir.hpp"
#include "smollm_path.hpp"

namespace {

namespace fs = std::filesystem;
using namespace luminal::bpe;
using ids = std::vector<std::int32_t>;
using pieces = std::vector<std::string_view>;

const tokenizer& smollm() {
  static std::unique_ptr<tokenizer> tok;
  if (!tok) {
    const luminal::gguf_file model = luminal::gguf_file::open(test::smollm_gguf().string());
    tok = std::make_unique<tokenizer>(luminal::nn::llama_tokenizer(model));
  }
  return *tok;
}

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::fixture_dir() / "bpe_smollm.json");
    if (!in) throw std::runtime_error("tests/fixtures/bpe_smollm.json is missing");
    return nlohmann::json::parse(in);
  }();
  return j;
}

/// GPT-2's byte alphabet character for a byte, as UTF-8.
std::string byte_char(unsigned b) {
  std::string s;
  luminal::bpe::detail::append_utf8(s, luminal::bpe::detail::byte_to_code_point()[b]);
  return s;
}

/// A small vocabulary: the 256 bytes (id = byte value) but `missing`, a few merges, two
/// control tokens.
vocabulary tiny_vocabulary(std::string pre = "gpt2", int missing = -1) {
  vocabulary v;
  for (unsigned b = 0; b < 256; ++b) v.tokens.push_back(int(b) == missing ? "<unused" + std::to_string(b) + ">" : byte_char(b));
  v.token_types.assign(256, 1);
  if (missing >= 0) v.token_types[std::size_t(missing)] = 5;
  for (const char* m : {"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a b"}) {
    v.merges.push_back(m);
    std::string joined = m;
    joined.erase(joined.find(' '), 1);
    v.tokens.push_back(joined);
    v.token_types.push_back(1);
  }
  v.tokens.push_back("abc");  // reachable only as a whole word (llama3's ignore_merges)
  v.token_types.push_back(1);
  for (const char* s : {"<|end|>", "<|end|><|end|>x"}) {
    v.tokens.push_back(s);
    v.token_types.push_back(3);
  }
  v.pre = std::move(pre);
  return v;
}

}  // namespace

TEST_CASE("SmolLM2's vocabulary from its GGUF builds a tokenizer with its control tokens", "[text][bpe]") {
  const auto& tok = smollm();
  CHECK(tok.vocab_size() == 49152);
  CHECK(tok.merge_count() == 48900);
  CHECK(tok.pre() == pre_tokenizer::smollm);
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.token(1) == "<|im_start|>");
  CHECK(tok.type(2) == token_type::control);
  CHECK(tok.type(200) == token_type::normal);
  CHECK(tok.id("Ġthe") == tok.encode(" the").at(0));
  CHECK(tok.token_bytes(tok.id("Ġthe")) == " the");
  CHECK_THROWS_AS(tok.id("no such token"), tokenizer_error);
  CHECK_THROWS_AS(tok.token(49152), tokenizer_error);
  CHECK_THROWS_AS(tok.token_bytes(-1), tokenizer_error);
}

TEST_CASE("SmolLM2's tokenizer gives HF tokenizers' ids for every fixture string, and decodes them back", "[text][bpe]") {
  const auto& tok = smollm();
  int count = 0;
  for (const auto& c : fixture().at("cases")) {
    const std::string text = c.at("text");
    INFO("case " << count << ": " << c.at("text").dump());
    CHECK(tok.encode(text) == c.at("ids").get<ids>());
    // Bytes without a token (of U+0004, U+40000..U+BFFFF, ...) are dropped, by HF too.
    std::string kept;
    for (char b : text)
      if (tok.byte_id((unsigned char)b) >= 0) kept += b;
    CHECK(tok.decode(c.at("ids").get<ids>()) == kept);
    ++count;
  }
  CHECK(count > 300);
}

TEST_CASE("the smollm, gpt2 and llama3 pre-tokenizers split as HF tokenizers does", "[text][bpe]") {
  int checked = 0;
  for (const auto& c : fixture().at("cases")) {
    if (!c.contains("pieces")) continue;
    const std::string text = c.at("text");
    INFO(c.at("text").dump());
    for (auto [name, kind] : {std::pair{"smollm", pre_tokenizer::smollm}, std::pair{"gpt2", pre_tokenizer::gpt2},
                              std::pair{"llama3", pre_tokenizer::llama3}}) {
      INFO(name);
      const auto expected = c.at("pieces").at(name).get<std::vector<std::string>>();
      const auto got = pre_tokenize(text, kind);
      CHECK(std::vector<std::string>(got.begin(), got.end()) == expected);
      ++checked;
    }
  }
  CHECK(checked > 600);
}

TEST_CASE("the GPT-2 split keeps a space with the word after it and ends whitespace runs before it", "[text][bpe]") {
  CHECK(pre_tokenize("a   b", pre_tokenizer::gpt2) == pieces{"a", "  ", " b"});
  CHECK(pre_tokenize("a\t\tb", pre_tokenizer::gpt2) == pieces{"a", "\t", "\t", "b"});
  CHECK(pre_tokenize("a \n", pre_tokenizer::gpt2) == pieces{"a", " \n"});
  CHECK(pre_tokenize(" \n x", pre_tokenizer::gpt2) == pieces{" \n", " x"});
  CHECK(pre_tokenize("I'm can't we'RE", pre_tokenizer::gpt2) == pieces{"I", "'m", " can", "'t", " we", "'", "RE"});
  CHECK(pre_tokenize("x?!'s", pre_tokenizer::gpt2) == pieces{"x", "?!'", "s"});
  CHECK(pre_tokenize("v1.25 ²", pre_tokenizer::gpt2) == pieces{"v", "1", ".", "25", " ²"});
  CHECK(pre_tokenize("", pre_tokenizer::gpt2).empty());
}

TEST_CASE("the smollm split makes every digit a piece and runs GPT-2's split between them", "[text][bpe]") {
  CHECK(pre_tokenize("v1.25 ²", pre_tokenizer::smollm) == pieces{"v", "1", ".", "2", "5", " ", "²"});
  CHECK(pre_tokenize("a  1", pre_tokenizer::smollm) == pieces{"a", "  ", "1"});
  CHECK(pre_tokenize("٣٤ Ⅻ", pre_tokenizer::smollm) == pieces{"٣", "٤", " ", "Ⅻ"});
}

TEST_CASE("the llama3 split groups digits by three and is case-blind in contractions", "[text][bpe]") {
  CHECK(pre_tokenize("1234567", pre_tokenizer::llama3) == pieces{"123", "456", "7"});
  CHECK(pre_tokenize("WE'RE 'S", pre_tokenizer::llama3) == pieces{"WE", "'RE", " '", "S"});
  CHECK(pre_tokenize("x\n\n  y", pre_tokenizer::llama3) == pieces{"x", "\n\n", " ", " y"});
  CHECK(pre_tokenize("?!\n\nok", pre_tokenizer::llama3) == pieces{"?!\n\n", "ok"});
}

TEST_CASE("special tokens keep their ids, longest first, unless asked to be plain text", "[text][bpe]") {
  const tokenizer tok(tiny_vocabulary());
  const std::int32_t end = tok.id("<|end|>"), end2 = tok.id("<|end|><|end|>x");
  CHECK(tok.encode("<|end|>") == ids{end});
  CHECK(tok.encode("<|end|><|end|>x<|end|>") == ids{end2, end});
  CHECK(tok.encode("hello<|end|> world") == ids{tok.id("hello"), end, tok.id("Ġworld")});
  CHECK(tok.encode("<|end|", special_tokens::parse).size() == 6);
  const auto plain = tok.encode("<|end|>", special_tokens::as_text);
  CHECK(plain.size() == 7);
  CHECK(tok.decode(plain) == "<|end|>");
  CHECK(tok.decode(ids{end, tok.id("hello")}, special_output::skip) == "hello");
  CHECK(tok.decode(ids{end, tok.id("hello")}) == "<|end|>hello");

  const auto& smol = smollm();
  CHECK(smol.encode("<|im_start|>user\nHi<|im_end|>") == ids{1, 4093, 198, 26843, 2});
  CHECK(smol.encode("<|im_start|>", special_tokens::as_text) == ids{44, 108, 306, 79, 3738, 108, 46});
}

TEST_CASE("merges apply best rank first, and llama3 takes a whole word found in the vocabulary", "[text][bpe]") {
  const tokenizer gpt2(tiny_vocabulary());
  CHECK(gpt2.encode("hello world") == ids{gpt2.id("hello"), gpt2.id("Ġworld")});
  CHECK(gpt2.encode("abc") == ids{gpt2.id("ab"), 'c'});
  const tokenizer llama3(tiny_vocabulary("llama-bpe"));
  CHECK(llama3.encode("abc") == ids{llama3.id("abc")});
  // A long piece (heap path) merges as a short one (scan path) does.
  std::string many;
  for (int i = 0; i < 40; ++i) many += "hello";
  const auto long_ids = gpt2.encode(many);
  CHECK(long_ids == ids(40, gpt2.id("hello")));
}

TEST_CASE("the empty string encodes to no ids and no ids decode to the empty string", "[text][bpe]") {
  CHECK(smollm().encode("").empty());
  CHECK(smollm().decode(ids{}).empty());
}

TEST_CASE("invalid UTF-8 is refused with the offset of the bad byte", "[text][bpe]") {
  const auto& tok = smollm();
  for (auto [text, offset] : {std::pair{std::string("ab\xC3"), 2}, std::pair{std::string("a\xC0\x80"), 1},
                              std::pair{std::string("xy\xED\xA0\x80"), 2}, std::pair{std::string("\xF4\x90\x80\x80"), 0},
                              std::pair{std::string("ok \x80"), 3}, std::pair{std::string("\xE2\x82"), 0}}) {
    CHECK_FALSE(is_valid_utf8(text));
    CHECK(first_invalid_utf8(text) == std::size_t(offset));
    CHECK_THROWS_WITH(tok.encode(text), Catch::Contains("not valid UTF-8 at byte " + std::to_string(offset)));
  }
  CHECK(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
}

TEST_CASE("a byte without a token is dropped as HF drops it, or refused when asked", "[text][bpe]") {
  const auto& tok = smollm();
  CHECK(tok.encode(std::string("a\x04") + "b") == ids{81, 82});
  CHECK_THROWS_WITH(tok.encode(std::string("a\x04") + "b", special_tokens::parse, unknown_bytes::error),
                    Catch::Contains("byte 1 of the text (value 4)"));
  const tokenizer tiny(tiny_vocabulary("gpt2", 'q'));
  CHECK(tiny.encode("aqb") == ids{tiny.id("ab")});  // the neighbours of a dropped byte merge
}

TEST_CASE("decoding refuses ids outside the vocabulary, naming their position", "[text][bpe]") {
  const auto& tok = smollm();
  CHECK_THROWS_WITH(tok.decode(ids{81, 49152}), Catch::Contains("token id 49152 at position 1"));
  CHECK_THROWS_AS(tok.decode(ids{-1}), tokenizer_error);
}

TEST_CASE("the stream decoder holds back a 4-byte emoji split across tokens until it is whole", "[text][bpe]") {
  const tokenizer tiny(tiny_vocabulary());  // no merges of these bytes: one token a byte
  const auto emoji = tiny.encode("\xF0\x9F\x98\x80!");
  REQUIRE(emoji.size() == 5);
  stream_decoder out(tiny);
  CHECK(out.push(emoji[0]).empty());
  CHECK(out.push(emoji[1]).empty());
  CHECK(out.push(emoji[2]).empty());
  CHECK(out.push(emoji[3]) == "\xF0\x9F\x98\x80");
  CHECK(out.push(emoji[4]) == "!");
  CHECK(out.finish().empty());

  // SmolLM2 splits 😀 across tokens too; the pieces printed add up to the text.
  const auto& smol = smollm();
  const std::string text = "I 😀 you, 你好";
  stream_decoder smol_out(smol);
  std::string printed;
  for (std::int32_t id : smol.encode(text)) {
    const std::string piece = smol_out.push(id);
    CHECK(is_valid_utf8(piece));
    printed += piece;
  }
  CHECK(printed + smol_out.finish() == text);
}

TEST_CASE("the stream decoder replaces bytes that can never be a character and flushes a broken tail", "[text][bpe]") {
  const tokenizer tiny(tiny_vocabulary());
  stream_decoder out(tiny);
  CHECK(out.push(0x80) == "\xEF\xBF\xBD");           // a lone continuation byte
  CHECK(out.push(0xE2).empty());                     // the start of a 3-byte character
  CHECK(out.push('a') == "\xEF\xBF\xBD" "a");         // broken by an ASCII byte
  CHECK(out.push(0xF0).empty());
  CHECK(out.push(0x9F).empty());
  CHECK(out.finish() == "\xEF\xBF\xBD");              // an incomplete tail at the end
  CHECK(out.finish().empty());
  CHECK_THROWS_AS(out.push(-5), tokenizer_error);
}

TEST_CASE("a malformed vocabulary is refused with what is wrong", "[text][bpe]") {
  CHECK_THROWS_WITH(tokenizer(vocabulary{}), Catch::Contains("holds no tokens"));
  auto v = tiny_vocabulary();
  v.merges.push_back("zz q");
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("'zz', which is not a token"));
  v = tiny_vocabulary();
  v.merges.push_back("x y");
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("makes 'xy', which is not a token"));
  v = tiny_vocabulary();
  v.merges.push_back("xy");
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("not two tokens separated by a space"));
  v = tiny_vocabulary();
  v.token_types[3] = 9;
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("token 3 has type 9"));
  v = tiny_vocabulary();
  v.token_types.pop_back();
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("token types"));
  v = tiny_vocabulary("qwen2");
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("'qwen2' is not supported"));
  v = tiny_vocabulary();
  v.eos_id = 100000;
  CHECK_THROWS_WITH(tokenizer(v), Catch::Contains("EOS id 100000"));
}
