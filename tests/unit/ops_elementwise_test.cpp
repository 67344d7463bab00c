// Elementwise ops against independently computed references (double-precision loops and
// xtensor): the unary and binary primitives, where and cast, the composite arithmetic
// and activations, comparisons, broadcasting, integer and bool element types, and
// programs with several outputs and fan-out. Every case runs on every backend.
#include <limits>
#include <xtensor/xmath.hpp>

#include "test_support.hpp"

using namespace luminal;
using test::check_exact;

namespace {
constexpr Dim Batch{"Batch"};

/// Compares with the tolerance of element type T.
template <class T, class A, class E>
void check(const A& actual, const E& expected) {
  test::check_close<T>(actual, expected);
}

/// Exact comparison (integers, bools, values that involve no rounding).

/// A random array whose elements are at least `min_magnitude` away from zero, both signs.
template <class T>
xt::xarray<T> away_from_zero(std::vector<std::size_t> shape, unsigned seed, double min_magnitude, double max_magnitude) {
  auto magnitude = test::random_array<T>(shape, seed, min_magnitude, max_magnitude);
  std::size_t i = 0;
  for (auto& v : magnitude) v = (i++ % 3 == 1) ? -v : v;
  return magnitude;
}

double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
}
double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double softplus_ref(double v) { return std::log1p(std::exp(v)); }
}  // namespace

// ---- primitives -------------------------------------------------------------------

namespace {
template <class B, class T>
void unary_primitives() {
  auto x = input<"x", T>(shape<3, 5>);
  auto p = input<"p", T>(shape<3, 5>);
  auto prog = compile<B>(exp2(x), log2(p), sin(x), sqrt(p), recip(x), neg(x), -x);
  auto xv = test::random_array<T>({3, 5}, 11, -6, 6);
  auto pv = test::random_array<T>({3, 5}, 12, 0.01, 10);
  // Exact special points: log2(0) = -inf, log2(1) = 0, sqrt(0) = 0, 1/0 = inf.
  xv(0, 0) = 0;
  xv(0, 1) = 1;
  pv(0, 0) = 0;
  pv(0, 1) = 1;
  pv(0, 2) = 4;
  prog.bind("x", xv);
  prog.bind("p", pv);
  prog.run();
  SECTION("exp2") { check<T>(prog.template output<0>(), test::apply(xv, [](double v) { return std::exp2(v); })); }
  SECTION("log2") { check<T>(prog.template output<1>(), test::apply(pv, [](double v) { return std::log2(v); })); }
  SECTION("sin") { check<T>(prog.template output<2>(), test::apply(xv, [](double v) { return std::sin(v); })); }
  SECTION("sqrt") { check<T>(prog.template output<3>(), test::apply(pv, [](double v) { return std::sqrt(v); })); }
  SECTION("recip") { check<T>(prog.template output<4>(), test::apply(xv, [](double v) { return 1.0 / v; })); }
  SECTION("neg") {
    check_exact(prog.template output<5>(), test::apply(xv, [](double v) { return -v; }));
    check_exact(prog.template output<6>(), test::apply(xv, [](double v) { return -v; }));
  }
}

}  // namespace

TEST_CASE("broadcasts_with says whether two shapes broadcast; a refused call's type names both", "[ops][errors]") {
  constexpr Dim Batch{"Batch"};
  auto a = input<"a", f32>(shape<Batch, 3>);
  auto b = input<"b", f32>(shape<4, 3>);
  auto bias = input<"bias", f32>(shape<3>);
  STATIC_REQUIRE(broadcasts_with<decltype(bias), decltype(a)>);
  STATIC_REQUIRE(broadcasts_with<decltype(1.0_c), decltype(a)>);
  STATIC_REQUIRE_FALSE(broadcasts_with<decltype(b), decltype(a)>);  // Batch is not known to be 4
  // In an unevaluated operand the refusing overload is chosen without an error; its type
  // is the error the compiler prints when the sum is used (tests/compile_fail).
  STATIC_REQUIRE(std::is_same_v<decltype(a + b), error::shapes_cannot_be_broadcast_together<
                                                     fixed_string("(Batch, 3)"), fixed_string("(4, 3)")>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(a + bias)>, Shape<Batch, 3>>);
}

