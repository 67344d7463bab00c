// Reductions and matmul against independently computed references (double-precision
// loops and xtensor reducers): sum and max over each axis, several axes and all axes,
// mean and variance, softmax, log_softmax and logsumexp (also at extreme inputs), argmax
// with ties, symbolic extents rebound between runs, and matmul with batch broadcasting
// and transposed operands. Every case runs on every backend.
#include <limits>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

template <class T>
constexpr double rtol_of = std::is_same_v<T, f32> ? 1e-5 : 1e-12;
template <class T>
constexpr double atol_of = std::is_same_v<T, f32> ? 1e-6 : 1e-12;

template <class T, class A, class E>
void check(const A& actual, const E& expected) {
  test::require_close(actual, expected, rtol_of<T>, atol_of<T>);
}
template <class A, class E>
void check_exact(const A& actual, const E& expected) {
  test::require_close(actual, expected, 0, 0);
}

/// xs with the extents in `shape` (same elements, row-major).
xt::xarray<double> reshaped(xt::xarray<double> xs, std::vector<std::size_t> shape) {
  xs.reshape(shape);
  return xs;
}

/// Numerically careful references along one axis of a rank-2 or rank-3 array, in double.
enum class along { softmax, log_softmax, logsumexp };
xt::xarray<double> reference_along(const xt::xarray<double>& x, std::size_t axis, along what) {
  // Move `axis` last, work row by row, move it back.
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < x.dimension(); ++k)
    if (k != axis) order.push_back(k);
  order.push_back(axis);
  xt::xarray<double> moved = xt::transpose(x, order);
  std::size_t n = moved.shape().back(), rows = moved.size() / n;
  xt::xarray<double> out = moved;
  for (std::size_t r = 0; r < rows; ++r) {
    double* row = moved.data() + r * n;
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) m = std::max(m, row[j]);
    double s = 0;
    for (std::size_t j = 0; j < n; ++j) s += std::exp(row[j] - m);
    for (std::size_t j = 0; j < n; ++j) {
      double v = what == along::softmax ? std::exp(row[j] - m) / s : row[j] - m - std::log(s);
      out.data()[r * n + j] = what == along::logsumexp ? m + std::log(s) : v;
    }
  }
  std::vector<std::size_t> inverse(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) inverse[order[k]] = k;
  xt::xarray<double> back = xt::transpose(out, inverse);
  if (what != along::logsumexp) return back;
  return xt::xarray<double>(xt::amax(back, {axis}));  // constant along the axis
}

/// Batched matrix product [..., M, K] x [..., K, N] with NumPy batch broadcasting.
xt::xarray<double> matmul_ref(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  std::size_t ra = a.dimension(), rb = b.dimension(), r = std::max(ra, rb);
  std::size_t m = a.shape()[ra - 2], k = a.shape()[ra - 1], n = b.shape()[rb - 1];
  REQUIRE(b.shape()[rb - 2] == k);
  // Batch extents, aligned from the right; 1 where an operand has fewer axes.
  std::vector<std::size_t> ba(r - 2, 1), bb(r - 2, 1), batch(r - 2, 1);
  for (std::size_t i = 0; i + 2 < ra; ++i) ba[i + (r - ra)] = a.shape()[i];
  for (std::size_t i = 0; i + 2 < rb; ++i) bb[i + (r - rb)] = b.shape()[i];
  for (std::size_t i = 0; i + 2 < r; ++i) {
    REQUIRE((ba[i] == bb[i] || ba[i] == 1 || bb[i] == 1));
    batch[i] = std::max(ba[i], bb[i]);
  }
  std::vector<std::size_t> shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  xt::xarray<double> out = xt::zeros<double>(shape);
  std::size_t batches = out.size() / (m * n);
  for (std::size_t flat = 0; flat < batches; ++flat) {
    std::size_t rest = flat, offset_a = 0, offset_b = 0, stride_a = 1, stride_b = 1;
    for (std::size_t i = r - 2; i-- > 0;) {
      std::size_t coord = rest % batch[i];
      rest /= batch[i];
      offset_a += (ba[i] == 1 ? 0 : coord) * stride_a;
      offset_b += (bb[i] == 1 ? 0 : coord) * stride_b;
      stride_a *= ba[i];
      stride_b *= bb[i];
    }
    const double* pa = a.data() + offset_a * m * k;
    const double* pb = b.data() + offset_b * k * n;
    double* po = out.data() + flat * m * n;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::size_t p = 0; p < k; ++p) acc += pa[i * k + p] * pb[p * n + j];
        po[i * n + j] = acc;
      }
  }
  return out;
}

