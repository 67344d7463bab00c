// Loading that costs what is used (issue 63): load_safetensors with the tensors a model
// expects checks every name, element type and shape against the header before it reads
// any data; tensors the model does not use are refused or skipped unread; a file whose
// tensors exceed this machine's memory is refused naming it; the header alone is read by
// read_safetensors_header; debris of killed saves goes with remove_interrupted_saves; a
// failed allocation names what it was for.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <luminal/backends/host.hpp>
#include <luminal/io/safetensors.hpp>
#include <luminal/luminal.hpp>
#include <vector>

#include <unistd.h>

#include "io_test_support.hpp"

using namespace luminal;
using Catch::Matchers::Contains;

namespace {
tensor_store small_model() {
  tensor_store s;
  s.set("fc.weight", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  s.set("fc.bias", xt::xarray<float>{7, 8});
  s.metadata["run.seed"] = "3";
  return s;
}
std::vector<tensor_spec> small_specs() {
  return {{"fc.weight", dtype_tag::f32, {2, 3}}, {"fc.bias", dtype_tag::f32, {2}}};
}

/// A safetensors file holding one F32 tensor `name` of `bytes` bytes that the file system
/// keeps as a hole (a sparse file): large declared sizes without using the disk.
void write_sparse(const std::filesystem::path& p, const std::string& name, std::uint64_t bytes,
                  const std::string& more_header = "", const std::string& more_data = "") {
  std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(bytes / 4) +
                       "],\"data_offsets\":[0," + std::to_string(bytes) + "]}" + more_header + "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  test::write_bytes(p, test::u64le(header.size()) + header);
  REQUIRE(::truncate(p.c_str(), off_t(8 + header.size() + bytes)) == 0);
  if (!more_data.empty()) {
    std::FILE* f = std::fopen(p.c_str(), "ab");
    REQUIRE(f);
    std::fwrite(more_data.data(), 1, more_data.size(), f);
    std::fclose(f);
  }
}
}  // namespace

TEST_CASE("load_safetensors with expected tensors reads exactly those, checked against the header", "[io][safetensors]") {
  test::temp_dir dir;
  const std::string path = (dir / "m.safetensors").string();
  save_safetensors(small_model(), path);
  const auto specs = small_specs();
  const tensor_store loaded = load_safetensors(path, specs);
  CHECK(loaded.size() == 2);
  CHECK(loaded.get<float>("fc.bias")(1) == 8);
  CHECK(loaded.metadata.at("run.seed") == "3");

  std::vector<tensor_spec> fewer{specs[0]};  // the file holds a tensor the model lacks
  CHECK_THROWS_WITH(load_safetensors(path, fewer), Contains(path) && Contains("holds 'fc.bias', which the model does not have"));
  const tensor_store skipped = load_safetensors(path, fewer, other_tensors::skip);
  CHECK(skipped.size() == 1);
  CHECK(skipped.get<float>("fc.weight")(1, 2) == 6);

  auto wider = specs;
  wider[0].shape = {2, 4};
  CHECK_THROWS_WITH(load_safetensors(path, wider),
                    Contains("holds 'fc.weight' as f32 [2, 3], but the model's is f32 [2, 4]"));
  auto other_type = specs;
  other_type[1].dtype = dtype_tag::f64;
  CHECK_THROWS_WITH(load_safetensors(path, other_type), Contains("holds 'fc.bias' as f32 [2], but the model's is f64 [2]"));
  auto more = specs;
  more.push_back({"fc2.weight", dtype_tag::f32, {5}});
  CHECK_THROWS_WITH(load_safetensors(path, more), Contains("has no tensor 'fc2.weight', which the model needs (f32 [5])"));
  more.back().required = false;  // optional: left out when the file lacks it
  CHECK(load_safetensors(path, more).size() == 2);
}

TEST_CASE("read_safetensors_header gives names, types, shapes and metadata without the data", "[io][safetensors]") {
  test::temp_dir dir;
  const std::string path = (dir / "m.safetensors").string();
  save_safetensors(small_model(), path);
  const safetensors_header h = read_safetensors_header(path);
  REQUIRE(h.tensors.size() == 2);
  CHECK(h.tensors[0].name == "fc.bias");
  CHECK(h.tensors[1].shape == std::vector<index_t>{2, 3});
  CHECK(h.data_bytes == 32);
  CHECK(h.metadata.at("run.seed") == "3");
  test::write_bytes(dir / "bad.safetensors", "not a checkpoint");
  CHECK_THROWS_AS(read_safetensors_header((dir / "bad.safetensors").string()), checkpoint_error);
}

TEST_CASE("a 2 GB tensor the model does not use is refused or skipped without reading it", "[io][safetensors]") {
  test::temp_dir dir;
  const std::string path = (dir / "sparse.safetensors").string();
  // fc.bias follows the 2 GB hole: a model that needs fc.weight too is refused by the header.
  const std::uint64_t hole = std::uint64_t(2) << 30;
  write_sparse(path, "junk", hole,
               ",\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" + std::to_string(hole) + "," +
                   std::to_string(hole + 8) + "]}",
               std::string(8, '\0'));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(load_safetensors(path, small_specs(), other_tensors::skip),
                    Contains("has no tensor 'fc.weight', which the model needs"));
  CHECK_THROWS_WITH(load_safetensors(path, small_specs()), Contains("has no tensor 'fc.weight'"));
  std::vector<tensor_spec> bias_only{{"fc.bias", dtype_tag::f32, {2}}};
  CHECK_THROWS_WITH(load_safetensors(path, bias_only), Contains("holds 'junk', which the model does not have"));
  const tensor_store bias = load_safetensors(path, bias_only, other_tensors::skip);  // seeks past the hole
  CHECK(bias.size() == 1);
  CHECK(bias.get<float>("fc.bias")(0) == 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));  // 2 GB were never read
}