TEMPLATE_LIST_TEST_CASE("unary primitives exp2 log2 sin sqrt recip neg", "[ops][elementwise]", test_backends) {
  SECTION("f32") { unary_primitives<TestType, f32>(); }
  SECTION("f64") { unary_primitives<TestType, f64>(); }
}

namespace {
template <class B, class T>
void binary_primitives() {
  auto a = input<"a", T>(shape<4, 6>);
  auto b = input<"b", T>(shape<4, 6>);
  auto prog = compile<B>(a + b, a * b, mod(a, b), less_than(a, b), max(a, b), a % b);
  auto av = test::random_array<T>({4, 6}, 21, -5, 5);
  auto bv = away_from_zero<T>({4, 6}, 22, 0.3, 2.5);
  // Ties for less_than and max, and a remainder that is exactly zero.
  bv(0, 0) = av(0, 0);
  bv(1, 1) = av(1, 1);
  av(2, 2) = T(3);
  bv(2, 2) = T(1.5);
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.run();
  SECTION("add") { check<T>(prog.template output<0>(), test::apply(av, bv, [](double x, double y) { return x + y; })); }
  SECTION("mul") { check<T>(prog.template output<1>(), test::apply(av, bv, [](double x, double y) { return x * y; })); }
  SECTION("mod has the sign of the dividend") {
    // fmod is exact in any precision, so the remainder of the stored values is exact.
    auto expected = test::apply(av, bv, [](double x, double y) { return std::fmod(x, y); });
    check_exact(prog.template output<2>(), expected);
    check_exact(prog.template output<5>(), expected);
  }
  SECTION("less_than") {
    xt::xarray<bool> out = prog.template output<3>();
    check_exact(out, test::apply(av, bv, [](double x, double y) { return double(x < y); }));
    REQUIRE_FALSE(out(0, 0));  // equal is not less
  }
  SECTION("max") {
    check_exact(prog.template output<4>(), test::apply(av, bv, [](double x, double y) { return std::max(x, y); }));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("binary primitives add mul mod less_than max", "[ops][elementwise]", test_backends) {
  SECTION("f32") { binary_primitives<TestType, f32>(); }
  SECTION("f64") { binary_primitives<TestType, f64>(); }
}

TEMPLATE_LIST_TEST_CASE("max and min propagate NaN, fmod by zero is NaN", "[ops][elementwise]", test_backends) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = input<"a", f32>(shape<4>);
  auto b = input<"b", f32>(shape<4>);
  auto prog = compile<TestType>(max(a, b), min(a, b), mod(a, b));
  xt::xarray<float> av{nan, 1.0f, nan, -2.0f};
  xt::xarray<float> bv{1.0f, nan, nan, 0.0f};
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.run();
  xt::xarray<float> mx = prog.template output<0>();
  xt::xarray<float> mn = prog.template output<1>();
  xt::xarray<float> md = prog.template output<2>();
  for (int i = 0; i < 3; ++i) {
    CHECK(std::isnan(mx(i)));
    CHECK(std::isnan(mn(i)));
  }
  CHECK(mx(3) == 0.0f);
  CHECK(mn(3) == -2.0f);
  CHECK(std::isnan(md(3)));
}

TEMPLATE_LIST_TEST_CASE("i32 arithmetic is exact", "[ops][elementwise][i32]", test_backends) {
  auto a = input<"a", i32>(shape<2, 6>);
  auto b = input<"b", i32>(shape<2, 6>);
  auto prog = compile<TestType>(a + b, a * b, mod(a, b), max(a, b), less_than(a, b), a - b, min(a, b), abs(a), -a,
                                a * c<3> + 2.0_c, square(a), relu(a), clamp<-5.0, 6.0>(a));
  // Remainders with every sign combination, a zero divisor (defined as 0), ties.
  xt::xarray<int> av{{7, -7, 7, -7, 0, 12}, {5, -13, 100, 3, -4, -9}};
  xt::xarray<int> bv{{3, 3, -3, -3, 5, 12}, {0, 4, -7, 3, 1, -2}};
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.run();
  auto ref = [&](auto f) {
    xt::xarray<int> out = xt::xarray<int>::from_shape({2, 6});
    for (std::size_t i = 0; i < out.size(); ++i) out.flat(i) = f(av.flat(i), bv.flat(i));
    return out;
  };
  check_exact(prog.template output<0>(), ref([](int x, int y) { return x + y; }));
  check_exact(prog.template output<1>(), ref([](int x, int y) { return x * y; }));
  xt::xarray<int> remainders = prog.template output<2>();
  check_exact(remainders, ref([](int x, int y) { return y == 0 ? 0 : int(std::fmod(double(x), double(y))); }));
  CHECK(remainders(0, 1) == -1);  // -7 mod 3: sign of the dividend, as C and torch.fmod
  CHECK(remainders(0, 2) == 1);   // 7 mod -3
  check_exact(prog.template output<3>(), ref([](int x, int y) { return std::max(x, y); }));
  check_exact(prog.template output<4>(), ref([](int x, int y) { return int(x < y); }));
  check_exact(prog.template output<5>(), ref([](int x, int y) { return x - y; }));
  check_exact(prog.template output<6>(), ref([](int x, int y) { return std::min(x, y); }));
  check_exact(prog.template output<7>(), ref([](int x, int) { return std::abs(x); }));
  check_exact(prog.template output<8>(), ref([](int x, int) { return -x; }));
  check_exact(prog.template output<9>(), ref([](int x, int) { return 3 * x + 2; }));
  check_exact(prog.template output<10>(), ref([](int x, int) { return x * x; }));
  check_exact(prog.template output<11>(), ref([](int x, int) { return std::max(x, 0); }));
  check_exact(prog.template output<12>(), ref([](int x, int) { return std::clamp(x, -5, 6); }));
  STATIC_REQUIRE(std::is_same_v<value_t<decltype(a * c<3> + 2.0_c)>, i32>);
  STATIC_REQUIRE(std::is_same_v<value_t<decltype(less_than(a, b))>, bool>);

  // x mod -1 is 0 for every x, INT_MIN included (whose C division by -1 overflows and traps).
  auto m = input<"m", i32>(shape<4>);
  auto mprog = compile<TestType>(mod(m, c<-1>), mod(m, c<1>));
  mprog.bind("m", xt::xarray<int>{std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), -5, 7});
  mprog.run();
  check_exact(mprog.template output<0>(), xt::xarray<double>{0, 0, 0, 0});
  check_exact(mprog.template output<1>(), xt::xarray<double>{0, 0, 0, 0});
}

TEMPLATE_LIST_TEST_CASE("where picks elementwise and broadcasts all three operands", "[ops][elementwise][bool]",
                        test_backends) {
  auto cond = input<"cond", boolean>(shape<3, 4>);
  auto col = input<"col", boolean>(shape<3, 1>);
  auto x = input<"x", f32>(shape<3, 4>);
  auto y = input<"y", f32>(shape<3, 4>);
  auto row = input<"row", f32>(shape<4>);
  auto prog = compile<TestType>(where(cond, x, y), where(cond, 1.0_c, x), where(col, row, 0.0_c),
                                where(cond, col, logical_not(cond)), where(less_than(x, y), x, y),
                                where(cond, c<1>, c<-1>));
  xt::xarray<bool> cv{{true, false, true, false}, {false, false, true, true}, {true, true, true, false}};
  xt::xarray<bool> colv = xt::xarray<bool>::from_shape({3, 1});
  colv(0, 0) = true;
  colv(1, 0) = false;
  colv(2, 0) = true;
  auto xv = test::random_array<float>({3, 4}, 31);
  auto yv = test::random_array<float>({3, 4}, 32);
  auto rowv = test::random_array<float>({4}, 33);
  prog.bind("cond", cv);
  prog.bind("col", colv);
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.bind("row", rowv);
  prog.run();
  xt::xarray<double> e0 = xt::zeros<double>({3, 4}), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      e0(i, j) = cv(i, j) ? xv(i, j) : yv(i, j);
      e1(i, j) = cv(i, j) ? 1.0 : xv(i, j);
      e2(i, j) = colv(i, 0) ? rowv(j) : 0.0;
      e3(i, j) = cv(i, j) ? colv(i, 0) : !cv(i, j);
      e4(i, j) = std::min<double>(xv(i, j), yv(i, j));
      e5(i, j) = cv(i, j) ? 1.0 : -1.0;
    }
  check_exact(prog.template output<0>(), e0);
  check_exact(prog.template output<1>(), e1);
  check_exact(prog.template output<2>(), e2);
  xt::xarray<bool> picked_bools = prog.template output<3>();
  check_exact(picked_bools, e3);
  check_exact(prog.template output<4>(), e4);
  xt::xarray<double> literal_branches = prog.template output<5>();  // two literals: f64
  check_exact(literal_branches, e5);
}

