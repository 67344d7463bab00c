// Reductions against independently computed references (double-precision loops and
// xtensor reducers): sum and max over each axis, several axes and all axes (f32, f64,
// exact i32, NaN), mean and variance. Every case runs on every backend. Softmax,
// logsumexp, argmax and symbolic extents are in ops_reduce_composite_test.cpp, matmul in
// ops_matmul_test.cpp.
#include <limits>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "test_support.hpp"

using namespace luminal;
using test::check_exact;
using test::reshaped;

namespace {
template <class T, class A, class E>
void check(const A& actual, const E& expected) {
  test::check_close<T>(actual, expected);
}
}  // namespace

// ---- sum and max ------------------------------------------------------------------

namespace {
template <class B, class T>
void sum_and_max() {
  auto x = input<"x", T>(shape<3, 4, 5>);
  auto prog = compile<B>(sum<0>(x), sum<1>(x), sum<2>(x), sum<-1>(x, keepdim), sum<0, 2>(x), sum(x), sum(x, keepdim),
                         max<0>(x), max<1>(x), max<-1>(x), max<1>(x, keepdim), max<0, 1>(x), max(x), sum<2, 0>(x, keepdim));
  // All negative, so a max that started from 0 instead of -inf would show.
  auto xv = test::random_array<T>({3, 4, 5}, 101, -9, -1);
  prog.bind("x", xv);
  prog.run();
  auto xd = test::to_double(xv);
  SECTION("sum over each axis") {
    check<T>(prog.template output<0>(), xt::xarray<double>(xt::sum(xd, {0})));
    check<T>(prog.template output<1>(), xt::xarray<double>(xt::sum(xd, {1})));
    check<T>(prog.template output<2>(), xt::xarray<double>(xt::sum(xd, {2})));
  }
  SECTION("sum with keepdim") {
    check<T>(prog.template output<3>(), reshaped(xt::sum(xd, {2}), {3, 4, 1}));
    check<T>(prog.template output<13>(), reshaped(xt::sum(xd, {0, 2}), {1, 4, 1}));
  }
  SECTION("sum over several and all axes") {
    check<T>(prog.template output<4>(), xt::xarray<double>(xt::sum(xd, {0, 2})));
    xt::xarray<T> total = prog.template output<5>();
    REQUIRE(total.dimension() == 0);
    check<T>(total, xt::xarray<double>(xt::sum(xd)));
    check<T>(prog.template output<6>(), reshaped(xt::sum(xd), {1, 1, 1}));
  }
  SECTION("max over each axis") {
    check_exact(prog.template output<7>(), xt::xarray<double>(xt::amax(xd, {0})));
    check_exact(prog.template output<8>(), xt::xarray<double>(xt::amax(xd, {1})));
    check_exact(prog.template output<9>(), xt::xarray<double>(xt::amax(xd, {2})));
  }
  SECTION("max with keepdim, over several and all axes") {
    check_exact(prog.template output<10>(), reshaped(xt::amax(xd, {1}), {3, 1, 5}));
    check_exact(prog.template output<11>(), xt::xarray<double>(xt::amax(xd, {0, 1})));
    check_exact(prog.template output<12>(), xt::xarray<double>(xt::amax(xd)));
  }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("sum and max over each axis, several axes and all axes", "[ops][reduce]", test_backends) {
  SECTION("f32") { sum_and_max<TestType, f32>(); }
  SECTION("f64") { sum_and_max<TestType, f64>(); }
}

TEMPLATE_LIST_TEST_CASE("i32 sum and max reductions are exact", "[ops][reduce][i32]", test_backends) {
  auto x = input<"x", i32>(shape<3, 4>);
  auto prog = compile<TestType>(sum<0>(x), sum<1>(x), sum(x), max<0>(x), max<1>(x, keepdim), max(x));
  auto xv = test::random_ints<int>({3, 4}, 111, -1000, -1);  // all negative: max must not start at 0
  xv(1, 2) = -1000;
  prog.bind("x", xv);
  prog.run();
  auto xd = test::to_double(xv);
  check_exact(prog.template output<0>(), xt::xarray<double>(xt::sum(xd, {0})));
  check_exact(prog.template output<1>(), xt::xarray<double>(xt::sum(xd, {1})));
  check_exact(prog.template output<2>(), xt::xarray<double>(xt::sum(xd)));
  check_exact(prog.template output<3>(), xt::xarray<double>(xt::amax(xd, {0})));
  check_exact(prog.template output<4>(), reshaped(xt::amax(xd, {1}), {3, 1}));
  check_exact(prog.template output<5>(), xt::xarray<double>(xt::amax(xd)));
}

TEMPLATE_LIST_TEST_CASE("max reductions propagate NaN", "[ops][reduce]", test_backends) {
  auto x = input<"x", f32>(shape<2, 3>);
  auto prog = compile<TestType>(max<1>(x), max<0>(x));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  xt::xarray<float> xv{{1, nan, 3}, {4, 5, 6}};
  prog.bind("x", xv);
  prog.run();
  xt::xarray<float> rows = prog.template output<0>(), cols = prog.template output<1>();
  CHECK(std::isnan(rows(0)));
  CHECK(rows(1) == 6.0f);
  CHECK(cols(0) == 4.0f);
  CHECK(std::isnan(cols(1)));
  CHECK(cols(2) == 6.0f);
}

// ---- mean and variance ------------------------------------------------------------

namespace {
template <class B, class T>
void mean_and_variance() {
  auto x = input<"x", T>(shape<2, 3, 4>);
  auto prog = compile<B>(mean<1>(x), mean<0, 2>(x), mean(x), mean<-1>(x, keepdim), variance<2>(x), variance<0, 1>(x),
                         variance(x), variance<1>(x, keepdim));
  auto xv = test::random_array<T>({2, 3, 4}, 121, -3, 5);
  prog.bind("x", xv);
  prog.run();
  auto xd = test::to_double(xv);
  auto var = [&](std::vector<std::size_t> axes) {
    xt::xarray<double> m = xt::mean(xd, axes, xt::keep_dims);
    xt::xarray<double> squares = (xd - m) * (xd - m);
    return xt::xarray<double>(xt::mean(squares, axes));
  };
  check<T>(prog.template output<0>(), xt::xarray<double>(xt::mean(xd, {1})));
  check<T>(prog.template output<1>(), xt::xarray<double>(xt::mean(xd, {0, 2})));
  check<T>(prog.template output<2>(), xt::xarray<double>(xt::mean(xd)));
  check<T>(prog.template output<3>(), reshaped(xt::mean(xd, {2}), {2, 3, 1}));
  check<T>(prog.template output<4>(), var({2}));
  check<T>(prog.template output<5>(), var({0, 1}));
  check<T>(prog.template output<6>(), var({0, 1, 2}));
  check<T>(prog.template output<7>(), reshaped(var({1}), {2, 1, 4}));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("mean and variance over one and several axes", "[ops][reduce]", test_backends) {
  SECTION("f32") { mean_and_variance<TestType, f32>(); }
  SECTION("f64") { mean_and_variance<TestType, f64>(); }
}