TEST_CASE("tensors larger than this machine's memory are refused naming the file, before any allocation", "[io][safetensors]") {
  test::temp_dir dir;
  const std::string path = (dir / "huge.safetensors").string();
  write_sparse(path, "huge", std::uint64_t(100) << 30);  // 100 GiB, a hole
  const std::uint64_t memory = detail::safetensors::physical_memory_bytes();
  if (memory == 0 || memory >= (std::uint64_t(100) << 30)) return;  // a machine this large reads it
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(load_safetensors(path), Contains(path) && Contains("of tensors to read, more than this machine's memory"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("remove_interrupted_saves removes the temporary files of saves that were killed", "[io][safetensors]") {
  test::temp_dir dir;
  const std::string path = (dir / "ckpt.safetensors").string();
  save_safetensors(small_model(), path);
  // pid 2^22 + 7 is above Linux's default pid_max: no process runs under it.
  test::write_bytes(dir / "ckpt.safetensors.tmp-4194311-0", "half a save");
  test::write_bytes(dir / ("ckpt.safetensors.tmp-" + std::to_string(::getpid()) + "-9"), "this process's own");
  test::write_bytes(dir / "other.safetensors.tmp-4194311-0", "another target's");
  CHECK(remove_interrupted_saves(path) == 1);
  CHECK(!std::filesystem::exists(dir / "ckpt.safetensors.tmp-4194311-0"));
  CHECK(std::filesystem::exists(dir / ("ckpt.safetensors.tmp-" + std::to_string(::getpid()) + "-9")));
  CHECK(std::filesystem::exists(dir / "other.safetensors.tmp-4194311-0"));
  CHECK(remove_interrupted_saves(path) == 0);
}

TEST_CASE("a program's arena that cannot be allocated is an allocation_error naming it and its bytes", "[io][memory]") {
  constexpr Dim N{"N"};
  auto x = input<"x", f32>(shape<N>);
  auto prog = compile(exp(x) * x + x);
  const float one = 1;
  // A view of one float that claims 2^45 of them: nothing reads it before the arena,
  // which the planner sizes from the extent, cannot be allocated.
  prog.bind_view("x", &one, {index_t(1) << 45});
  try {
    prog.run();
    FAIL("a 128 TB arena was allocated");
  } catch (const allocation_error& e) {
    CHECK_THAT(e.what(), Contains("luminal: cannot allocate") && Contains("TB (") && Contains("the arena of a program of"));
    CHECK(e.bytes() >= (std::size_t(1) << 47));
  }
  const xt::xarray<float> small = {1, 2};
  prog.bind("x", small);  // the program still works afterwards
  prog.run();
  CHECK(prog.output<0>()(1) == Approx(std::exp(2.0f) * 2 + 2));
}

TEST_CASE("allocation_error sizes read as decimal units with the exact bytes", "[io][memory]") {
  CHECK(allocation_error::describe_bytes(812) == "812 bytes");
  CHECK(allocation_error::describe_bytes(5730000000) == "5.73 GB (5730000000 bytes)");
  const allocation_error e(1500, "a test");
  CHECK(std::string(e.what()) == "luminal: cannot allocate 1.5 kB (1500 bytes) for a test");
  const std::bad_alloc& as_bad_alloc = e;  // still caught as what it is
  CHECK_THAT(as_bad_alloc.what(), Contains("a test"));
}
