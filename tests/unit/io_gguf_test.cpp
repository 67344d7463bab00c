// The GGUF reader (io/gguf.hpp): files built here by a small writer check every value
// type, alignment and the tensors' data spans; hostile files (every truncation of a valid
// file, absurd counts, overflowing dimensions, bad alignment and offsets, unknown types,
// wrong magic and versions, nested arrays, repeated names, invalid UTF-8) must each be
// refused with a gguf_error naming the file and the field. The real SmolLM2-135M file is
// compared with what the `gguf` Python package reads (tests/fixtures/make_gguf_fixture.py).
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <luminal/io/gguf.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "fixture_dir.hpp"
#include "gguf_writer.hpp"
#include "smollm_path.hpp"

namespace {

namespace fs = std::filesystem;
using test::gguf_writer;
using test::le_bytes;
using test::scratch_dir;
using Catch::Matchers::Contains;
using luminal::gguf_error;
using luminal::gguf_file;
using luminal::gguf_type;

std::string pattern_bytes(std::size_t n, unsigned seed) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = char((i * 37 + seed * 11 + 5) & 0xff);
  return out;
}

/// The message of the gguf_error that opening `bytes` throws; fails the test if none is.
std::string refusal(const scratch_dir& dir, const std::string& bytes, const std::string& name = "hostile.gguf") {
  const std::string path = dir.write(bytes, name);
  try {
    (void)gguf_file::open(path);
  } catch (const gguf_error& e) {
    return e.what();
  }
  FAIL("a hostile file was read without a gguf_error: " << name);
  return {};
}

/// Checks that `bytes` is refused with a message naming the file and containing each of `parts`.
void require_refused(const std::string& bytes, std::initializer_list<std::string_view> parts) {
  scratch_dir dir;
  const std::string msg = refusal(dir, bytes);
  INFO("message: " << msg);
  CHECK_THAT(msg, Contains((dir.path / "hostile.gguf").string()));
  for (std::string_view p : parts) CHECK_THAT(msg, Contains(std::string(p)));
}

constexpr std::uint32_t f32_type = 0, f16_type = 1, q4_0_type = 2, q8_0_type = 8, q6_k_type = 14;

}  // namespace

