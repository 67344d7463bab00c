// Checkpoints and data files: tensor_store, safetensors save/load (round trips, the exact
// byte layout, interop with PyTorch both ways, refusal of corrupt files, atomic saves),
// the IDX reader (plain and gzip, every corruption), Fashion-MNIST, and shuffled batches.
//
// tests/fixtures/torch_written.safetensors was written by PyTorch with
//     /usr/bin/python3 tests/fixtures/safetensors_interop.py write
// and the same script reads a luminal-written file back into torch:
//     /usr/bin/python3 tests/fixtures/safetensors_interop.py read <file>
// ("safetensors: a checkpoint for PyTorch" writes one into $LUMINAL_IO_TEST_OUTPUT).
#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <luminal/data/idx.hpp>
#include <luminal/io/safetensors.hpp>
#include <luminal/io/tensor_store.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>
#include <xtensor/xarray.hpp>

#include "fixture_dir.hpp"
#include "io_test_support.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using luminal::index_t;

namespace {

using test::read_bytes;
using test::refusal;
using test::require_refused;
using test::temp_dir;
using test::u64le;
using test::write_bytes;
using test::write_safetensors_raw;

std::string f32le(float v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);  // the test hosts are little-endian (checked below)
  return s;
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

template <class T>
void require_equal_arrays(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  REQUIRE(std::vector<std::size_t>(a.shape().begin(), a.shape().end()) ==
          std::vector<std::size_t>(b.shape().begin(), b.shape().end()));
  auto j = b.begin();
  for (auto i = a.begin(); i != a.end(); ++i, ++j) REQUIRE(*i == *j);
}

luminal::tensor_store sample_store() {
  luminal::tensor_store s;
  s.set("fc1.weight", xt::xarray<float>{{1.5f, -2.25f, 3.0f}, {0.0f, -0.0f, 1e-30f}});
  s.set("fc1.bias", xt::xarray<double>{0.1, -1e300, 3.0});
  s.set("labels", xt::xarray<std::int32_t>{{-2147483647 - 1, 0}, {7, 2147483647}});
  s.set("mask", xt::xarray<bool>{true, false, false, true, true});
  s.set("step", xt::xarray<std::int32_t>(42));  // 0-d
  s.set("lr", xt::xarray<float>(0.001f));       // 0-d
  s.set("empty", xt::xarray<float>::from_shape({0, 4}));
  s.set("empty_bool", xt::xarray<bool>::from_shape({3, 0}));
  s.metadata["format"] = "pt";
  s.metadata["epoch"] = "12";
  s.metadata["note"] = "ünïcödé \"quoted\" \\ and\nnewline";
  return s;
}

}  // namespace

// ---- tensor_store ------------------------------------------------------------------------