TEMPLATE_LIST_TEST_CASE("cast converts element types", "[ops][elementwise][cast]", test_backends) {
  auto x = input<"x", f32>(shape<10>);
  auto flag = input<"flag", boolean>(shape<2, 3>);
  auto n = input<"n", i32>(shape<5>);
  auto d = input<"d", f64>(shape<3>);
  auto prog = compile<TestType>(cast<i32>(x), cast<f32>(flag), cast<f64>(n), cast<boolean>(x), cast<f32>(d),
                                cast<f64>(n) * 0.5_c, cast<i32>(flag) + c<1>);
  xt::xarray<float> xv{-2.7f, -2.5f, -0.5f, 0.0f, 0.5f, 1.9f, 2.5f, 3.999f, -3.999f, 100.4f};
  xt::xarray<bool> fv{{true, false, true}, {false, false, true}};
  xt::xarray<int> nv{-3, 0, 7, 2147483647, -2147483647};
  xt::xarray<double> dv{0.1, -1e30, 3.25};
  prog.bind("x", xv);
  prog.bind("flag", fv);
  prog.bind("n", nv);
  prog.bind("d", dv);
  prog.run();
  SECTION("f32 to i32 truncates toward zero") {
    xt::xarray<int> out = prog.template output<0>();
    check_exact(out, test::apply(xv, [](double v) { return std::trunc(v); }));
  }
  SECTION("bool to f32 is 0 or 1") {
    check_exact(prog.template output<1>(), test::apply(fv, [](double v) { return v != 0 ? 1.0 : 0.0; }));
  }
  SECTION("i32 to f64 is exact") {
    xt::xarray<double> out = prog.template output<2>();
    check_exact(out, test::to_double(nv));
    check_exact(prog.template output<5>(), test::apply(nv, [](double v) { return v * 0.5; }));
  }
  SECTION("f32 to bool is x != 0") {
    xt::xarray<bool> out = prog.template output<3>();
    check_exact(out, test::apply(xv, [](double v) { return double(v != 0); }));
  }
  SECTION("f64 to f32 rounds") {
    xt::xarray<float> out = prog.template output<4>();
    check_exact(out, test::apply(dv, [](double v) { return double(float(v)); }));
  }
  SECTION("bool to i32") {
    xt::xarray<int> out = prog.template output<6>();
    REQUIRE(out.shape()[0] == 2);
    check_exact(out, test::apply(fv, [](double v) { return v + 1; }));
  }
  STATIC_REQUIRE(std::is_same_v<decltype(cast<f32>(x)), decltype(x)>);
}

