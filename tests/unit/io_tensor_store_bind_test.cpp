// tensor_store::bind reports what it matched, bind_strict refuses what it did not (binding
// nothing), and a prefix map binds a store whose names carry another prefix.
#include <catch2/catch.hpp>

#include <luminal/backends/host.hpp>
#include <luminal/io/tensor_store.hpp>
#include <luminal/luminal.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

auto affine_program() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = param<"fc.weight", f32>(shape<3>);
  auto b = param<"fc.bias", f32>(shape<3>);
  return compile(x * w + b);
}

tensor_store prefixed_store(const std::string& prefix) {
  tensor_store store;
  store.set(prefix + "fc.weight", xt::xarray<float>{1, 2, 3});
  store.set(prefix + "fc.bias", xt::xarray<float>{10, 20, 30});
  return store;
}
}  // namespace

TEST_CASE("tensor_store::bind reports names on both sides that matched nothing", "[io][tensor_store]") {
  auto prog = affine_program();
  const bind_report report = prefixed_store("model.").bind(prog);
  CHECK(std::size_t(report) == 0);
  CHECK(report.bound.empty());
  // The data input x is not a parameter: a store is not expected to hold it.
  CHECK(report.missing == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(report.unused == std::vector<std::string>{"model.fc.bias", "model.fc.weight"});
  CHECK_FALSE(report.complete());
}

TEST_CASE("tensor_store::bind_strict names the mismatch and the prefix that explains it", "[io][tensor_store]") {
  auto prog = affine_program();
  REQUIRE_THROWS_WITH(prefixed_store("model.").bind_strict(prog),
                      Catch::Contains("the program's parameters without an entry: 'fc.weight', 'fc.bias'") &&
                          Catch::Contains("entries that match no input: 'model.fc.bias', 'model.fc.weight'") &&
                          Catch::Contains("The store's names start with 'model.' where the program's do not") &&
                          Catch::Contains(R"({{"", "model."}})"));
  // The other way round: the program's names carry a prefix the store's lack.
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto longer = compile(x * param<"encoder.fc.weight", f32>(shape<3>));
  REQUIRE_THROWS_WITH(prefixed_store("").bind_strict(longer),
                      Catch::Contains("The program's names start with 'encoder.' where the store's do not"));
}

TEST_CASE("tensor_store::bind with a prefix map binds every parameter, and the program runs", "[io][tensor_store]") {
  auto prog = affine_program();
  const bind_report report = prefixed_store("model.").bind_strict(prog, {{"", "model."}});
  CHECK(report.bound == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(report.complete());
  prog.bind("x", xt::xarray<float>{{1, 1, 1}, {2, 2, 2}});
  prog.run();
  test::require_close(prog.output(), xt::xarray<float>{{11, 22, 33}, {12, 24, 36}});
}

TEST_CASE("tensor_store::bind reports a partial match", "[io][tensor_store]") {
  auto prog = affine_program();
  tensor_store store = prefixed_store("");
  store.erase("fc.bias");
  store.set("fc.scale", xt::xarray<float>{1});
  const bind_report report = store.bind(prog);
  CHECK(report.bound == std::vector<std::string>{"fc.weight"});
  CHECK(report.missing == std::vector<std::string>{"fc.bias"});
  CHECK(report.unused == std::vector<std::string>{"fc.scale"});
  REQUIRE_THROWS_WITH(store.bind_strict(prog), Catch::Contains("1 bound") && Catch::Contains("'fc.bias'"));
}

TEST_CASE("tensor_store::bind_strict binds nothing when something does not match", "[io][tensor_store]") {
  auto prog = affine_program();
  tensor_store store = prefixed_store("");
  store.set("fc.scale", xt::xarray<float>{1});
  REQUIRE_THROWS_WITH(store.bind_strict(prog), Catch::Contains("entries that match no input: 'fc.scale'"));
  // fc.weight matched, but the refused bind left it unbound: run() names it.
  prog.bind("x", xt::xarray<float>{{1, 1, 1}});
  prog.bind("fc.bias", xt::xarray<float>{0, 0, 0});
  REQUIRE_THROWS_WITH(prog.run(), Catch::Contains("'fc.weight' was not bound"));
  // match() reports the same as bind() would, binding nothing either.
  const bind_report report = store.match(prog);
  CHECK(report.bound == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(report.unused == std::vector<std::string>{"fc.scale"});
  REQUIRE_THROWS_WITH(prog.run(), Catch::Contains("'fc.weight' was not bound"));
}

namespace {
auto encoder_program() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = param<"encoder.fc.weight", f32>(shape<3>);
  auto b = param<"encoder.fc.bias", f32>(shape<3>);
  auto h = param<"head.scale", f32>(shape<3>);
  return compile((x * w + b) * h);
}

tensor_store encoder_store(const std::string& encoder_prefix) {
  tensor_store store;
  store.set(encoder_prefix + "fc.weight", xt::xarray<float>{1, 2, 3});
  store.set(encoder_prefix + "fc.bias", xt::xarray<float>{10, 20, 30});
  store.set("head.scale", xt::xarray<float>{1, -1, 2});
  return store;
}
}  // namespace

TEST_CASE("tensor_store::bind renames one part of a program by its prefix", "[io][tensor_store]") {
  auto prog = encoder_program();
  const tensor_store store = encoder_store("model.encoder.");
  const bind_report plain = store.bind(prog);
  CHECK(plain.bound == std::vector<std::string>{"head.scale"});
  CHECK(plain.missing == std::vector<std::string>{"encoder.fc.weight", "encoder.fc.bias"});
  CHECK(plain.unused == std::vector<std::string>{"model.encoder.fc.bias", "model.encoder.fc.weight"});
  // The hint renames what did not match and keeps the name that did ("head.scale").
  REQUIRE_THROWS_WITH(store.bind_strict(prog),
                      Catch::Contains("The store's names start with 'model.' where the program's do not") &&
                          Catch::Contains(R"({{"head.", "head."}, {"", "model."}})") && !Catch::Contains("explains"));
  CHECK(store.bind_strict(prog, plain.suggested_prefix_map()) == 3);

  const bind_report report = store.bind_strict(prog, prefix_map{{"encoder.", "model.encoder."}});
  CHECK(report.bound == std::vector<std::string>{"encoder.fc.weight", "encoder.fc.bias", "head.scale"});
  CHECK(report.complete());
  prog.bind("x", xt::xarray<float>{{1, 1, 1}});
  prog.run();
  test::require_close(prog.output(), xt::xarray<float>{{11, -22, 66}});
}

TEST_CASE("tensor_store::bind_strict names a prefix that replaces another", "[io][tensor_store]") {
  auto prog = encoder_program();
  const tensor_store store = encoder_store("model.enc.");
  REQUIRE_THROWS_WITH(store.bind_strict(prog),
                      Catch::Contains("'encoder.fc.weight'") && Catch::Contains("'model.enc.fc.weight'") &&
                          Catch::Contains("The store's names start with 'model.enc.' where the program's start "
                                          "with 'encoder.'") &&
                          Catch::Contains(R"({{"encoder.", "model.enc."}})"));
  CHECK(store.bind_strict(prog, {{"encoder.", "model.enc."}}) == 3);
}

TEST_CASE("tensor_store::bind's hint says how much of a mismatch one prefix explains", "[io][tensor_store]") {
  auto prog = affine_program();
  tensor_store store;
  store.set("model.fc.weight", xt::xarray<float>{1, 2, 3});
  store.set("optimizer.step", xt::xarray<float>{7});
  const bind_report report = store.bind(prog);
  CHECK(report.missing == std::vector<std::string>{"fc.weight", "fc.bias"});
  const std::string message = report.mismatch_message();
  CHECK_THAT(message, Catch::Contains(R"({{"", "model."}} (it explains 1 of the 2 missing))"));
  // A name that shares only the end of a part is no evidence: "weight" is not "xweight".
  tensor_store unrelated;
  unrelated.set("fc.xweight", xt::xarray<float>{1, 2, 3});
  CHECK_THAT(unrelated.bind(prog).mismatch_message(), !Catch::Contains("prefix map"));
}

TEST_CASE("tensor_store::bind_strict says when the prefix map given is what went wrong", "[io][tensor_store]") {
  auto prog = affine_program();
  REQUIRE_THROWS_WITH(prefixed_store("").bind_strict(prog, {{"", "model."}}),
                      Catch::Contains("The store's names are the program's own: bind without that prefix map"));
}