TEST_CASE("tensor_store: set, get, names, erase and lookup errors", "[io]") {
  luminal::tensor_store s;
  CHECK(s.empty());
  s.set("b", xt::xarray<float>{1, 2, 3});
  s.set("a", xt::xarray<double>{{1, 2}, {3, 4}});
  s.set("c", xt::xarray<bool>{true, false});
  CHECK(s.size() == 3);
  CHECK(s.contains("a"));
  CHECK_FALSE(s.contains("z"));
  CHECK(s.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(s.at("a").dtype == luminal::dtype_tag::f64);
  CHECK(s.at("a").shape == std::vector<index_t>{2, 2});
  CHECK(s.at("a").byte_size() == 32);
  CHECK(s.at("c").byte_size() == 2);
  require_equal_arrays(s.get<double>("a"), xt::xarray<double>{{1, 2}, {3, 4}});
  require_equal_arrays(s.get<bool>("c"), xt::xarray<bool>{true, false});

  // Replacing an entry of the same size reuses its buffer.
  const std::byte* before = s.at("b").data.data();
  s.set("b", xt::xarray<float>{4, 5, 6});
  CHECK(s.at("b").data.data() == before);
  require_equal_arrays(s.get<float>("b"), xt::xarray<float>{4, 5, 6});
  // ... and an entry may change type and shape.
  s.set("b", xt::xarray<std::int32_t>{{1, 2}, {3, 4}});
  CHECK(s.at("b").dtype == luminal::dtype_tag::i32);

  try {
    (void)s.get<float>("missing.weight");
    FAIL("no exception");
  } catch (const luminal::store_error& e) {
    CHECK_THAT(e.what(), Contains("'missing.weight'"));
  }
  try {
    (void)s.get<float>("a");
    FAIL("no exception");
  } catch (const luminal::store_error& e) {
    CHECK_THAT(e.what(), Contains("'a'") && Contains("f64") && Contains("f32"));
  }
  CHECK_THROWS_AS(s.at("nope"), luminal::store_error);

  const std::byte raw[8] = {};
  const index_t shape[] = {2};
  s.set_raw("r", luminal::dtype_tag::f32, shape, raw);
  require_equal_arrays(s.get<float>("r"), xt::xarray<float>{0, 0});
  CHECK_THROWS_WITH(s.set_raw("bad", luminal::dtype_tag::f64, shape, raw), Contains("'bad'") && Contains("16"));

  CHECK(s.erase("a"));
  CHECK_FALSE(s.erase("a"));
  CHECK_FALSE(s.contains("a"));
  CHECK(s.size() == 3);
}

// ---- safetensors -------------------------------------------------------------------------

TEST_CASE("safetensors: round trip of every dtype, 0-d and empty tensors, and metadata", "[io]") {
  temp_dir dir;
  const auto store = sample_store();
  const fs::path file = dir / "model.safetensors";
  luminal::save_safetensors(store, file);
  CHECK(listing(dir.path) == std::set<std::string>{"model.safetensors"});
  // 8 + header is a multiple of 8.
  const std::string bytes = read_bytes(file);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | std::uint8_t(bytes[k]);
  CHECK(n % 8 == 0);

  const auto back = luminal::load_safetensors(file);
  CHECK(back.names() == store.names());
  CHECK(back.metadata == store.metadata);
  for (const auto& [name, e] : store) {
    INFO(name);
    CHECK(back.at(name).dtype == e.dtype);
    CHECK(back.at(name).shape == e.shape);
    CHECK(back.at(name).data == e.data);
  }
  require_equal_arrays(back.get<float>("fc1.weight"), store.get<float>("fc1.weight"));
  require_equal_arrays(back.get<double>("fc1.bias"), xt::xarray<double>{0.1, -1e300, 3.0});
  require_equal_arrays(back.get<std::int32_t>("labels"), store.get<std::int32_t>("labels"));
  require_equal_arrays(back.get<bool>("mask"), xt::xarray<bool>{true, false, false, true, true});
  CHECK(back.get<std::int32_t>("step").dimension() == 0);
  CHECK(back.get<std::int32_t>("step")() == 42);
  CHECK(back.get<float>("lr")() == 0.001f);
  CHECK(back.get<float>("empty").shape()[0] == 0);
  CHECK(back.get<float>("empty").shape()[1] == 4);
  CHECK(back.get<bool>("empty_bool").size() == 0);
  CHECK(std::signbit(back.get<float>("fc1.weight")(1, 1)));  // -0.0 kept bit for bit

  // An empty store is a valid file too ("{}" padded).
  luminal::save_safetensors(luminal::tensor_store{}, dir / "empty.safetensors");
  CHECK(read_bytes(dir / "empty.safetensors") == u64le(8) + std::string("{}      "));
  CHECK(luminal::load_safetensors(dir / "empty.safetensors").size() == 0);

  // Saving over an existing checkpoint replaces it.
  luminal::tensor_store small;
  small.set("x", xt::xarray<float>{1});
  luminal::save_safetensors(small, file);
  CHECK(luminal::load_safetensors(file).names() == std::vector<std::string>{"x"});
  CHECK(listing(dir.path) == std::set<std::string>{"model.safetensors", "empty.safetensors"});
}

TEST_CASE("safetensors: the exact bytes of a small file", "[io]") {
  REQUIRE(std::endian::native == std::endian::little);
  temp_dir dir;
  luminal::tensor_store s;
  s.set("b", xt::xarray<float>{1.0f, -2.0f});
  s.set("a", xt::xarray<std::int32_t>(7));
  s.set("m", xt::xarray<bool>{true, false, true});
  s.set("d", xt::xarray<double>{0.5});
  s.metadata["k"] = "v";
  luminal::save_safetensors(s, dir / "tiny.safetensors");

  // Layout: 8-byte tensors, then 4-byte ones by name, then bools; compact JSON with
  // "__metadata__" first; spaces up to a multiple of 8.
  const std::string header =
      R"({"__metadata__":{"k":"v"},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"I32","shape":[],"data_offsets":[8,12]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("m":{"dtype":"BOOL","shape":[3],"data_offsets":[20,23]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  REQUIRE(padded.size() % 8 == 0);
  std::string expected = u64le(padded.size()) + padded;
  expected += std::string("\x00\x00\x00\x00\x00\x00\xe0\x3f", 8);  // 0.5 as f64
  expected += std::string("\x07\x00\x00\x00", 4);                  // 7 as i32
  expected += std::string("\x00\x00\x80\x3f", 4);                  // 1.0f
  expected += std::string("\x00\x00\x00\xc0", 4);                  // -2.0f
  expected += std::string("\x01\x00\x01", 3);                      // true false true
  CHECK(read_bytes(dir / "tiny.safetensors") == expected);

  // A hand-written file in another writer's style: pretty-printed, other key order, no
  // metadata, no padding.
  const std::string pretty = "{\n  \"w\": {\"shape\": [2], \"data_offsets\": [0, 8], \"dtype\": \"F32\"},\n"
                             "  \"__metadata__\": {\"a\": \"b\"}\n}";
  write_bytes(dir / "pretty.safetensors", u64le(pretty.size()) + pretty + f32le(2.5f) + f32le(-1.0f));
  const auto loaded = luminal::load_safetensors(dir / "pretty.safetensors");
  require_equal_arrays(loaded.get<float>("w"), xt::xarray<float>{2.5f, -1.0f});
  CHECK(loaded.metadata.at("a") == "b");
}

TEST_CASE("safetensors: PyTorch-written fixture", "[io]") {
  const fs::path file = test::fixture_dir() / "torch_written.safetensors";
  INFO("fixture " << file.string() << " (regenerate: /usr/bin/python3 tests/fixtures/safetensors_interop.py write)");
  REQUIRE(fs::exists(file));
  const auto s = luminal::load_safetensors(file);
  CHECK(s.names() == std::vector<std::string>{"empty", "layer.bias", "layer.weight", "mask", "scalar", "steps"});
  CHECK(s.metadata.at("format") == "pt");
  CHECK_THAT(s.metadata.at("written_by"), Contains("torch"));

  xt::xarray<float> weight = xt::xarray<float>::from_shape({3, 4});
  for (int i = 0; i < 12; ++i) weight.data()[i] = float(i) * 0.5f - 1.0f;
  require_equal_arrays(s.get<float>("layer.weight"), weight);
  require_equal_arrays(s.get<double>("layer.bias"), xt::xarray<double>{0.0, 0.125, 0.25, 0.375, 0.5});
  require_equal_arrays(s.get<std::int32_t>("steps"), xt::xarray<std::int32_t>{{-3, -2, -1}, {0, 1, 2}});
  require_equal_arrays(s.get<bool>("mask"), xt::xarray<bool>{true, false, true, true});
  CHECK(s.get<float>("scalar").dimension() == 0);
  CHECK(s.get<float>("scalar")() == 3.25f);
  CHECK(s.at("empty").shape == std::vector<index_t>{0, 3});
  CHECK(s.at("empty").dtype == luminal::dtype_tag::f32);

  // Loading and saving again gives PyTorch's bytes back (same layout rules).
  temp_dir dir;
  luminal::save_safetensors(s, dir / "again.safetensors");
  CHECK(read_bytes(dir / "again.safetensors") == read_bytes(file));
}

TEST_CASE("safetensors: a checkpoint for PyTorch", "[io]") {
  // Written into a fresh directory of its own (a fixed name in the shared temp folder
  // would collide with another user's run). To read it back into torch by hand, name a
  // directory to keep it in:
  //   LUMINAL_IO_TEST_OUTPUT=DIR luminal_tests "safetensors: a checkpoint for PyTorch"
  //   /usr/bin/python3 tests/fixtures/safetensors_interop.py read DIR/luminal_io_test_for_torch.safetensors
  temp_dir dir;
  const char* keep = std::getenv("LUMINAL_IO_TEST_OUTPUT");
  const fs::path file = (keep && *keep ? fs::path(keep) : dir.path) / "luminal_io_test_for_torch.safetensors";
  luminal::save_safetensors(sample_store(), file);
  const auto back = luminal::load_safetensors(file);
  CHECK(back.size() == sample_store().size());
  if (keep && *keep) std::cout << "io_test: wrote " << file.string() << " for tests/fixtures/safetensors_interop.py read\n";
}

TEST_CASE("safetensors: corrupt and invalid files are refused with checkpoint_error", "[io]") {
  temp_dir dir;
  luminal::tensor_store s;
  s.set("w", xt::xarray<float>{{1, 2}, {3, 4}});
  s.set("z", xt::xarray<bool>{true, false});
  const fs::path good = dir / "good.safetensors";
  luminal::save_safetensors(s, good);
  const std::string valid = read_bytes(good);
  const fs::path bad = dir / "bad.safetensors";

  SECTION("missing file and directory") {
    require_refused(dir / "nope.safetensors", "does not exist");
    require_refused(dir.path, "is a directory");
  }
  SECTION("shorter than the 8-byte header length") {
    write_bytes(bad, "");
    require_refused(bad, "0 bytes long");
    write_bytes(bad, valid.substr(0, 5));
    require_refused(bad, "5 bytes long");
  }
  SECTION("header length larger than the file") {
    write_bytes(bad, valid.substr(0, 20));  // truncated inside the header
    require_refused(bad, "larger than the rest of the file");
    std::string huge = valid;
    huge.replace(0, 8, u64le(std::uint64_t(1) << 62));
    write_bytes(bad, huge);
    require_refused(bad, "larger than the rest of the file");
    huge.replace(0, 8, u64le(~std::uint64_t(0)));
    write_bytes(bad, huge);
    require_refused(bad, "larger than the rest of the file");
    write_bytes(bad, u64le(0) + "{}");
    require_refused(bad, "too small");
  }
  SECTION("header that is not a JSON object") {
    write_safetensors_raw(bad, "[1, 2]", "");
    require_refused(bad, "does not start with '{'");
    write_safetensors_raw(bad, "{\"w\": {\"dtype\": \"F32\", ", "");
    require_refused(bad, "not valid JSON");
    write_safetensors_raw(bad, "{} trailing", "");
    require_refused(bad, "not valid JSON");
    write_safetensors_raw(bad, "{\"\xff\xfe\": 1}", "");  // not UTF-8
    require_refused(bad, "not valid JSON");
    std::string broken = valid;
    broken[8 + 5] = '\x01';  // a control character inside a string
    write_bytes(bad, broken);
    require_refused(bad, "not valid JSON");
  }
  SECTION("unknown or unsupported dtype") {
    std::string x = valid;
    x.replace(x.find("F32"), 3, "X32");
    write_bytes(bad, x);
    require_refused(bad, "unknown dtype 'X32'");
    write_safetensors_raw(bad, R"({"h":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0'));
    require_refused(bad, "dtype I16, which luminal does not support");
    write_safetensors_raw(bad, R"({"h":{"dtype":7,"shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0'));
    require_refused(bad, "\"dtype\" is not a string");
  }
  SECTION("I64 loads as i32 when every value fits, and is refused naming the value when one does not") {
    // PyTorch's integer buffers (BERT's position_ids) are I64: [-2, 0, 2147483647].
    const std::string fits = u64le(std::uint64_t(-2)) + u64le(0) + u64le(2147483647);
    write_safetensors_raw(bad, R"({"ids":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}})", fits);
    luminal::tensor_store store = luminal::load_safetensors(bad);
    REQUIRE(store.at("ids").dtype == luminal::dtype_tag::i32);
    REQUIRE((store.get<int>("ids") == xt::xarray<int>{-2, 0, 2147483647}));
    write_safetensors_raw(bad, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                          u64le(1) + u64le(std::uint64_t(1) << 40));
    require_refused(bad, "tensor 'ids' (I64) holds 1099511627776 at element 1, outside the range of i32");
    write_safetensors_raw(bad, R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", u64le(1));
    require_refused(bad, "needs 16");  // the file's size check counts 8 bytes per I64
  }
  SECTION("bad shapes") {
    const std::string data(8, '\0');
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data);
    require_refused(bad, "shape[0] is -2; extents must be non-negative integers");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", data);
    require_refused(bad, "extents must be non-negative integers");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[1,"2"],"data_offsets":[0,8]}})", data);
    require_refused(bad, "shape[1] is \"2\"");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data);
    require_refused(bad, "\"shape\" is not a list");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", data);
    require_refused(bad, "has no \"shape\"");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", data);
    require_refused(bad, "overflows");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", data);
    require_refused(bad, "extents must be non-negative integers");
  }
  SECTION("bad data_offsets") {
    const std::string data(12, '\0');
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", std::string(8, '\0'));
    require_refused(bad, "run past the end of the data (8 bytes");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
    require_refused(bad, "hold 8 bytes, but shape [3] of F32 needs 12");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0'));
    require_refused(bad, "end before they begin");
    write_safetensors_raw(bad, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data);
    require_refused(bad, "tensors 'a' and 'b' overlap");
    write_safetensors_raw(bad, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
    require_refused(bad, "overlap");
    write_safetensors_raw(bad, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", data);
    require_refused(bad, "bytes 4 to 8 of the data belong to no tensor");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", std::string(8, '\0'));
    require_refused(bad, "is not two non-negative integers");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, '\0'));
    require_refused(bad, "is not two non-negative integers");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", std::string(8, '\0'));
    require_refused(bad, "is not two non-negative integers");
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[2]}})", std::string(8, '\0'));
    require_refused(bad, "has no \"data_offsets\"");
  }
  SECTION("truncated data and trailing bytes") {
    write_bytes(bad, valid.substr(0, valid.size() - 1));
    require_refused(bad, "run past the end of the data");
    write_bytes(bad, valid + "x");
    require_refused(bad, "1 trailing bytes after the last tensor");
    write_safetensors_raw(bad, "{}", "abc");
    require_refused(bad, "3 trailing bytes");
  }
  SECTION("other header problems") {
    write_safetensors_raw(bad, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
    require_refused(bad, "'w' more than once");
    write_safetensors_raw(bad, R"({"__metadata__":{"a":1}})", "");
    require_refused(bad, "value of 'a' is not a string");
    write_safetensors_raw(bad, R"({"__metadata__":[1]})", "");
    require_refused(bad, "\"__metadata__\" is not a JSON object");
    write_safetensors_raw(bad, R"({"w":[1]})", "");
    require_refused(bad, "tensor 'w' is not described by a JSON object");
    write_safetensors_raw(bad, R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x02", 2));
    require_refused(bad, "BOOL bytes must be 0 or 1");
  }
  SECTION("every single-byte corruption either loads or throws checkpoint_error") {
    const unsigned char values[] = {0x00, 0xFF, '"', '9', '}', 0x80};
    std::size_t refused = 0, loaded = 0;
    write_bytes(bad, valid);
    std::fstream file(bad, std::ios::in | std::ios::out | std::ios::binary);  // same size: no truncation
    for (std::size_t i = 0; i < valid.size(); ++i) {
      for (unsigned char v : values) {
        if (valid[i] == char(v)) continue;
        file.seekp(std::streamoff(i));
        file.put(char(v));
        file.flush();
        try {
          (void)luminal::load_safetensors(bad);
          ++loaded;
        } catch (const luminal::checkpoint_error&) {
          ++refused;
        }  // anything else escapes and fails the test
      }
      file.seekp(std::streamoff(i));
      file.put(valid[i]);
    }
    REQUIRE(file);
    CHECK(refused > 0);
    CHECK(loaded > 0);  // e.g. a changed data byte of a float
  }
}

TEST_CASE("safetensors: a failed save throws and leaves the existing checkpoint untouched", "[io]") {
  temp_dir dir;
  luminal::tensor_store s;
  s.set("w", xt::xarray<float>{1, 2, 3});
  const fs::path file = dir / "ckpt.safetensors";
  luminal::save_safetensors(s, file);
  const std::string original = read_bytes(file);

  luminal::tensor_store other;
  other.set("w", xt::xarray<float>{9, 9, 9, 9});

  SECTION("target directory does not exist") {
    const fs::path target = dir / "no-such-dir" / "ckpt.safetensors";
    CHECK_THROWS_WITH(luminal::save_safetensors(other, target), Contains(target.string()));
    CHECK_FALSE(fs::exists(dir / "no-such-dir"));
  }
  SECTION("target path is a directory") {
    fs::create_directory(dir / "adir");
    CHECK_THROWS_AS(luminal::save_safetensors(other, dir / "adir"), luminal::checkpoint_error);
    CHECK(fs::is_directory(dir / "adir"));
    CHECK(fs::is_empty(dir / "adir"));
    CHECK(listing(dir.path) == std::set<std::string>{"ckpt.safetensors", "adir"});
  }
  SECTION("a name that cannot be written") {
    other.set("bad\xff", xt::xarray<float>{1});
    CHECK_THROWS_WITH(luminal::save_safetensors(other, file), Contains("not valid UTF-8"));
    luminal::tensor_store reserved;
    reserved.set("__metadata__", xt::xarray<float>{1});
    CHECK_THROWS_WITH(luminal::save_safetensors(reserved, file), Contains("reserved"));
  }
#if !defined(_WIN32)
  SECTION("directory not writable") {
    if (::geteuid() == 0) {
      WARN("running as root: permissions are not enforced, sub-case skipped");
    } else {
      fs::permissions(dir.path, fs::perms::owner_write, fs::perm_options::remove);
      CHECK_THROWS_WITH(luminal::save_safetensors(other, file), Contains("temporary file"));
      fs::permissions(dir.path, fs::perms::owner_write, fs::perm_options::add);
    }
  }
#endif
  CHECK(read_bytes(file) == original);
  // No temporary files are left behind.
  for (const auto& name : listing(dir.path)) CHECK(name.find(".tmp-") == std::string::npos);
}

// ---- IDX ---------------------------------------------------------------------------------

namespace {

using test::idx_bytes;

template <class T>
std::string big_endian(const std::vector<T>& values) {
  std::string s;
  for (T v : values) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (std::endian::native == std::endian::little) std::reverse(b, b + sizeof(T));
    s.append(reinterpret_cast<const char*>(b), sizeof(T));
  }
  return s;
}

void write_gzip(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string idx_refusal(const fs::path& p, std::uint64_t max_elements = luminal::idx_default_max_elements) {
  try {
    (void)luminal::read_idx(p, max_elements);
  } catch (const luminal::data_error& e) {
    return e.what();
  }
  FAIL("'" << p.string() << "' was read, but it should have been refused");
  return {};
}

void require_idx_refused(const fs::path& p, const std::string& why,
                         std::uint64_t max_elements = luminal::idx_default_max_elements) {
  const std::string msg = idx_refusal(p, max_elements);
  INFO("message: " << msg);
  CHECK_THAT(msg, Contains(p.string()));
  CHECK_THAT(msg, Contains(why));
}

}  // namespace

TEST_CASE("idx: round trip of every element type, plain and gzip", "[io][data]") {
  temp_dir dir;
  for (bool gz : {false, true}) {
    INFO((gz ? "gzip" : "plain"));
    auto write = [&](const std::string& name, const std::string& bytes) {
      const fs::path p = dir / (name + (gz ? ".gz" : ""));
      if (gz) write_gzip(p, bytes);
      else write_bytes(p, bytes);
      return p;
    };
    {
      const auto a = luminal::read_idx(write("u8", idx_bytes(0x08, {2, 3}, std::string("\x00\x01\x7f\x80\xfe\xff", 6))));
      CHECK(a.type == luminal::idx_type::u8);
      CHECK(a.dims == std::vector<std::size_t>{2, 3});
      const auto v = a.values<std::uint8_t>();
      CHECK(std::vector<std::uint8_t>(v.begin(), v.end()) == std::vector<std::uint8_t>{0, 1, 127, 128, 254, 255});
      const auto x = a.to_xarray<float>();
      CHECK(x.shape()[0] == 2);
      CHECK(x(1, 2) == 255.0f);
      CHECK_THROWS_AS(a.values<float>(), luminal::data_error);
    }
    {
      const auto a = luminal::read_idx(write("i8", idx_bytes(0x09, {4}, std::string("\x80\xff\x00\x7f", 4))));
      const auto v = a.values<std::int8_t>();
      CHECK(std::vector<std::int8_t>(v.begin(), v.end()) == std::vector<std::int8_t>{-128, -1, 0, 127});
    }
    {
      const std::vector<std::int16_t> in{-32768, -2, 258, 32767};
      const auto a = luminal::read_idx(write("i16", idx_bytes(0x0B, {2, 2}, big_endian(in))));
      const auto v = a.values<std::int16_t>();
      CHECK(std::vector<std::int16_t>(v.begin(), v.end()) == in);
    }
    {
      const std::vector<std::int32_t> in{-2147483647 - 1, 16909060, 2147483647};
      const auto a = luminal::read_idx(write("i32", idx_bytes(0x0C, {3}, big_endian(in))));
      const auto v = a.values<std::int32_t>();
      CHECK(std::vector<std::int32_t>(v.begin(), v.end()) == in);
      CHECK(a.to_xarray<std::int32_t>()(1) == 16909060);
    }
    {
      const std::vector<float> in{1.5f, -0.25f};
      const auto a = luminal::read_idx(write("f32", idx_bytes(0x0D, {1, 2, 1}, big_endian(in))));
      const auto v = a.values<float>();
      CHECK(std::vector<float>(v.begin(), v.end()) == in);
      CHECK(a.dims == std::vector<std::size_t>{1, 2, 1});
    }
    {
      const std::vector<double> in{3.141592653589793, -1e-300};
      const auto a = luminal::read_idx(write("f64", idx_bytes(0x0E, {2}, big_endian(in))));
      const auto v = a.values<double>();
      CHECK(std::vector<double>(v.begin(), v.end()) == in);
    }
    {
      const auto a = luminal::read_idx(write("zero", idx_bytes(0x08, {0, 28, 28}, "")));
      CHECK(a.size() == 0);
      CHECK(a.dims == std::vector<std::size_t>{0, 28, 28});
    }
  }
}

TEST_CASE("idx: corrupt files are refused with data_error", "[io][data]") {
  temp_dir dir;
  const fs::path p = dir / "bad-idx";
  const fs::path pz = dir / "bad-idx.gz";
  const std::string valid = idx_bytes(0x08, {2, 3}, std::string(6, '\x05'));

  require_idx_refused(dir / "missing-idx3-ubyte.gz", "does not exist");
  require_idx_refused(dir.path, "not a regular file");
  write_bytes(p, "");
  require_idx_refused(p, "too short");
  write_bytes(p, std::string("\x00\x00", 2));
  require_idx_refused(p, "too short");
  write_bytes(p, std::string("\x01\x00\x08\x01\x00\x00\x00\x00", 8));
  require_idx_refused(p, "bad magic");
  write_bytes(p, "PK\x03\x04 this is a zip file");
  require_idx_refused(p, "bad magic");
  write_bytes(p, idx_bytes(0x0A, {1}, "x"));
  require_idx_refused(p, "unsupported element type 0x0A");
  write_bytes(p, idx_bytes(0x08, {}, "x"));
  require_idx_refused(p, "0 dimensions");
  write_bytes(p, valid.substr(0, 9));
  require_idx_refused(p, "ends inside the header");
  write_bytes(p, valid.substr(0, valid.size() - 1));
  require_idx_refused(p, "is truncated: dimensions 2 x 3 need 6 bytes of u8 data, the file holds 5");
  write_bytes(p, valid + "xy");
  require_idx_refused(p, "2 bytes of trailing data");
  write_bytes(p, idx_bytes(0x0E, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, ""));
  require_idx_refused(p, "more elements than the limit");
  write_bytes(p, idx_bytes(0x08, {1000, 1000}, ""));
  require_idx_refused(p, "more elements than the limit of 1000", 1000);
  // A header claiming 4 GiB with no data fails as truncated without allocating 4 GiB.
  write_bytes(p, idx_bytes(0x08, {65536, 65535}, "abc"));
  require_idx_refused(p, "is truncated");

  // gzip: truncated or trailing decompressed data, truncated or corrupt compressed data.
  write_gzip(pz, valid.substr(0, valid.size() - 2));
  require_idx_refused(pz, "is truncated");
  write_gzip(pz, valid + "z");
  require_idx_refused(pz, "1 bytes of trailing data");
  std::string big_data(200000, '\0');
  std::mt19937 rng(1);
  for (auto& c : big_data) c = char(rng() % 7);
  write_gzip(pz, idx_bytes(0x08, {200000}, big_data));
  REQUIRE(luminal::read_idx(pz).size() == 200000);
  std::string compressed = read_bytes(pz);
  write_bytes(pz, compressed.substr(0, compressed.size() / 2));
  require_idx_refused(pz, "");
  for (std::size_t i = 40; i < 80; ++i) compressed[i] = char(~compressed[i]);
  write_bytes(pz, compressed);
  require_idx_refused(pz, "");
}

// ---- Fashion-MNIST -----------------------------------------------------------------------

TEST_CASE("fashion_mnist: the real data set", "[io][data]") {
  const fs::path dir(luminal::fashion_mnist_default_dir);
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz"))
    FAIL("Fashion-MNIST is not installed in " << dir.string()
                                              << ": install the Debian package dataset-fashion-mnist "
                                                 "(apt-get install dataset-fashion-mnist)");
  const auto train = luminal::load_fashion_mnist(dir, luminal::dataset_split::train);
  const auto test = luminal::load_fashion_mnist(dir, luminal::dataset_split::test);
  REQUIRE(train.images.dimension() == 2);
  CHECK(train.images.shape()[0] == 60000);
  CHECK(train.images.shape()[1] == 784);
  CHECK(train.labels.size() == 60000);
  CHECK(test.images.shape()[0] == 10000);
  CHECK(test.images.shape()[1] == 784);
  CHECK(test.labels.size() == 10000);

  for (const auto* split : {&train, &test}) {
    std::vector<int> per_class(10, 0);
    std::size_t out_of_range = 0;
    for (std::int32_t y : split->labels) {
      if (y < 0 || y > 9) ++out_of_range;
      else ++per_class[std::size_t(y)];
    }
    CHECK(out_of_range == 0);
    for (int c : per_class) CHECK(c == int(split->labels.size() / 10));  // balanced classes
  }
  double sum = 0, sum_sq = 0, lo = 1, hi = 0;
  for (float v : train.images) {
    sum += v;
    sum_sq += double(v) * v;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  const double n = double(train.images.size());
  const double mean = sum / n, stddev = std::sqrt(sum_sq / n - mean * mean);
  CHECK(lo == 0.0);
  CHECK(hi == 1.0);
  CHECK(mean == Approx(0.286).margin(0.002));
  CHECK(mean == Approx(luminal::fashion_mnist_mean).epsilon(1e-5));
  CHECK(stddev == Approx(luminal::fashion_mnist_std).epsilon(1e-5));

  auto normalized = train.images;
  luminal::normalize(normalized, luminal::fashion_mnist_mean, luminal::fashion_mnist_std);
  double nsum = 0;
  for (float v : normalized) nsum += v;
  CHECK(nsum / n == Approx(0.0).margin(1e-4));
  CHECK(normalized(0, 0) == Approx((train.images(0, 0) - luminal::fashion_mnist_mean) / luminal::fashion_mnist_std));
  CHECK_THROWS_AS(luminal::normalize(normalized, 0.0f, 0.0f), luminal::data_error);
}

TEST_CASE("fashion_mnist: missing or inconsistent files", "[io][data]") {
  temp_dir dir;
  CHECK_THROWS_WITH(luminal::load_fashion_mnist(dir.path), Contains("dataset-fashion-mnist") && Contains(dir.path.string()));

  const std::string images = idx_bytes(0x08, {2, 28, 28}, std::string(2 * 784, '\x80'));
  write_gzip(dir / "train-images-idx3-ubyte.gz", images);
  write_gzip(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, std::string("\x01\x02\x03", 3)));
  CHECK_THROWS_WITH(luminal::load_fashion_mnist(dir.path), Contains("holds 3 labels") && Contains("2 images"));

  write_gzip(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {2}, std::string("\x01\x0a", 2)));
  CHECK_THROWS_WITH(luminal::load_fashion_mnist(dir.path), Contains("label 1 is 10"));

  write_gzip(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {2}, std::string("\x09\x00", 2)));
  const auto data = luminal::load_fashion_mnist(dir.path);
  CHECK(data.images.shape()[0] == 2);
  CHECK(data.images(1, 783) == Approx(128.0f / 255.0f));
  CHECK(data.labels(0) == 9);

  // Uncompressed files are found too.
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_bytes(0x08, {1, 28, 27}, std::string(28 * 27, '\0')));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes(0x08, {1}, std::string(1, '\0')));
  CHECK_THROWS_WITH(luminal::load_fashion_mnist(dir.path, luminal::dataset_split::test), Contains("28 x 28"));
}