TEST_CASE("gguf: metadata of every value type", "[gguf]") {
  gguf_writer w;
  w.scalar("u8", gguf_type::u8, std::uint8_t(200))
      .scalar("i8", gguf_type::i8, std::int8_t(-100))
      .scalar("u16", gguf_type::u16, std::uint16_t(60000))
      .scalar("i16", gguf_type::i16, std::int16_t(-30000))
      .scalar("u32", gguf_type::u32, std::uint32_t(4000000000u))
      .scalar("i32", gguf_type::i32, std::int32_t(-2000000000))
      .scalar("u64", gguf_type::u64, std::uint64_t(1) << 63)
      .scalar("i64", gguf_type::i64, std::int64_t(-5))
      .scalar("f32", gguf_type::f32, 1.5f)
      .scalar("f64", gguf_type::f64, 0.25)
      .scalar("big.f64", gguf_type::f64, 1e300)
      .scalar("yes", gguf_type::boolean, std::uint8_t(1))
      .scalar("no", gguf_type::boolean, std::uint8_t(0))
      .string("name", "caf\xc3\xa9")
      .string("empty", "")
      .strings("tokens", {"<s>", "", "\xc4\xa0the", std::string("a\0b", 3)})
      .array("types", gguf_type::i32, std::vector<std::int32_t>{1, -2, 3})
      .array("bytes", gguf_type::u8, std::vector<std::uint8_t>{7, 255})
      .array("wide", gguf_type::u64, std::vector<std::uint64_t>{1, std::uint64_t(1) << 40})
      .array("scores", gguf_type::f32, std::vector<float>{0.5f, -1.0f})
      .array("doubles", gguf_type::f64, std::vector<double>{2.0})
      .array("flags", gguf_type::boolean, std::vector<std::uint8_t>{1, 0})
      .array("none", gguf_type::i16, std::vector<std::int16_t>{});
  scratch_dir dir;
  const gguf_file f = gguf_file::open(dir.write(w.bytes()));

  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  REQUIRE(f.metadata().size() == w.kv_count);
  CHECK(f.metadata()[0].key() == "u8");  // file order
  CHECK(f.metadata()[13].key() == "name");
  CHECK(f.get_u32("u8") == 200);
  CHECK(f.get_i32("i8") == -100);
  CHECK(f.get_u32("u16") == 60000);
  CHECK(f.get_i32("i16") == -30000);
  CHECK(f.get_u32("u32") == 4000000000u);
  CHECK(f.get_i32("i32") == -2000000000);
  CHECK(f.get_u64("u64") == std::uint64_t(1) << 63);
  CHECK(f.at("i64").as_i64() == -5);
  CHECK(f.get_f32("f32") == 1.5f);
  CHECK(f.at("f64").as_f64() == 0.25);
  CHECK(f.get_f32("f64") == 0.25f);
  CHECK(f.get_bool("yes"));
  CHECK_FALSE(f.get_bool("no"));
  CHECK(f.get_string("name") == "caf\xc3\xa9");
  CHECK(f.get_string("empty").empty());
  CHECK(f.get_string_array("tokens") == std::vector<std::string_view>{"<s>", "", "\xc4\xa0the", std::string_view("a\0b", 3)});
  CHECK(f.get_i32_array("types") == std::vector<std::int32_t>{1, -2, 3});
  CHECK(f.get_i32_array("bytes") == std::vector<std::int32_t>{7, 255});
  CHECK(f.at("wide").as_i64_array() == std::vector<std::int64_t>{1, std::int64_t(1) << 40});
  CHECK(f.get_f32_array("scores") == std::vector<float>{0.5f, -1.0f});
  CHECK(f.get_f32_array("doubles") == std::vector<float>{2.0f});
  CHECK(f.get_i32_array("none").empty());

  CHECK(f.at("tokens").type() == gguf_type::array);
  CHECK(f.at("tokens").element_type() == gguf_type::string);
  CHECK(f.at("tokens").size() == 4);
  CHECK(f.at("tokens").type_description() == "array of string");
  CHECK(f.at("flags").type_description() == "array of bool");
  CHECK(f.at("flags").raw().size() == 2);
  CHECK(f.at("u16").type_description() == "u16");
  CHECK(f.find("missing") == nullptr);
  CHECK(f.contains("u8"));
  // Values are views into the mapping: no copies of strings.
  const auto whole = f.bytes();
  const auto name = f.get_string("name");
  CHECK(reinterpret_cast<const std::byte*>(name.data()) >= whole.data());
  CHECK(reinterpret_cast<const std::byte*>(name.data()) < whole.data() + whole.size());

  // Wrong types, missing keys and values that do not fit name the key and what was found.
  auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const gguf_error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string path = (dir.path / "model.gguf").string();
  CHECK_THAT(message([&] { f.get_u32("name"); }), Contains(path) && Contains("metadata 'name' is string, not an integer"));
  CHECK_THAT(message([&] { f.get_u32("i8"); }), Contains("'i8' holds -100, which does not fit u32"));
  CHECK_THAT(message([&] { f.get_i32("u32"); }), Contains("'u32' holds 4000000000, which does not fit i32"));
  CHECK_THAT(message([&] { f.at("u64").as_i64(); }), Contains("holds 9223372036854775808, which does not fit i64"));
  CHECK_THAT(message([&] { f.get_string("u8"); }), Contains("metadata 'u8' is u8, not a string"));
  CHECK_THAT(message([&] { f.get_bool("u8"); }), Contains("is u8, not a bool"));
  CHECK_THAT(message([&] { f.get_f32("u8"); }), Contains("is u8, not a float"));
  CHECK_THAT(message([&] { f.get_f32("big.f64"); }), Contains("'big.f64' holds") && Contains("does not fit f32"));
  CHECK_THAT(message([&] { f.get_string_array("types"); }), Contains("'types' is array of i32, not an array of string"));
  CHECK_THAT(message([&] { f.get_i32_array("tokens"); }), Contains("is array of string, not an array of integers"));
  CHECK_THAT(message([&] { f.get_i32_array("wide"); }), Contains("holds 1099511627776 at element 1, which does not fit i32"));
  CHECK_THAT(message([&] { f.get_f32_array("types"); }), Contains("not an array of float"));
  CHECK_THAT(message([&] { f.get_string("general.name"); }), Contains(path) && Contains("has no metadata key 'general.name'"));
  CHECK_THAT(message([&] { f.tensor("w"); }), Contains("has no tensor 'w'"));
}

