// PyTorch parity, part 2 (issue 17): the ops a port reaches for (cos, erf, erfc, log1p,
// expm1, floor, ceil, round, trunc, min and argmin over an axis, mean/var/std with keepdim
// and correction, concat, stack, squeeze, unsqueeze, cumsum), against torch 2.x fixtures (see
// parity_semantics_test.cpp). Their finite-difference checks are in parity_fd_test.cpp.
#include "grad_torch_fixtures.hpp"

using namespace luminal;

using torch_oracle::check_unary;

TEMPLATE_LIST_TEST_CASE("parity: cos erf erfc log1p expm1", "[parity][torch]", test_backends) {
  SECTION("cos") { check_unary<TestType>("cos", [](auto x) { return cos(x); }); }
  SECTION("erf") { check_unary<TestType>("erf", [](auto x) { return erf(x); }); }
  SECTION("erfc") { check_unary<TestType>("erfc", [](auto x) { return erfc(x); }); }
  SECTION("log1p") { check_unary<TestType>("log1p", [](auto x) { return log1p(x); }); }
  SECTION("expm1") { check_unary<TestType>("expm1", [](auto x) { return expm1(x); }); }
}

TEMPLATE_LIST_TEST_CASE("parity: floor ceil round trunc", "[parity][torch]", test_backends) {
  SECTION("floor") { check_unary<TestType>("floor", [](auto x) { return floor(x); }); }
  SECTION("ceil") { check_unary<TestType>("ceil", [](auto x) { return ceil(x); }); }
  SECTION("round, halves to even") { check_unary<TestType>("round", [](auto x) { return round(x); }); }
  SECTION("trunc") { check_unary<TestType>("trunc", [](auto x) { return trunc(x); }); }
}

TEMPLATE_LIST_TEST_CASE("parity: min and argmin over an axis, with ties", "[parity][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4>);
  torch_oracle::check_case_in<TestType>(torch_oracle::parity_file, "min_argmin", std::tuple{argmin<1>(x)},
                                        sum(min<1>(x) * r) + min(x), x);
}

TEMPLATE_LIST_TEST_CASE("parity: mean var std with keepdim and correction", "[parity][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 1>);
  auto s = input<"s", f32>(shape<6>);
  auto loss = sum(mean<1>(x, keepdim) * r) + sum(var<1>(x, keepdim) * r) + sum(var<0>(x, correction<0>) * s) +
              sum(stddev<0>(x, correction<2>) * s) + stddev(x) + var(x, correction<0>);
  torch_oracle::check_case_in<TestType>(torch_oracle::parity_file, "mean_var_std", std::tuple{}, loss, x);
}

TEMPLATE_LIST_TEST_CASE("parity: concat, stack, squeeze, unsqueeze", "[parity][torch]", test_backends) {
  auto a = input<"a", f32>(shape<3, 2>);
  auto b = input<"b", f32>(shape<3, 4>);
  auto c3 = input<"c", f32>(shape<3, 2>);
  auto r = input<"r", f32>(shape<3, 8>);
  auto s = input<"s", f32>(shape<2, 3, 2>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(concat<1>(a, b, c3))>, Shape<3, 8>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(stack<0>(a, c3))>, Shape<2, 3, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(stack<-1>(a, c3))>, Shape<3, 2, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(unsqueeze<1>(a))>, Shape<3, 1, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(unsqueeze<-1>(a))>, Shape<3, 2, 1>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(squeeze(unsqueeze<0>(unsqueeze<-1>(a))))>, Shape<3, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(squeeze<0>(a))>, Shape<3, 2>>);  // extent 3: unchanged
  auto loss = sum(concat<1>(a, b, c3) * r) + sum(stack<0>(a, c3) * s) + sum(squeeze<1>(unsqueeze<1>(a)) * a);
  torch_oracle::check_case_in<TestType>(torch_oracle::parity_file, "concat_stack", std::tuple{}, loss, a, b, c3);
}

TEMPLATE_LIST_TEST_CASE("parity: cumsum along either axis", "[parity][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 5>);
  auto r = input<"r", f32>(shape<3, 5>);
  auto loss = sum(cumsum<1>(x) * r) + sum(cumsum<0>(x) * r);
  torch_oracle::check_case_in<TestType>(torch_oracle::parity_file, "cumsum", std::tuple{cumsum<-1>(x)}, loss, x);
}