// ---- batching ----------------------------------------------------------------------------

TEST_CASE("shuffled_batches: seeded permutation split into batches", "[io][data]") {
  const auto b = luminal::shuffled_batches(10, 4, 42, false);
  REQUIRE(b.size() == 3);
  CHECK(b[0].size() == 4);
  CHECK(b[1].size() == 4);
  CHECK(b[2].size() == 2);  // the last, partial batch
  std::vector<index_t> all;
  for (std::span<const index_t> batch : b) all.insert(all.end(), batch.begin(), batch.end());
  CHECK(all == b.permutation());
  std::vector<index_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // The algorithm is fixed (mt19937_64, Fisher-Yates, rejection sampling), so this is the
  // same on every platform and standard library; an independent Python implementation of
  // MT19937-64 and the same shuffle gives this permutation too.
  CHECK(b.permutation() == std::vector<index_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6});

  const auto dropped = luminal::shuffled_batches(10, 4, 42, true);
  CHECK(dropped.size() == 2);
  CHECK(dropped.permutation() == b.permutation());
  CHECK(luminal::shuffled_batches(12, 4, 1, true).size() == 3);
  CHECK(luminal::shuffled_batches(12, 4, 1, false).size() == 3);
  CHECK(luminal::shuffled_batches(0, 4, 1, false).size() == 0);
  CHECK(luminal::shuffled_batches(3, 4, 1, true).size() == 0);
  CHECK(luminal::shuffled_batches(3, 4, 1, false).size() == 1);
  CHECK_THROWS_AS(luminal::shuffled_batches(3, 0, 1), luminal::data_error);

  const auto big1 = luminal::shuffled_batches(60000, 128, 7);
  const auto big2 = luminal::shuffled_batches(60000, 128, 7);
  const auto big3 = luminal::shuffled_batches(60000, 128, 8);
  CHECK(big1.permutation() == big2.permutation());
  CHECK(big1.permutation() != big3.permutation());
  CHECK(big1.size() == 469);
  CHECK(big1[468].size() == 60000 - 468 * 128);
  std::vector<char> seen(60000, 0);
  std::size_t bad = 0;
  for (index_t i : big1.permutation()) {
    if (i < 0 || i >= 60000 || seen[std::size_t(i)]) ++bad;
    else seen[std::size_t(i)] = 1;
  }
  CHECK(bad == 0);  // each of 0..59999 exactly once
}