TEST_CASE("gguf: tensors, alignment and data spans", "[gguf]") {
  for (const std::uint64_t alignment : {std::uint64_t(32), std::uint64_t(64), std::uint64_t(1), std::uint64_t(4096)}) {
    for (const std::uint32_t version : {2u, 3u}) {
      INFO("alignment " << alignment << ", version " << version);
      gguf_writer w;
      w.version = version;
      w.alignment = alignment;
      if (alignment != 32) w.scalar("general.alignment", gguf_type::u32, std::uint32_t(alignment));
      w.string("general.architecture", "llama");
      const std::string norm = pattern_bytes(3 * 4, 1), half = pattern_bytes(2 * 3 * 2, 2);
      const std::string q4 = pattern_bytes(4 * 18, 3), q8 = pattern_bytes(2 * 2 * 34, 4), q6k = pattern_bytes(210, 5);
      w.tensor("norm.weight", {3}, f32_type, norm)
          .tensor("half", {2, 3}, f16_type, half)
          .tensor("blk.0.attn_q.weight", {64, 2}, q4_0_type, q4)
          .tensor("emb", {64, 1, 2}, q8_0_type, q8)
          .tensor("k_quant", {256}, q6_k_type, q6k);
      scratch_dir dir;
      const gguf_file f = gguf_file::open(dir.write(w.bytes()));
      CHECK(f.version() == version);
      CHECK(f.alignment() == alignment);
      CHECK(f.data_offset() % alignment == 0);
      REQUIRE(f.tensors().size() == 5);
      CHECK(f.tensors()[2].name == "blk.0.attn_q.weight");  // file order

      const auto& q = f.tensor("blk.0.attn_q.weight");
      CHECK(q.type_name == "Q4_0");
      CHECK(q.n_dims == 2);
      CHECK(std::vector<std::uint64_t>(q.dims().begin(), q.dims().end()) == std::vector<std::uint64_t>{64, 2});
      CHECK(q.shape() == std::vector<std::uint64_t>{2, 64});  // row-major: rows first
      CHECK(q.row_length() == 64);
      CHECK(q.row_count() == 2);
      CHECK(q.element_count() == 128);
      CHECK(q.byte_size == 4 * 18);
      CHECK(f.tensor_format(q) == luminal::quant_format::q4_0);
      CHECK(q.byte_size == luminal::row_bytes(luminal::quant_format::q4_0, q.row_length()) * q.row_count());

      const auto& e = f.tensor("emb");
      CHECK(e.shape() == std::vector<std::uint64_t>{2, 1, 64});
      CHECK(f.tensor("norm.weight").shape() == std::vector<std::uint64_t>{3});
      CHECK(f.tensor("half").format() == luminal::quant_format::f16);

      // Each span is the tensor's bytes where the file holds them, not a copy.
      const std::string expected[] = {norm, half, q4, q8, q6k};
      for (std::size_t i = 0; i < 5; ++i) {
        const auto& t = f.tensors()[i];
        INFO("tensor " << t.name);
        CHECK(t.offset % alignment == 0);
        CHECK(t.data.data() == f.bytes().data() + f.data_offset() + t.offset);
        CHECK(t.data.size() == expected[i].size());
        CHECK(std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size()) == expected[i]);
        CHECK(f.tensor_data(t.name).data() == t.data.data());
      }

      // A type luminal does not compute with is read and sized, and refused only when its
      // format is asked for, by its name.
      const auto& k = f.tensor("k_quant");
      CHECK(k.type_name == "Q6_K");
      CHECK(k.byte_size == 210);
      CHECK_FALSE(k.format().has_value());
      CHECK_THROWS_WITH(f.tensor_format(k), Contains("tensor 'k_quant' has ggml type Q6_K, which luminal does not read"));
      CHECK(f.find_tensor("nope") == nullptr);
    }
  }
}