// IEEE 754 and torch.le / torch.ge: every ordered comparison with NaN is false.
TEMPLATE_LIST_TEST_CASE("less_equal and greater_equal are false for NaN operands", "[ops][nan]", test_backends) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = input<"a", f32>(shape<3>);
  auto b = input<"b", f32>(shape<3>);
  auto prog = compile<TestType>(less_equal(a, b), greater_equal(a, b), greater_than(a, b), less_than(a, b));
  prog.bind("a", xt::xarray<float>{nan, 1.0f, nan});
  prog.bind("b", xt::xarray<float>{1.0f, nan, nan});
  prog.run();
  xt::xarray<double> all_false{0, 0, 0};
  check_exact(prog.template output<2>(), all_false);
  check_exact(prog.template output<3>(), all_false);
  check_exact(prog.template output<0>(), all_false);
  check_exact(prog.template output<1>(), all_false);
}

// ---- composites -------------------------------------------------------------------

namespace {
template <class B, class T>
void composite_arithmetic() {
  auto x = input<"x", T>(shape<3, 7>);
  auto y = input<"y", T>(shape<3, 7>);
  auto p = input<"p", T>(shape<3, 7>);
  auto prog = compile<B>(x - y, x / y, exp(x), log(p), pow(p, y), square(x), abs(x), min(x, y), clamp<-1.0, 0.5>(x),
                         x / 4.0_c, 2.0_c / y, 1.0_c - x, pow(p, c<3>));
  auto xv = test::random_array<T>({3, 7}, 41, -8, 8);
  auto yv = away_from_zero<T>({3, 7}, 42, 0.25, 3);
  auto pv = test::random_array<T>({3, 7}, 43, 0.05, 6);
  xv(0, 0) = T(-1);  // clamp bounds are inclusive
  xv(0, 1) = T(0.5);
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.bind("p", pv);
  prog.run();
  auto xy = [&](auto f) { return test::apply(xv, yv, f); };
  SECTION("sub") { check<T>(prog.template output<0>(), xy([](double a, double b) { return a - b; })); }
  SECTION("div") {
    check<T>(prog.template output<1>(), xy([](double a, double b) { return a / b; }));
    check<T>(prog.template output<9>(), test::apply(xv, [](double a) { return a / 4; }));
    check<T>(prog.template output<10>(), test::apply(yv, [](double b) { return 2 / b; }));
  }
  SECTION("exp") { check<T>(prog.template output<2>(), test::apply(xv, [](double a) { return std::exp(a); })); }
  SECTION("log") { check<T>(prog.template output<3>(), test::apply(pv, [](double a) { return std::log(a); })); }
  SECTION("pow") {
    check<T>(prog.template output<4>(), test::apply(pv, yv, [](double a, double b) { return std::pow(a, b); }));
    check<T>(prog.template output<12>(), test::apply(pv, [](double a) { return a * a * a; }));
  }
  SECTION("square") { check<T>(prog.template output<5>(), test::apply(xv, [](double a) { return a * a; })); }
  SECTION("abs") { check_exact(prog.template output<6>(), test::apply(xv, [](double a) { return std::abs(a); })); }
  SECTION("min") { check_exact(prog.template output<7>(), xy([](double a, double b) { return std::min(a, b); })); }
  SECTION("clamp") {
    check_exact(prog.template output<8>(), test::apply(xv, [](double a) { return std::clamp(a, -1.0, 0.5); }));
  }
  SECTION("literal minus tensor") {
    check<T>(prog.template output<11>(), test::apply(xv, [](double a) { return 1 - a; }));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("composite arithmetic sub div exp log pow square abs min clamp", "[ops][composite]",
                        test_backends) {
  SECTION("f32") { composite_arithmetic<TestType, f32>(); }
  SECTION("f64") { composite_arithmetic<TestType, f64>(); }
}

namespace {
template <class B, class T>
void activations(const xt::xarray<T>& xv) {
  auto x = input<"x", T>(shape<Batch>);
  auto prog = compile<B>(relu(x), leaky_relu(x), leaky_relu<0.2>(x), gelu(x, approximate::tanh), sigmoid(x), tanh(x), softplus(x));
  prog.bind("x", xv);
  prog.run();
  auto ref = [&](auto f) { return test::apply(xv, f); };
  SECTION("relu") { check_exact(prog.template output<0>(), ref([](double v) { return std::max(v, 0.0); })); }
  SECTION("leaky_relu") {
    check<T>(prog.template output<1>(), ref([](double v) { return v >= 0 ? v : 0.01 * v; }));
    check<T>(prog.template output<2>(), ref([](double v) { return v >= 0 ? v : 0.2 * v; }));
  }
  SECTION("gelu (tanh form)") { check<T>(prog.template output<3>(), ref(gelu_tanh)); }
  SECTION("sigmoid") { check<T>(prog.template output<4>(), ref(sigmoid_ref)); }
  SECTION("tanh") { check<T>(prog.template output<5>(), ref([](double v) { return std::tanh(v); })); }
  SECTION("softplus") { check<T>(prog.template output<6>(), ref(softplus_ref)); }
  SECTION("every output is finite") {
    auto all_finite = [](const auto& a) {
      for (auto v : a)
        if (!std::isfinite(double(v))) return false;
      return true;
    };
    CHECK(all_finite(prog.template output<3>()));
    CHECK(all_finite(prog.template output<4>()));
    CHECK(all_finite(prog.template output<5>()));
    CHECK(all_finite(prog.template output<6>()));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("activations relu leaky_relu gelu sigmoid tanh softplus", "[ops][composite]", test_backends) {
  SECTION("f32, moderate inputs") { activations<TestType, f32>(test::random_array<f32>({40}, 51, -6, 6)); }
  SECTION("f64, moderate inputs") { activations<TestType, f64>(test::random_array<f64>({40}, 52, -6, 6)); }
  SECTION("f32, large inputs stay finite and saturate") {
    activations<TestType, f32>(xt::xarray<f32>{-100, -50, -20, -1e-3f, 0, 1e-3f, 20, 50, 100});
  }
  SECTION("f64, large inputs stay finite and saturate") {
    activations<TestType, f64>(xt::xarray<f64>{-100, -50, -20, -1e-3, 0, 1e-3, 20, 50, 100});
  }
}

TEMPLATE_LIST_TEST_CASE("comparisons greater_than less_equal greater_equal logical_not", "[ops][composite]",
                        test_backends) {
  auto a = input<"a", f32>(shape<2, 5>);
  auto b = input<"b", f32>(shape<2, 5>);
  auto flags = input<"flags", boolean>(shape<4>);
  auto k = input<"k", i32>(shape<5>);
  auto prog = compile<TestType>(greater_than(a, b), less_equal(a, b), greater_equal(a, b), logical_not(flags),
                                less_than(a, 0.0_c), greater_equal(k, c<2>), less_equal(b, a));
  xt::xarray<float> av{{1, 2, 3, -1, 0.5f}, {-2, 7, 7, 0, -0.25f}};
  xt::xarray<float> bv{{1, 3, 2, -1, 0.25f}, {-1, 7, 8, -0.0f, -0.5f}};  // ties at (0,0) (0,3) (1,1) (1,3)
  xt::xarray<bool> fv{true, false, false, true};
  xt::xarray<int> kv{-3, 1, 2, 3, 2};
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.bind("flags", fv);
  prog.bind("k", kv);
  prog.run();
  auto ab = [&](auto f) { return test::apply(av, bv, [f](double x, double y) { return double(f(x, y)); }); };
  check_exact(prog.template output<0>(), ab([](double x, double y) { return x > y; }));
  check_exact(prog.template output<1>(), ab([](double x, double y) { return x <= y; }));
  check_exact(prog.template output<2>(), ab([](double x, double y) { return x >= y; }));
  check_exact(prog.template output<3>(), test::apply(fv, [](double v) { return double(v == 0); }));
  check_exact(prog.template output<4>(), test::apply(av, [](double v) { return double(v < 0); }));
  check_exact(prog.template output<5>(), test::apply(kv, [](double v) { return double(v >= 2); }));
  check_exact(prog.template output<6>(), ab([](double x, double y) { return y <= x; }));
}

// ---- broadcasting -----------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("binary ops broadcast as NumPy does", "[ops][broadcast]", test_backends) {
  auto a = input<"a", f32>(shape<Batch, 1, 3>);
  auto b = input<"b", f32>(shape<4, 3>);
  auto row = input<"row", f32>(shape<3>);
  auto row2 = input<"row2", f32>(shape<1, 3>);
  auto col = input<"col", f32>(shape<4, 1>);
  auto s = input<"s", f32>(shape<>);
  auto prog = compile<TestType>(a + b, b * row, b - row2, col * b, col + row2, b * 2.0_c + c<1>, max(b, s), a * col,
                                row / col);
  auto bv = test::random_array<float>({4, 3}, 62);
  auto rowv = test::random_array<float>({3}, 63);
  auto row2v = test::random_array<float>({1, 3}, 64);
  auto colv = away_from_zero<float>({4, 1}, 65, 0.5, 2);
  xt::xarray<float> sv = 0.1f;
  prog.bind("b", bv);
  prog.bind("row", rowv);
  prog.bind("row2", row2v);
  prog.bind("col", colv);
  prog.bind("s", sv);
  auto b_ = test::to_double(bv), row_ = test::to_double(rowv), row2_ = test::to_double(row2v),
       col_ = test::to_double(colv);
  for (std::size_t batch : {2u, 5u}) {
    auto av = test::random_array<float>({batch, 1, 3}, 61 + unsigned(batch));
    auto a_ = test::to_double(av);
    prog.bind("a", av);
    prog.run();
    REQUIRE(prog.template output_shape<0>() == std::vector<index_t>{index_t(batch), 4, 3});
    check<f32>(prog.template output<0>(), xt::xarray<double>(a_ + b_));
    check<f32>(prog.template output<1>(), xt::xarray<double>(b_ * row_));
    check<f32>(prog.template output<2>(), xt::xarray<double>(b_ - row2_));
    check<f32>(prog.template output<3>(), xt::xarray<double>(col_ * b_));
    check<f32>(prog.template output<4>(), xt::xarray<double>(col_ + row2_));
    check<f32>(prog.template output<5>(), xt::xarray<double>(b_ * 2.0 + 1.0));
    check<f32>(prog.template output<6>(), xt::xarray<double>(xt::maximum(b_, 0.1f)));
    check<f32>(prog.template output<7>(), xt::xarray<double>(a_ * col_));
    check<f32>(prog.template output<8>(), xt::xarray<double>(row_ / col_));
  }
}

TEMPLATE_LIST_TEST_CASE("literals adopt the element type of the other operand", "[ops][broadcast]", test_backends) {
  auto xd = input<"xd", f64>(shape<3>);
  auto xi = input<"xi", i32>(shape<3>);
  auto prog = compile<TestType>(xd * 0.1_c + c<1.0 / 3.0>, xi * c<2> - 1.0_c, c<10> - xi, 0.5_c * xd);
  STATIC_REQUIRE(std::is_same_v<value_t<decltype(xd * 0.1_c)>, f64>);
  STATIC_REQUIRE(std::is_same_v<value_t<decltype(xi * 2.0_c)>, i32>);
  xt::xarray<double> dv{1.5, -2.0, 1e10};
  xt::xarray<int> iv{4, -5, 0};
  prog.bind("xd", dv);
  prog.bind("xi", iv);
  prog.run();
  // A literal in f64 is the double value itself: no rounding through f32.
  check<f64>(prog.template output<0>(), test::apply(dv, [](double v) { return v * 0.1 + 1.0 / 3.0; }));
  check_exact(prog.template output<1>(), test::apply(iv, [](double v) { return 2 * v - 1; }));
  check_exact(prog.template output<2>(), test::apply(iv, [](double v) { return 10 - v; }));
  check<f64>(prog.template output<3>(), test::apply(dv, [](double v) { return 0.5 * v; }));
}

// ---- several outputs and fan-out --------------------------------------------------

TEMPLATE_LIST_TEST_CASE("outputs sharing subexpressions and fan-out values", "[ops][program]", test_backends) {
  auto x = input<"x", f32>(shape<Batch, 4>);
  auto y = input<"y", f32>(shape<Batch, 4>);
  SECTION("two outputs share a subexpression that is itself an output") {
    auto h = exp(x) * y;
    auto prog = compile<TestType>(h + 1.0_c, sum<1>(h), h, sin(h));
    for (std::size_t batch : {3u, 6u}) {
      auto xv = test::random_array<float>({batch, 4}, 71);
      auto yv = test::random_array<float>({batch, 4}, 72);
      prog.bind("x", xv);
      prog.bind("y", yv);
      prog.run();
      auto hv = test::apply(xv, yv, [](double a, double b) { return std::exp(a) * b; });
      check<f32>(prog.template output<0>(), test::apply(hv, [](double v) { return v + 1; }));
      check<f32>(prog.template output<1>(), xt::xarray<double>(xt::sum(hv, {1})));
      check<f32>(prog.template output<2>(), hv);
      check<f32>(prog.template output<3>(), test::apply(hv, [](double v) { return std::sin(v); }));
    }
  }
  SECTION("the same value used several times (cheap and expensive fan-out)") {
    auto s = sigmoid(x);
    auto cheap = s * s + s;
    auto t = tanh(exp(x) * c<0.5> + sin(y) * sqrt(abs(y)));  // costly enough to be stored
    auto costly = t * t - t / (t + 2.0_c) + t;
    auto twice = exp(x * y) + exp(x * y);  // built twice: the same node
    auto prog = compile<TestType>(cheap, costly, twice, cheap);
    auto xv = test::random_array<float>({5, 4}, 73, -2, 2);
    auto yv = test::random_array<float>({5, 4}, 74, -2, 2);
    prog.bind("x", xv);
    prog.bind("y", yv);
    prog.run();
    auto sv = test::apply(xv, sigmoid_ref);
    auto tv = test::apply(xv, yv, [](double a, double b) {
      return std::tanh(std::exp(a) * 0.5 + std::sin(b) * std::sqrt(std::abs(b)));
    });
    auto cheap_ref = test::apply(sv, [](double v) { return v * v + v; });
    check<f32>(prog.template output<0>(), cheap_ref);
    check<f32>(prog.template output<1>(), test::apply(tv, [](double v) { return v * v - v / (v + 2) + v; }));
    check<f32>(prog.template output<2>(), test::apply(xv, yv, [](double a, double b) { return 2 * std::exp(a * b); }));
    check<f32>(prog.template output<3>(), cheap_ref);
  }
}
