// PyTorch parity, part 1 (issue 17): values and gradients at kinks and domain edges, against
// torch 2.x (tests/fixtures/make_parity_fixtures.py writes parity_fixtures.json; the
// comparison is grad_torch_fixtures.hpp's check_case_in, which also checks the op's
// elementwise value, inf and NaN included). Each elementwise case is sum(op(x) * r) over 16
// elements whose first ones are the edge points: 0, clamp bounds, negative bases, halves.
// The new ops and reductions are in parity_ops_test.cpp.
#include <luminal/nn/activation.hpp>
#include <luminal/backends/host.hpp>
#include <set>

#include "grad_torch_fixtures.hpp"

using namespace luminal;

namespace {
using torch_oracle::check_unary;
/// Every case of parity_fixtures.json: the two test files test exactly these.
const std::vector<std::string> case_names = {
    "pow_square", "pow_cube", "pow_minus_two", "pow_zero", "pow_half", "relu", "clamp_bounds", "clamp_min",
    "clamp_max", "abs", "sign", "leaky_relu_kink", "softplus_edges", "sqrt_zero", "log_zero", "rsqrt", "gelu_exact",
    "where_kink", "cos", "erf", "erfc", "log1p", "expm1", "floor", "ceil", "round", "trunc", "pow_tensor",
    "min_argmin", "mean_var_std", "concat_stack", "cumsum"};
}  // namespace

TEST_CASE("parity: the fixture file holds every case", "[parity][torch]") {
  std::set<std::string> in_file;
  for (const auto& item : torch_oracle::fixture_cases(torch_oracle::parity_file).items()) in_file.insert(item.key());
  REQUIRE(in_file == std::set<std::string>(case_names.begin(), case_names.end()));
}

TEMPLATE_LIST_TEST_CASE("parity: pow with a compile-time exponent, negative bases and 0", "[parity][torch]", test_backends) {
  SECTION("x^2 is x*x") { check_unary<TestType>("pow_square", [](auto x) { return pow(x, 2.0_c); }); }
  SECTION("x^3") { check_unary<TestType>("pow_cube", [](auto x) { return pow(x, c<3>); }); }
  SECTION("x^-2: inf at 0, gradient -inf") { check_unary<TestType>("pow_minus_two", [](auto x) { return pow(x, c<-2>); }); }
  SECTION("x^0 = 1") { check_unary<TestType>("pow_zero", [](auto x) { return pow(x, c<0>); }); }
  SECTION("x^0.5") { check_unary<TestType>("pow_half", [](auto x) { return pow(x, c<0.5>); }); }
}

TEMPLATE_LIST_TEST_CASE("parity: pow of two tensors, negative bases", "[parity][torch]", test_backends) {
  auto a = input<"a", f32>(shape<16>);
  auto b = input<"b", f32>(shape<16>);
  auto r = input<"r", f32>(shape<16>);
  torch_oracle::check_case_in<TestType>(torch_oracle::parity_file, "pow_tensor", std::tuple{pow(a, b)}, sum(pow(a, b) * r), a, b);
}

TEMPLATE_LIST_TEST_CASE("parity: gradients at kinks", "[parity][torch]", test_backends) {
  SECTION("relu'(0) = 0") { check_unary<TestType>("relu", [](auto x) { return relu(x); }); }
  SECTION("clamp: 0 at the bounds") { check_unary<TestType>("clamp_bounds", [](auto x) { return clamp<-0.5, 0.5>(x); }); }
  SECTION("max with a constant is clamp(min=)") { check_unary<TestType>("clamp_min", [](auto x) { return maximum(x, c<0.25>); }); }
  SECTION("min with a constant is clamp(max=)") { check_unary<TestType>("clamp_max", [](auto x) { return min(x, c<-0.25>); }); }
  SECTION("abs'(0) = 0") { check_unary<TestType>("abs", [](auto x) { return abs(x); }); }
  SECTION("sign") { check_unary<TestType>("sign", [](auto x) { return sign(x); }); }
  SECTION("leaky_relu'(0) = slope") { check_unary<TestType>("leaky_relu_kink", [](auto x) { return leaky_relu<0.1>(x); }); }
  SECTION("where at its switch") {
    check_unary<TestType>("where_kink", [](auto x) { return where(less_than(x, c<0>), x * x, sin(x)); });
  }
}

TEST_CASE("parity: nn::GELU takes torch's approximate= form", "[parity]") {
  auto x = input<"x", f32>(shape<3>);
  STATIC_REQUIRE(std::is_same_v<decltype(nn::GELU{}(x)), decltype(gelu(x))>);
  STATIC_REQUIRE(std::is_same_v<decltype(nn::GELU{approximate::tanh}(x)), decltype(gelu(x, approximate::tanh))>);
  STATIC_REQUIRE(!std::is_same_v<decltype(gelu(x)), decltype(gelu(x, approximate::tanh))>);
}

TEMPLATE_LIST_TEST_CASE("parity: domain edges", "[parity][torch]", test_backends) {
  SECTION("sqrt'(0) = inf") { check_unary<TestType>("sqrt_zero", [](auto x) { return sqrt(x); }); }
  SECTION("log(0) = -inf, log'(0) = inf") { check_unary<TestType>("log_zero", [](auto x) { return log(x); }); }
  SECTION("rsqrt(0) = inf") { check_unary<TestType>("rsqrt", [](auto x) { return rsqrt(x); }); }
  SECTION("softplus above its threshold") { check_unary<TestType>("softplus_edges", [](auto x) { return softplus(x); }); }
  SECTION("gelu is exact by default") { check_unary<TestType>("gelu_exact", [](auto x) { return gelu(x); }); }
}