TEST_CASE("gguf: a moved file keeps its views; empty files and directories are refused", "[gguf]") {
  gguf_writer w;
  w.string("general.architecture", "llama").tensor("w", {4}, f32_type, pattern_bytes(16, 9));
  scratch_dir dir;
  gguf_file a = gguf_file::open(dir.write(w.bytes()));
  const auto span = a.tensor("w").data;
  const std::string_view arch = a.get_string("general.architecture");
  gguf_file b = std::move(a);
  CHECK(b.tensor("w").data.data() == span.data());
  CHECK(b.get_string("general.architecture").data() == arch.data());
  CHECK(arch == "llama");
  CHECK_THROWS_AS(a.tensors(), gguf_error);  // NOLINT(bugprone-use-after-move): says so, not undefined

  CHECK_THROWS_WITH(gguf_file::open((dir.path / "absent.gguf").string()), Contains("absent.gguf: file does not exist"));
  CHECK_THROWS_WITH(gguf_file::open(dir.path.string()), Contains("is a directory"));
  CHECK_THROWS_WITH(gguf_file::open(dir.write("", "empty.gguf")), Contains("empty.gguf: is 0 bytes long"));
  // The smallest valid file: a header with no metadata and no tensors.
  CHECK(gguf_file::open(dir.write(gguf_writer{}.bytes(), "header.gguf")).tensors().empty());
}

TEST_CASE("gguf hostile: every truncation of a valid file is refused", "[gguf]") {
  gguf_writer w;
  w.scalar("general.alignment", gguf_type::u32, std::uint32_t(16))
      .string("general.architecture", "llama")
      .strings("tokenizer.ggml.tokens", {"a", "bc"})
      .array("tokenizer.ggml.token_type", gguf_type::i32, std::vector<std::int32_t>{1, 3})
      .scalar("flag", gguf_type::boolean, std::uint8_t(1));
  w.alignment = 16;
  w.tensor("a", {2}, f32_type, pattern_bytes(8, 1)).tensor("b", {32}, q8_0_type, pattern_bytes(34, 2));
  const std::string whole = w.bytes();
  scratch_dir dir;
  REQUIRE(gguf_file::open(dir.write(whole)).tensors().size() == 2);
  for (std::size_t n = 0; n < whole.size(); ++n) {
    INFO("prefix of " << n << " of " << whole.size() << " bytes");
    const std::string msg = refusal(dir, whole.substr(0, n), "prefix.gguf");
    CHECK_THAT(msg, Contains("prefix.gguf"));
    const bool names_cause = msg.find("past the end of the file") != std::string::npos ||
                             msg.find("cannot fit") != std::string::npos || msg.find("too short") != std::string::npos;
    CHECK(names_cause);
  }
}

TEST_CASE("gguf hostile: header, magic and version", "[gguf]") {
  require_refused("GGML\x03\0\0\0", {"does not start with the magic 'GGUF'", "47 47 4d 4c"});
  gguf_writer v1;
  v1.version = 1;
  require_refused(v1.bytes(), {"GGUF version 1", "versions 2 and 3"});
  gguf_writer v4;
  v4.version = 4;
  require_refused(v4.bytes(), {"GGUF version 4"});
  gguf_writer big;
  big.version = 0x03000000;  // version 3, big-endian
  require_refused(big.bytes(), {"big-endian", "little-endian files only"});
  gguf_writer many_kv;
  many_kv.kv_count_written = std::uint64_t(1) << 62;
  require_refused(many_kv.bytes(), {"metadata count 4611686018427387904 cannot fit"});
  gguf_writer many_tensors;
  many_tensors.string("a", "b");
  many_tensors.tensor_count_written = 1000;
  require_refused(many_tensors.bytes(), {"tensor count 1000 cannot fit"});
  gguf_writer more_tensors_than_infos;
  more_tensors_than_infos.string("general.architecture", "llama").info("w", {4}, f32_type, 0);
  more_tensors_than_infos.tensor_count_written = 2;
  require_refused(more_tensors_than_infos.bytes(), {"tensor #1: the name", "past the end of the file"});
}

