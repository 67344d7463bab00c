// Hostile checkpoints (issue 18): every reproducer that fuzzing and hand-made files found
// is a test here, beside the format details where luminal must be exactly as strict as
// the reference safetensors implementation (Rust, serde_json). IDX files: idx_hostile_test.cpp.
//   - headers: deep nesting (a stack overflow once), 40k and 1M entries (quadratic once),
//     NUL padding, repeated inner keys, JSON grammar;
//   - atomic saves: debris of killed saves removed at the next save, long target names.
// Processor times are bounded loosely (seconds, where the fixed code takes milliseconds
// and the old code took minutes), so that sanitizer builds pass too; they are printed.
#include <catch2/catch.hpp>

#include <ctime>
#include <set>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <luminal/io/safetensors.hpp>
#include <string>
#include <vector>
#include <xtensor/xarray.hpp>

#include "io_test_support.hpp"

#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using test::refusal;
using test::require_refused;
using test::temp_dir;
using test::write_bytes;
using test::write_safetensors_raw;

namespace {

/// The processor time `f` takes, in seconds: CPU time, not wall time, so that the bounds
/// hold on a machine busy with other work.
template <class F>
double seconds_of(F&& f) {
  const std::clock_t start = std::clock();
  f();
  return double(std::clock() - start) / CLOCKS_PER_SEC;
}

/// A header of `count` empty F32 tensors "t<i>", each {"dtype","shape":[0],"data_offsets":[0,0]}.
std::string empty_tensors_header(std::size_t count) {
  std::string h = "{";
  for (std::size_t i = 0; i < count; ++i) {
    if (i) h += ',';
    h += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  return h + "}";
}

}  // namespace

TEST_CASE("safetensors hostile: deep nesting is refused quickly, without recursion", "[io][hostile]") {
  temp_dir dir;
  const fs::path bad = dir / "deep.safetensors";
  const std::size_t depth = 80000;  // the 160 KB reproducer: a stack overflow in nlohmann's dump()
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  const std::string data(4, '\0');
  for (const std::string& header :
       {R"({"w":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,4]}})",
        R"({"w":{"dtype":"F32","shape":[1],"data_offsets":)" + deep + "}}",
        R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":)" + deep + "}}",
        R"({"__metadata__":{"a":)" + deep + "}}", R"({"w":)" + deep + "}"}) {
    write_safetensors_raw(bad, header, data);
    double seconds = 0;
    std::string msg;
    seconds = seconds_of([&] { msg = refusal(bad); });
    INFO("message: " << msg);
    CHECK_THAT(msg, Contains(bad.string()));
    CHECK(msg.size() < 400);  // a short excerpt, never the nested value
    CHECK(seconds < 1.0);
    std::cout << "io_hostile: " << header.size() << "-byte deeply nested header refused in " << seconds * 1e3
              << " ms of CPU time\n";
  }
  // Where a nested value is allowed (a key the reference ignores), 127 levels pass and 128
  // are refused, as serde_json's recursion limit does in the reference implementation.
  auto nested = [](std::size_t levels) {  // levels counts the top object and the tensor's object
    return R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + std::string(levels - 2, '[') +
           std::string(levels - 2, ']') + "}}";
  };
  write_safetensors_raw(bad, nested(127), data);
  CHECK(luminal::load_safetensors(bad).contains("w"));
  write_safetensors_raw(bad, nested(128), data);
  require_refused(bad, "at most 127 levels");
}

TEST_CASE("safetensors hostile: large headers parse in linear time", "[io][hostile]") {
  temp_dir dir;
  const fs::path file = dir / "many.safetensors";
  SECTION("40k tensors written by luminal (17 s with the quadratic duplicate check)") {
    luminal::tensor_store store;
    for (int i = 0; i < 40000; ++i) store.set("layer" + std::to_string(i) + ".weight", xt::xarray<float>{float(i)});
    luminal::save_safetensors(store, file);
    luminal::tensor_store back;
    const double seconds = seconds_of([&] { back = luminal::load_safetensors(file); });
    std::cout << "io_hostile: " << fs::file_size(file) << "-byte file of 40000 tensors loaded in " << seconds * 1e3
              << " ms of CPU time\n";
    REQUIRE(back.size() == 40000);
    CHECK(back.get<float>("layer39999.weight")(0) == 39999.0f);
    CHECK(seconds < 2.0);
  }
  SECTION("1M empty tensors, then 1M metadata entries") {
    write_safetensors_raw(file, empty_tensors_header(1000000), "");
    luminal::tensor_store back;
    const double seconds = seconds_of([&] { back = luminal::load_safetensors(file); });
    std::cout << "io_hostile: " << fs::file_size(file) << "-byte header of 1M tensors parsed in " << seconds * 1e3
              << " ms of CPU time\n";
    CHECK(back.size() == 1000000);
    CHECK(seconds < 20.0);

    std::string h = "{\"__metadata__\":{";
    for (int i = 0; i < 1000000; ++i) h += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
    write_safetensors_raw(file, h + "}}", "");
    const double meta_seconds = seconds_of([&] { back = luminal::load_safetensors(file); });
    std::cout << "io_hostile: header of 1M metadata entries parsed in " << meta_seconds * 1e3 << " ms of CPU time\n";
    CHECK(back.metadata.size() == 1000000);
    CHECK(meta_seconds < 20.0);
  }
  SECTION("a duplicate among 200k keys is found") {
    std::string h = empty_tensors_header(200000);
    h.insert(h.size() - 1, R"(,"t123456":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
    write_safetensors_raw(file, h, "");
    require_refused(file, "'t123456' more than once");
  }
}

TEST_CASE("safetensors hostile: exactly as strict as the reference implementation", "[io][hostile]") {
  temp_dir dir;
  const fs::path file = dir / "x.safetensors";
  const std::string one = R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  const std::string data(4, '\0');
  auto raw = [&](const std::string& header) { write_bytes(file, test::u64le(header.size()) + header + data); };

  SECTION("padding after the object: JSON whitespace passes, NUL and other bytes do not") {
    raw("{" + one + "}    ");
    CHECK(luminal::load_safetensors(file).contains("w"));
    raw("{" + one + "} \t\r\n ");
    CHECK(luminal::load_safetensors(file).contains("w"));
    raw(" \n{" + one + "}");  // whitespace before the object too, as serde_json allows
    CHECK(luminal::load_safetensors(file).contains("w"));
    raw("{" + one + "}" + std::string(5, '\0'));
    require_refused(file, "NUL bytes after the closing '}'");
    raw("{" + one + "}  x");
    require_refused(file, "unexpected 'x' after the closing '}'");
  }
  SECTION("repeated keys: inner, metadata and top-level") {
    raw(R"({"w":{"dtype":"F64","dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "tensor 'w' has \"dtype\" more than once");
    raw(R"({"w":{"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "\"shape\" more than once");
    raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"data_offsets":[0,4]}})");
    require_refused(file, "\"data_offsets\" more than once");
    raw(R"({"__metadata__":{"a":"1","a":"2"},)" + one + "}");
    require_refused(file, "\"__metadata__\" has the key 'a' more than once");
    raw(R"({"__metadata__":{},"__metadata__":{},)" + one + "}");
    require_refused(file, "'__metadata__' more than once");
  }
  SECTION("keys the reference ignores are ignored, but must be valid JSON") {
    raw(R"({"w":{"x":{"y":[1,2.5e-3,true,null,"s",{}]},"dtype":"F32","shape":[1],"data_offsets":[0,4],"z":-0}})");
    CHECK(luminal::load_safetensors(file).contains("w"));
    raw(R"({"w":{"x":[1,],"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "not valid JSON");
    raw(R"({"w":{"x":01,"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "not valid JSON");
    raw(R"({"w":{"x":tru,"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "not valid JSON");
    raw(R"({"__metadata__":null,)" + one + "}");
    CHECK(luminal::load_safetensors(file).metadata.empty());
  }
  SECTION("numbers: shapes and offsets are plain non-negative integers") {
    raw(R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})");
    require_refused(file, "shape[0] is 1.0; extents must be non-negative integers");
    raw(R"({"w":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}})");
    require_refused(file, "shape[0] is 1e0");
    raw(R"({"w":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})");
    require_refused(file, "not valid JSON");
    raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})");
    require_refused(file, "element 1 is 4.0");
    raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[]}})");
    require_refused(file, "is not two non-negative integers");
    raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})");
    require_refused(file, "it has more than two");
    raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}})");
    require_refused(file, "element 1 is 18446744073709551616");
  }
  SECTION("strings: escapes are decoded, lone surrogates and raw control characters refused") {
    raw(R"({"\u0077":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    CHECK(luminal::load_safetensors(file).contains("w"));
    raw(R"({"\ud83d\ude00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    CHECK(luminal::load_safetensors(file).contains("\xF0\x9F\x98\x80"));
    raw(R"({"\ud83d":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "lone high surrogate");
    raw(R"({"\ude00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
    require_refused(file, "lone low surrogate");
    raw("{\"w\\q\":{}}");
    require_refused(file, "invalid escape");
    raw("{\"w\t\":{}}");
    require_refused(file, "control character");
    raw("{\"\xED\xA0\x80\":{}}");  // a surrogate encoded in UTF-8 is not UTF-8
    require_refused(file, "not UTF-8");
  }
  SECTION("an empty tensor whose other extents overflow loads (as in the reference), but get() refuses it") {
    raw(R"({"e":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]},)" + one + "}");
    const auto store = luminal::load_safetensors(file);
    CHECK(store.at("e").element_count() == 0);
    CHECK_THROWS_AS(store.get<float>("e"), luminal::store_error);
    raw(R"({"e":{"dtype":"F32","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]},)" + one + "}");
    require_refused(file, "its byte size overflows");  // the reference multiplies in order too
  }
  SECTION("a name megabytes long is cut short in messages") {
    const std::string name(3000000, 'n');
    raw("{\"" + name + "\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    const std::string msg = refusal(file);
    CHECK_THAT(msg, Contains("unknown dtype 'X'"));
    CHECK(msg.size() < 400);
  }
}

// ---- atomic saves ------------------------------------------------------------------------

#if !defined(_WIN32)
TEST_CASE("safetensors hostile: debris of killed saves is removed at the next save", "[io][hostile]") {
  temp_dir dir;
  const fs::path file = dir / "ckpt.safetensors";
  luminal::tensor_store s;
  s.set("w", xt::xarray<float>{1, 2, 3});

  // A process that has exited: its pid names debris that nobody will finish.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const std::string dead = std::to_string(child);
  const std::string alive = std::to_string(::getppid());  // the process that started the tests

  write_bytes(dir / ("ckpt.safetensors.tmp-" + dead + "-0"), std::string(1000, 'x'));
  write_bytes(dir / ("ckpt.safetensors.tmp-" + dead + "-17"), "partial");
  write_bytes(dir / ("ckpt.safetensors.tmp-" + alive + "-3"), "a save in progress");
  write_bytes(dir / ("ckpt.safetensors.tmp-" + dead + "-x"), "not a temporary name");
  write_bytes(dir / ("other.safetensors.tmp-" + dead + "-0"), "another target's");
  luminal::save_safetensors(s, file);

  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"ckpt.safetensors", "ckpt.safetensors.tmp-" + alive + "-3",
                                       "ckpt.safetensors.tmp-" + dead + "-x", "other.safetensors.tmp-" + dead + "-0"});
  CHECK(luminal::load_safetensors(file).get<float>("w")(2) == 3.0f);
}
#endif

TEST_CASE("safetensors hostile: temporary names stay within NAME_MAX", "[io][hostile]") {
  temp_dir dir;
  luminal::tensor_store s;
  s.set("w", xt::xarray<float>{1, 2, 3});
  for (std::size_t length : {200, 219, 220, 250, 255}) {
    INFO("name length " << length);
    const fs::path file = dir / (std::string(length - 12, 'c') + ".safetensors");
    luminal::save_safetensors(s, file);
    luminal::save_safetensors(s, file);  // replacing it, with the debris scan of a long name
    CHECK(luminal::load_safetensors(file).get<float>("w")(1) == 2.0f);
  }
  // A multi-byte character is not cut in half in the temporary name.
  std::string name;
  for (int i = 0; i < 120; ++i) name += "\xC3\xA9";  // 240 bytes of U+00E9
  const fs::path utf8 = dir / (name + ".st");
  luminal::save_safetensors(s, utf8);
  CHECK(luminal::load_safetensors(utf8).size() == 1);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 6);  // no temporary file left
}