TEST_CASE("gather_rows: copies selected rows into a preallocated batch", "[io][data]") {
  xt::xarray<float> x = {{0, 1, 2}, {10, 11, 12}, {20, 21, 22}, {30, 31, 32}};
  xt::xarray<std::int32_t> y = {0, 1, 2, 3};
  xt::xarray<float> xb = xt::xarray<float>::from_shape({2, 3});
  xt::xarray<std::int32_t> yb = xt::xarray<std::int32_t>::from_shape({2});
  const float* storage = xb.data();
  const std::vector<index_t> rows{3, 1};
  luminal::gather_rows(x, rows, xb);
  luminal::gather_rows(y, rows, yb);
  require_equal_arrays(xb, xt::xarray<float>{{30, 31, 32}, {10, 11, 12}});
  require_equal_arrays(yb, xt::xarray<std::int32_t>{3, 1});
  CHECK(xb.data() == storage);  // filled in place

  const std::vector<index_t> out_of_range{0, 4};
  CHECK_THROWS_WITH(luminal::gather_rows(x, out_of_range, xb), Contains("row index 4"));
  const std::vector<index_t> three{0, 1, 2};
  CHECK_THROWS_WITH(luminal::gather_rows(x, three, xb), Contains("(2, 3)") && Contains("(4, 3)"));
  xt::xarray<float> wrong = xt::xarray<float>::from_shape({2, 4});
  CHECK_THROWS_AS(luminal::gather_rows(x, rows, wrong), luminal::data_error);
  require_equal_arrays(xb, xt::xarray<float>{{30, 31, 32}, {10, 11, 12}});  // untouched by failures

  // With shuffled_batches over a whole epoch, every row appears once.
  const auto batches = luminal::shuffled_batches(4, 2, 3, true);
  std::vector<float> firsts;
  for (auto batch : batches) {
    luminal::gather_rows(x, batch, xb);
    firsts.push_back(xb(0, 0));
    firsts.push_back(xb(1, 0));
  }
  std::sort(firsts.begin(), firsts.end());
  CHECK(firsts == std::vector<float>{0, 10, 20, 30});
}