TEST_CASE("gguf hostile: metadata values", "[gguf]") {
  auto with = [](auto&& add) {
    gguf_writer w;
    add(w);
    return w.bytes();
  };
  auto u32 = [](std::uint32_t v) { return le_bytes{}.put(v).out; };
  auto u64 = [](std::uint64_t v) { return le_bytes{}.put(v).out; };
  require_refused(with([&](gguf_writer& w) { w.raw("k", u32(13) + "x"); }), {"metadata 'k': value type 13", "not a GGUF value type"});
  require_refused(with([&](gguf_writer& w) { w.raw("k", u32(9) + u32(99) + u64(0)); }), {"array element type 99"});
  require_refused(with([&](gguf_writer& w) { w.raw("nest", u32(9) + u32(9) + u64(1) + u32(4) + u64(0)); }),
                  {"metadata 'nest' is an array of arrays"});
  require_refused(with([&](gguf_writer& w) { w.raw("s", u32(8) + u64(1000) + "short"); }),
                  {"metadata 's': string length 1000", "past the end of the file"});
  require_refused(with([&](gguf_writer& w) { w.raw("a", u32(9) + u32(4) + u64(std::uint64_t(1) << 61) + u32(1)); }),
                  {"metadata 'a': an array of 2305843009213693952 u32 cannot fit"});
  require_refused(with([&](gguf_writer& w) { w.raw("a", u32(9) + u32(8) + u64(1000000) + u64(1) + "x"); }),
                  {"an array of 1000000 string cannot fit"});
  require_refused(with([&](gguf_writer& w) { w.raw("a", u32(9) + u32(8) + u64(2) + u64(1) + "x" + u64(50) + "yz"); }),
                  {"metadata 'a': element 1: string length 50"});
  require_refused(with([&](gguf_writer& w) { w.raw("flag", u32(7) + "\x02"); }), {"metadata 'flag': bool 2", "neither 0 nor 1"});
  require_refused(with([&](gguf_writer& w) { w.raw("flags", u32(9) + u32(7) + u64(2) + "\x01\x05"); }), {"'flags': bool 5"});
  require_refused(with([&](gguf_writer& w) { w.raw("x", u32(10) + "abc"); }), {"metadata 'x': the u64 value", "past the end"});
  require_refused(with([&](gguf_writer& w) { w.string("k", "1").string("j", "2").string("k", "3"); }),
                  {"metadata key 'k' appears twice (entries 0 and 2)"});
  {  // a megabyte-long name is cut in the message
    const std::string long_key(1 << 20, 'k');
    scratch_dir dir;
    const std::string msg = refusal(dir, with([&](gguf_writer& w) { w.string(long_key, "1").string(long_key, "2"); }));
    CHECK_THAT(msg, Contains("appears twice") && Contains("kkk..."));
    CHECK(msg.size() < 400);
  }
  require_refused(with([&](gguf_writer& w) { w.string("bad\xff" "key", "v"); }), {"metadata key #0 ('bad\\xffkey') is not valid UTF-8"});  // shown escaped
  require_refused(with([&](gguf_writer& w) { w.string("\xed\xa0\x80", "v"); }), {"not valid UTF-8"});  // a surrogate
  require_refused(with([&](gguf_writer& w) { w.kv.put(std::uint64_t(-1)).out += std::string(20, 'x'); ++w.kv_count; }),
                  {"metadata key #0: string length 18446744073709551615"});
}

