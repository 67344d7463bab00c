// Reductions composed with elementwise work, against double-precision references:
// softmax, log_softmax and logsumexp over an axis (also at inputs of +-100, where exp
// overflows f32), argmax with ties (the first index wins, as torch.argmax), and reductions
// over a symbolic axis rebound between runs. Every case runs on every backend. (Split from
// ops_reduce_test.cpp so that nvcc compiles each half within about 2 GB.)
#include <limits>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "test_support.hpp"

using namespace luminal;
using test::check_exact;
using test::reshaped;

namespace {
constexpr Dim Batch{"Batch"};

template <class T, class A, class E>
void check(const A& actual, const E& expected) {
  test::check_close<T>(actual, expected);
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

// ---- symbolic extents -------------------------------------------------------------

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