xt::xarray<double> transposed(const xt::xarray<double>& x) {
  std::vector<std::size_t> order(x.dimension());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::swap(order[order.size() - 2], order[order.size() - 1]);
  return xt::transpose(x, order);
}

/// Index of the first maximum along `axis` (ties: the smallest index), as torch.argmax.
xt::xarray<double> first_argmax(const xt::xarray<double>& x, std::size_t axis) {
  std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  std::size_t n = shape[axis], outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= shape[k];
  for (std::size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  shape.erase(shape.begin() + std::ptrdiff_t(axis));
  xt::xarray<double> out = xt::xarray<double>::from_shape(shape);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      auto at = [&](std::size_t j) { return x.data()[(o * n + j) * inner + i]; };
      std::size_t best = 0;
      for (std::size_t j = 1; j < n; ++j)
        if (at(j) > at(best)) best = j;
      out.data()[o * inner + i] = double(best);
    }
  return out;
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

TEMPLATE_LIST_TEST_CASE("reductions over a symbolic axis use the extent bound at run time", "[ops][reduce][symbolic]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = input<"w", f32>(shape<Batch, 1>);
  auto prog = compile<TestType>(mean<0>(x), sum<0>(x * w), variance<0>(x), mean(x), softmax<0>(x), max<0>(x),
                                argmax<0>(x), mean<1>(x));
  // Bind, run, check; rebind bigger; then smaller again: every extent comes from the data.
  for (std::size_t batch : {2u, 7u, 1u}) {
    INFO("Batch = " << batch);
    auto xv = test::random_array<float>({batch, 3}, 130 + unsigned(batch), -4, 4);
    auto wv = test::random_array<float>({batch, 1}, 140 + unsigned(batch));
    prog.bind("x", xv);
    prog.bind("w", wv);
    prog.run();
    auto xd = test::to_double(xv), wd = test::to_double(wv);
    xt::xarray<double> m = xt::mean(xd, {0}, xt::keep_dims);
    check<f32>(prog.template output<0>(), xt::xarray<double>(xt::mean(xd, {0})));
    check<f32>(prog.template output<1>(), xt::xarray<double>(xt::sum(xd * wd, {0})));
    xt::xarray<double> squares = (xd - m) * (xd - m);
    check<f32>(prog.template output<2>(), xt::xarray<double>(xt::mean(squares, {0})));
    check<f32>(prog.template output<3>(), xt::xarray<double>(xt::mean(xd)));
    check<f32>(prog.template output<4>(), reference_along(xd, 0, along::softmax));
    check_exact(prog.template output<5>(), xt::xarray<double>(xt::amax(xd, {0})));
    check_exact(prog.template output<6>(), first_argmax(xd, 0));
    check<f32>(prog.template output<7>(), xt::xarray<double>(xt::mean(xd, {1})));
    REQUIRE(prog.template output_shape<4>() == std::vector<index_t>{index_t(batch), 3});
  }
}

// ---- softmax, log_softmax, logsumexp ----------------------------------------------

namespace {
template <class B, class T>
void softmax_family(const xt::xarray<T>& xv) {
  auto x = input<"x", T>(shape<3, 5>);
  auto y = input<"y", T>(shape<2, 3, 4>);
  auto prog = compile<B>(softmax<-1>(x), softmax<0>(x), log_softmax<1>(x), log_softmax<0>(x), logsumexp<1>(x),
                         logsumexp<0>(x, keepdim), softmax<1>(y), log_softmax<1>(y), logsumexp<-1>(y));
  // y: the same values, reshaped and extended deterministically.
  xt::xarray<T> yv = xt::xarray<T>::from_shape({2, 3, 4});
  for (std::size_t i = 0; i < yv.size(); ++i) yv.flat(i) = xv.flat(i % xv.size()) * T(i % 2 ? 1 : -1);
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.run();
  auto xd = test::to_double(xv), yd = test::to_double(yv);
  SECTION("softmax") {
    auto s1 = reference_along(xd, 1, along::softmax);
    check<T>(prog.template output<0>(), s1);
    check<T>(prog.template output<1>(), reference_along(xd, 0, along::softmax));
    check<T>(prog.template output<6>(), reference_along(yd, 1, along::softmax));
    // Rows sum to one.
    check<T>(xt::xarray<double>(xt::sum(test::to_double(prog.template output<0>()), {1})),
             xt::xarray<double>(xt::ones<double>({3})));
  }
  SECTION("log_softmax") {
    check<T>(prog.template output<2>(), reference_along(xd, 1, along::log_softmax));
    check<T>(prog.template output<3>(), reference_along(xd, 0, along::log_softmax));
    check<T>(prog.template output<7>(), reference_along(yd, 1, along::log_softmax));
  }
  SECTION("logsumexp") {
    check<T>(prog.template output<4>(), reference_along(xd, 1, along::logsumexp));
    check<T>(prog.template output<5>(), reshaped(reference_along(xd, 0, along::logsumexp), {1, 5}));
    check<T>(prog.template output<8>(), reference_along(yd, 2, along::logsumexp));
  }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("softmax log_softmax logsumexp over an axis", "[ops][reduce][composite]", test_backends) {
  SECTION("f32") { softmax_family<TestType, f32>(test::random_array<f32>({3, 5}, 151, -3, 3)); }
  SECTION("f64") { softmax_family<TestType, f64>(test::random_array<f64>({3, 5}, 152, -3, 3)); }
  // exp(100) overflows f32 and exp(-100) underflows it: the max shift must keep these finite.
  xt::xarray<f32> large{{100, -100, 99, 0, 100}, {-100, -100, -100, -100, -99}, {80, -80, 100, 50, -50}};
  SECTION("f32, inputs of +-100") { softmax_family<TestType, f32>(large); }
  SECTION("f64, inputs of +-100") { softmax_family<TestType, f64>(xt::xarray<f64>(large * 7.0f)); }
}

// ---- argmax -----------------------------------------------------------------------

namespace {
template <class B, class T>
void argmax_ties() {
  auto x = input<"x", T>(shape<4, 5>);
  auto z = input<"z", T>(shape<2, 3, 4>);
  auto prog = compile<B>(argmax<1>(x), argmax<0>(x), argmax<-1>(x, keepdim), argmax<1>(z));
  // Ties everywhere: the first index of the maximum wins, as torch.argmax.
  xt::xarray<T> xv{{1, 3, 3, 0, 2}, {5, 5, 5, 5, 5}, {-1, -2, -1, -3, -7}, {0, 0, 9, 2, 9}};
  auto zv = test::random_ints<T>({2, 3, 4}, 161, -2, 2);  // small range: many ties
  prog.bind("x", xv);
  prog.bind("z", zv);
  prog.run();
  auto xd = test::to_double(xv);
  xt::xarray<int> rows = prog.template output<0>();
  check_exact(rows, first_argmax(xd, 1));
  check_exact(rows, xt::xarray<int>{1, 0, 0, 2});
  check_exact(prog.template output<1>(), first_argmax(xd, 0));
  check_exact(prog.template output<2>(), reshaped(first_argmax(xd, 1), {4, 1}));
  check_exact(prog.template output<3>(), first_argmax(test::to_double(zv), 1));
  STATIC_REQUIRE(std::is_same_v<value_t<decltype(argmax<1>(x))>, i32>);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("argmax returns the first index of the maximum", "[ops][reduce][composite]", test_backends) {
  SECTION("f32") { argmax_ties<TestType, f32>(); }
  SECTION("i32") { argmax_ties<TestType, i32>(); }
}

// ---- matmul -----------------------------------------------------------------------

namespace {
template <class B, class T>
void matmul_shapes() {
  auto a = input<"a", T>(shape<3, 7>);
  auto b = input<"b", T>(shape<7, 5>);
  auto a3 = input<"a3", T>(shape<2, 3, 7>);
  auto b3 = input<"b3", T>(shape<2, 7, 5>);
  auto a4 = input<"a4", T>(shape<2, 3, 4, 7>);
  auto a4b = input<"a4b", T>(shape<2, 1, 4, 7>);
  auto b3c = input<"b3c", T>(shape<3, 7, 6>);
  auto prog = compile<B>(matmul(a, b), matmul(a3, b3), matmul(a4, b), matmul(a4b, b3c), matmul(a, b3),
                         matmul(a3, b));
  auto av = test::random_array<T>({3, 7}, 171);
  auto bv = test::random_array<T>({7, 5}, 172);
  auto a3v = test::random_array<T>({2, 3, 7}, 173);
  auto b3v = test::random_array<T>({2, 7, 5}, 174);
  auto a4v = test::random_array<T>({2, 3, 4, 7}, 175);
  auto a4bv = test::random_array<T>({2, 1, 4, 7}, 176);
  auto b3cv = test::random_array<T>({3, 7, 6}, 177);
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.bind("a3", a3v);
  prog.bind("b3", b3v);
  prog.bind("a4", a4v);
  prog.bind("a4b", a4bv);
  prog.bind("b3c", b3cv);
  prog.run();
  auto d = [](const auto& v) { return test::to_double(v); };
  SECTION("2-D") { check<T>(prog.template output<0>(), matmul_ref(d(av), d(bv))); }
  SECTION("batched 3-D") { check<T>(prog.template output<1>(), matmul_ref(d(a3v), d(b3v))); }
  SECTION("[2,3,4,7] x [7,5]: a matrix broadcast over two batch axes") {
    auto out = prog.template output<2>();
    REQUIRE(out.shape() == std::vector<std::size_t>{2, 3, 4, 5});
    check<T>(out, matmul_ref(d(a4v), d(bv)));
  }
  SECTION("[2,1,4,7] x [3,7,6]: both operands broadcast") {
    auto out = prog.template output<3>();
    REQUIRE(out.shape() == std::vector<std::size_t>{2, 3, 4, 6});
    check<T>(out, matmul_ref(d(a4bv), d(b3cv)));
  }
  SECTION("a matrix times a batch and a batch times a matrix") {
    check<T>(prog.template output<4>(), matmul_ref(d(av), d(b3v)));
    check<T>(prog.template output<5>(), matmul_ref(d(a3v), d(bv)));
  }
}

template <class B, class T>
void matmul_operands() {
  auto at = input<"at", T>(shape<7, 3>);   // used as its transpose [3, 7]
  auto b = input<"b", T>(shape<7, 5>);
  auto bt = input<"bt", T>(shape<5, 7>);   // used as its transpose [7, 5]
  auto q = input<"q", T>(shape<2, 3, 4>);
  auto k = input<"k", T>(shape<2, 6, 4>);
  auto s = input<"s", T>(shape<1, 7, 3>);  // transposed, then broadcast over the batch
  auto b3 = input<"b3", T>(shape<2, 7, 5>);
  auto p = input<"p", T>(shape<3, 2, 7>);  // permuted (not the last two axes) to [2, 3, 7]
  auto prog = compile<B>(matmul(transpose(at), b), matmul(transpose(at), transpose(bt)), matmul(q, transpose(k)),
                         matmul(transpose(s), b3), matmul(exp(transpose(at)) * 0.5_c, b),
                         matmul(permute<1, 0, 2>(p), b3), matmul(matmul(transpose(at), b), transpose(b)) + c<1>);
  auto atv = test::random_array<T>({7, 3}, 181);
  auto bv = test::random_array<T>({7, 5}, 182);
  auto btv = test::random_array<T>({5, 7}, 183);
  auto qv = test::random_array<T>({2, 3, 4}, 184);
  auto kv = test::random_array<T>({2, 6, 4}, 185);
  auto sv = test::random_array<T>({1, 7, 3}, 186);
  auto b3v = test::random_array<T>({2, 7, 5}, 187);
  auto pv = test::random_array<T>({3, 2, 7}, 188);
  prog.bind("at", atv);
  prog.bind("b", bv);
  prog.bind("bt", btv);
  prog.bind("q", qv);
  prog.bind("k", kv);
  prog.bind("s", sv);
  prog.bind("b3", b3v);
  prog.bind("p", pv);
  prog.run();
  auto a_ = transposed(test::to_double(atv)), b_ = test::to_double(bv);
  SECTION("transposed left operand") { check<T>(prog.template output<0>(), matmul_ref(a_, b_)); }
  SECTION("both operands transposed") {
    check<T>(prog.template output<1>(), matmul_ref(a_, transposed(test::to_double(btv))));
  }
  SECTION("batched q k^T") {
    check<T>(prog.template output<2>(), matmul_ref(test::to_double(qv), transposed(test::to_double(kv))));
  }
  SECTION("transposed and broadcast over the batch") {
    check<T>(prog.template output<3>(), matmul_ref(transposed(test::to_double(sv)), test::to_double(b3v)));
  }
  SECTION("a computed operand") {
    check<T>(prog.template output<4>(), matmul_ref(test::apply(a_, [](double v) { return std::exp(v) * 0.5; }), b_));
  }
  SECTION("an operand permuted on its batch axis") {
    xt::xarray<double> permuted = xt::transpose(test::to_double(pv), {1, 0, 2});
    check<T>(prog.template output<5>(), matmul_ref(permuted, test::to_double(b3v)));
  }
  SECTION("a chain of products, then an elementwise epilogue") {
    auto chain = matmul_ref(matmul_ref(a_, b_), transposed(b_));
    check<T>(prog.template output<6>(), test::apply(chain, [](double v) { return v + 1; }));
  }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("matmul 2-D, batched and with broadcast batch axes", "[ops][matmul]", test_backends) {
  SECTION("f32") { matmul_shapes<TestType, f32>(); }
  SECTION("f64") { matmul_shapes<TestType, f64>(); }
}

// f32 only: f64 GEMM is covered above, and each instantiation costs compile time.
TEMPLATE_LIST_TEST_CASE("matmul of transposed, computed and permuted operands", "[ops][matmul]", test_backends) {
  matmul_operands<TestType, f32>();
}

TEMPLATE_LIST_TEST_CASE("matmul with a symbolic batch, rebound between runs", "[ops][matmul][symbolic]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 6>);
  auto w = param<"w", f32>(shape<6, 4>);
  auto bias = param<"bias", f32>(shape<4>);
  auto seq = input<"seq", f32>(shape<Batch, 3, 6>);
  auto prog = compile<TestType>(relu(matmul(x, w) + bias), matmul(seq, w), matmul(transpose(x), x));
  auto wv = test::random_array<float>({6, 4}, 191);
  auto biasv = test::random_array<float>({4}, 192);
  prog.bind("w", wv);
  prog.bind("bias", biasv);
  for (std::size_t batch : {3u, 10u}) {
    INFO("Batch = " << batch);
    auto xv = test::random_array<float>({batch, 6}, 193 + unsigned(batch));
    auto seqv = test::random_array<float>({batch, 3, 6}, 194 + unsigned(batch));
    prog.bind("x", xv);
    prog.bind("seq", seqv);
    prog.run();
    auto xd = test::to_double(xv), wd = test::to_double(wv);
    xt::xarray<double> affine = matmul_ref(xd, wd) + test::to_double(biasv);
    check<f32>(prog.template output<0>(), test::apply(affine, [](double v) { return std::max(v, 0.0); }));
    check<f32>(prog.template output<1>(), matmul_ref(test::to_double(seqv), wd));
    check<f32>(prog.template output<2>(), matmul_ref(transposed(xd), xd));
  }
}