TEST_CASE("gguf hostile: alignment", "[gguf]") {
  auto aligned = [](auto value, gguf_type type) {
    gguf_writer w;
    w.scalar("general.alignment", type, value);
    return w.bytes();
  };
  require_refused(aligned(std::uint32_t(48), gguf_type::u32), {"general.alignment 48 is not a power of two"});
  require_refused(aligned(std::uint32_t(0), gguf_type::u32), {"general.alignment 0 is not a power of two"});
  require_refused(aligned(std::uint32_t(1) << 30, gguf_type::u32), {"general.alignment 1073741824 is over the limit"});
  require_refused(aligned(std::int32_t(-32), gguf_type::i32), {"'general.alignment' holds -32"});
  require_refused(aligned(1.0f, gguf_type::f32), {"metadata 'general.alignment' is f32, not an integer"});
  scratch_dir dir;  // any integer type that holds a power of two is accepted
  CHECK(gguf_file::open(dir.write(aligned(std::uint64_t(64), gguf_type::u64))).alignment() == 64);
  CHECK(gguf_file::open(dir.write(aligned(std::uint8_t(8), gguf_type::u8))).alignment() == 8);
}

TEST_CASE("gguf hostile: tensor infos", "[gguf]") {
  auto one = [](std::string_view name, std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t offset,
                std::size_t data_bytes = 0) {
    gguf_writer w;
    w.info(name, ne, type, offset);
    w.data = std::string(data_bytes, '\0');
    return w.bytes();
  };
  require_refused(one("w", {4}, f32_type, 4, 64), {"tensor 'w': offset 4 is not a multiple of the alignment 32"});
  require_refused(one("blk.0.attn_q.weight", {64, 64}, q4_0_type, 0, 100),
                  {"tensor 'blk.0.attn_q.weight': its 2304 bytes at offset 0", "run past the end of the file"});
  require_refused(one("w", {4}, f32_type, std::uint64_t(1) << 63), {"tensor 'w': its 16 bytes at offset 9223372036854775808"});
  require_refused(one("w", {4}, f32_type, std::uint64_t(-32)), {"run past the end of the file"});
  require_refused(one("w", {1, 1, 1, 1, 1}, f32_type, 0), {"tensor 'w': n_dims 5 is over ggml's limit of 4"});
  require_refused(one("w", {4, 0}, f32_type, 0), {"tensor 'w': ne[1] is 0"});
  require_refused(one("w", {std::uint64_t(1) << 32, std::uint64_t(1) << 32}, f32_type, 0),
                  {"tensor 'w': dimensions [4294967296, 4294967296] hold more than 2^63 - 1 elements"});
  require_refused(one("w", {std::uint64_t(1) << 31, std::uint64_t(1) << 31}, 28 /* F64 */, 0),
                  {"tensor 'w': dimensions [2147483648, 2147483648] of F64 overflow a 64-bit byte size"});
  require_refused(one("w", {576 + 16, 2}, q4_0_type, 0), {"tensor 'w': the row length ne[0] = 592 is not a multiple of Q4_0's block of 32"});
  require_refused(one("w", {4}, 99, 0), {"tensor 'w': 99 is not a ggml tensor type"});
  require_refused(one("w", {32}, 4 /* Q4_2, removed */, 0), {"tensor 'w': 4 is not a ggml tensor type"});
  require_refused(one("bad\xc3(name", {4}, f32_type, 0), {"tensor #0: the name 'bad\\xc3(name' is not valid UTF-8"});
  require_refused(one(std::string(65, 'n'), {4}, f32_type, 0), {"the name is 65 bytes long, over GGUF's limit of 64"});
  require_refused(one("a\nb", {4}, f32_type, 4), {"tensor 'a\\x0ab': offset 4"});  // control characters escaped
  gguf_writer twice;
  twice.tensor("w", {4}, f32_type, std::string(16, '\0')).tensor("v", {4}, f32_type, std::string(16, '\0'));
  twice.tensor("w", {4}, f32_type, std::string(16, '\0'));
  require_refused(twice.bytes(), {"tensor name 'w' appears twice (entries 0 and 2)"});
  gguf_writer short_dims;
  short_dims.infos.str("w").put(std::uint32_t(3)).put(std::uint64_t(4)).put(std::uint32_t(7));  // ne[1] cut short
  short_dims.tensor_count = 1;
  require_refused(short_dims.bytes(), {"tensor 'w': ne[1] at byte", "past the end of the file"});
}

TEST_CASE("gguf: SmolLM2-135M-Instruct matches the gguf Python package", "[gguf][smollm]") {
  const fs::path model = test::smollm_gguf();
  std::ifstream in(test::fixture_dir() / "smollm_gguf_fixture.json");
  REQUIRE(in);
  const nlohmann::json fx = nlohmann::json::parse(in);

  const gguf_file f = gguf_file::open(model.string());
  CHECK(f.bytes().size() == fx["file_size"].get<std::uint64_t>());
  CHECK(f.version() == 3);
  CHECK(f.version() == fx["version"].get<std::uint32_t>());
  CHECK(f.tensors().size() == 272);
  CHECK(f.metadata().size() == fx["kv_count"].get<std::size_t>());
  CHECK(f.alignment() == fx["alignment"].get<std::uint64_t>());
  CHECK(f.data_offset() == fx["data_offset"].get<std::uint64_t>());
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_u32("llama.block_count") == 30);
  CHECK(f.get_f32("llama.rope.freq_base") == fx["rope_freq_base"].get<float>());
  CHECK(f.get_f32("llama.attention.layer_norm_rms_epsilon") == fx["rms_epsilon"].get<float>());
  CHECK(f.get_bool("tokenizer.ggml.add_bos_token") == fx["add_bos_token"].get<bool>());

  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  const auto types = f.get_i32_array("tokenizer.ggml.token_type");
  CHECK(tokens.size() == 49152);
  CHECK(merges.size() == 48900);
  CHECK(types.size() == tokens.size());
  for (const auto& item : fx["tokens"].items()) CHECK(tokens.at(std::stoul(item.key())) == item.value().get<std::string>());
  for (const auto& item : fx["merges"].items()) CHECK(merges.at(std::stoul(item.key())) == item.value().get<std::string>());
  for (const auto& item : fx["token_types"].items())
    CHECK(types.at(std::stoul(item.key())) == item.value().get<std::int32_t>());

  const auto& emb = f.tensor("token_embd.weight");
  CHECK(emb.type_name == "Q8_0");
  CHECK(f.tensor_format(emb) == luminal::quant_format::q8_0);
  CHECK(std::vector<std::uint64_t>(emb.dims().begin(), emb.dims().end()) == std::vector<std::uint64_t>{576, 49152});
  CHECK(emb.shape() == std::vector<std::uint64_t>{49152, 576});
  const auto& q = f.tensor("blk.0.attn_q.weight");
  CHECK(f.tensor_format(q) == luminal::quant_format::q4_1);
  CHECK(std::vector<std::uint64_t>(q.dims().begin(), q.dims().end()) == std::vector<std::uint64_t>{576, 576});

  const std::byte* begin = f.bytes().data();
  const std::byte* end = begin + f.bytes().size();
  for (const auto& t : f.tensors()) {
    INFO("tensor " << t.name);
    CHECK(t.data.data() >= begin + f.data_offset());
    CHECK(t.data.data() + t.data.size() <= end);
    CHECK(t.data.size() == t.byte_size);
    CHECK(t.format().has_value());  // F32, Q4_1, Q8_0 only
  }

  auto hex = [](std::span<const std::byte> bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::byte b : bytes) out += std::string{digits[std::to_integer<unsigned>(b) >> 4], digits[std::to_integer<unsigned>(b) & 15]};
    return out;
  };
  for (const auto& expected : fx["tensors"]) {
    const auto& t = f.tensor(expected["name"].get<std::string>());
    INFO("tensor " << t.name);
    CHECK(t.type_name == expected["type"].get<std::string>());
    CHECK(std::vector<std::uint64_t>(t.dims().begin(), t.dims().end()) == expected["ne"].get<std::vector<std::uint64_t>>());
    CHECK(t.offset == expected["offset"].get<std::uint64_t>());
    CHECK(t.byte_size == expected["byte_size"].get<std::uint64_t>());
    const std::size_t sample = expected["head"].get<std::string>().size() / 2;
    CHECK(hex(t.data.first(sample)) == expected["head"].get<std::string>());
    CHECK(hex(t.data.last(sample)) == expected["tail"].get<std::string>());
    std::uint64_t sum = 0;
    for (std::byte b : t.data) sum += std::to_integer<unsigned>(b);
    CHECK(sum == expected["byte_sum"].get<std::uint64_t>());
  }
}
