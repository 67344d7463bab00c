// luminal::nn and the ops under it: fixed_string concatenation, unfold (values and
// gradient), Conv2d, pools and norms against naive loops and direct formulas, the losses
// (with logits that overflow a naive exp), finite-difference gradient checks in f64 of
// conv, pools, norms and losses, Dropout's in-graph hash RNG, Linear / Embedding /
// Flatten / activations, and the initializers. Host backend only: each program here is
// large, and the backends are compared op by op in the ops_*_test files.
#include "test_support.hpp"

#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <map>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using B = host;
using arr = xt::xarray<double>;
using test::check_gradients;
using test::feeds;
using test::uniform;

std::vector<std::size_t> shape_of(const auto& a) { return {a.shape().begin(), a.shape().end()}; }

/// Naive 2-D convolution in double: x [N, Cin, H, W], w [Cout, Cin, K, K], b [Cout].
arr naive_conv(const arr& x, const arr& w, const arr& b, std::size_t stride, std::size_t padding) {
  std::size_t n = x.shape()[0], cin = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  std::size_t cout = w.shape()[0], k = w.shape()[2];
  std::size_t ho = (h + 2 * padding - k) / stride + 1, wo = (wd + 2 * padding - k) / stride + 1;
  arr out = xt::zeros<double>({n, cout, ho, wo});
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t o = 0; o < cout; ++o)
      for (std::size_t i = 0; i < ho; ++i)
        for (std::size_t j = 0; j < wo; ++j) {
          double acc = b(o);
          for (std::size_t c = 0; c < cin; ++c)
            for (std::size_t p = 0; p < k; ++p)
              for (std::size_t q = 0; q < k; ++q) {
                long long r = static_cast<long long>(i * stride + p) - static_cast<long long>(padding);
                long long s = static_cast<long long>(j * stride + q) - static_cast<long long>(padding);
                if (r < 0 || s < 0 || r >= static_cast<long long>(h) || s >= static_cast<long long>(wd)) continue;
                acc += x(a, c, std::size_t(r), std::size_t(s)) * w(o, c, p, q);
              }
          out(a, o, i, j) = acc;
        }
  return out;
}

/// Naive max or average pooling over the last two axes of x [N, C, H, W]; padding reads
/// as -inf for max and counts as 0 for the average (count_include_pad).
arr naive_pool(const arr& x, std::size_t k, std::size_t stride, std::size_t padding, bool is_max) {
  std::size_t n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  std::size_t ho = (h + 2 * padding - k) / stride + 1, wo = (wd + 2 * padding - k) / stride + 1;
  arr out = xt::zeros<double>({n, ch, ho, wo});
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t c = 0; c < ch; ++c)
      for (std::size_t i = 0; i < ho; ++i)
        for (std::size_t j = 0; j < wo; ++j) {
          double acc = is_max ? -INFINITY : 0.0;
          for (std::size_t p = 0; p < k; ++p)
            for (std::size_t q = 0; q < k; ++q) {
              long long r = static_cast<long long>(i * stride + p) - static_cast<long long>(padding);
              long long s = static_cast<long long>(j * stride + q) - static_cast<long long>(padding);
              bool inside = r >= 0 && s >= 0 && r < static_cast<long long>(h) && s < static_cast<long long>(wd);
              double v = inside ? x(a, c, std::size_t(r), std::size_t(s)) : (is_max ? -INFINITY : 0.0);
              acc = is_max ? std::max(acc, v) : acc + v;
            }
          out(a, c, i, j) = is_max ? acc : acc / double(k * k);
        }
  return out;
}

double mean_of(const auto& a) { return double(xt::mean(a)()); }
double std_of(const auto& a) {
  double m = mean_of(a), s = 0;
  for (auto v : a) s += (double(v) - m) * (double(v) - m);
  return std::sqrt(s / double(a.size()));
}
/// The largest |element|. Bounds are checked with a relative slack of 1e-7 because a
/// double just below the bound may round up to the float above it.
double max_abs(const auto& a) {
  double m = 0;
  for (auto v : a) m = std::max(m, std::abs(double(v)));
  return m;
}
}  // namespace

// ---------------------------------------------------------------------------------------
// fixed_string concatenation
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: fixed_string concatenation at compile time", "[nn][fixed_string]") {
  constexpr fixed_string prefix("fc1");
  constexpr auto name = prefix + ".weight";
  STATIC_REQUIRE(name.view() == "fc1.weight");
  STATIC_REQUIRE(sizeof(name.chars) == sizeof("fc1.weight"));
  STATIC_REQUIRE(name.chars[name.size()] == 0);
  STATIC_REQUIRE(("layer." + prefix).view() == "layer.fc1");
  STATIC_REQUIRE((prefix + fixed_string(".b") + "ias").view() == "fc1.bias");
  STATIC_REQUIRE((fixed_string("") + "x").view() == "x");
  // Usable as a template argument: the leaf is the same node as one spelled in full.
  STATIC_REQUIRE(std::is_same_v<decltype(param<prefix + ".weight", f32>(shape<2, 3>)), Param<"fc1.weight", f32, Shape<2, 3>>>);
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(nn::Linear<"enc.fc1", 3, 2>::weight)>, Param<"enc.fc1.weight", f32, Shape<2, 3>>>);
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(nn::Linear<"enc.fc1", 3, 2>::bias)>, Param<"enc.fc1.bias", f32, Shape<2>>>);
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(nn::Linear<"fc", 3, 2, false>::bias)>, nn::none>);
}

TEST_CASE("nn: the README's model has the shapes and parameter names of its comments", "[nn]") {
  auto x = input<"x", f32>(shape<Batch, 1, 28, 28>);
  nn::Conv2d<"conv1", 1, 8, 3, 1, 1> conv1;
  nn::Linear<"fc", 8 * 14 * 14, 10> fc;
  auto logits = fc(nn::Flatten{}(nn::MaxPool2d<2>{}(relu(conv1(x)))));
  auto loss = nn::cross_entropy(logits, input<"labels", i32>(shape<Batch>));
  auto [value, dfc, dconv] = value_and_grad(loss, fc.weight, conv1.weight);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(logits)>, Shape<Batch, 10>>);
  STATIC_REQUIRE(std::is_same_v<decltype(value), decltype(loss)>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(dfc)>, Shape<10, 1568>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(dconv)>, Shape<8, 1, 3, 3>>);
  STATIC_REQUIRE(conv1.weight.name.view() == "conv1.weight");
  STATIC_REQUIRE(std::get<1>(fc.parameters).name.view() == "fc.bias");
  tensor_store store;
  conv1.initialize(store, 42);
  REQUIRE(store.names() == std::vector<std::string>{"conv1.bias", "conv1.weight"});
}

// ---------------------------------------------------------------------------------------
// unfold
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: unfold gives sliding windows along an axis", "[nn][unfold]") {
  auto x = input<"x", f64>(shape<Batch, 7, 3>);
  auto a = unfold<1, 3>(x);         // stride 1
  auto b = unfold<1, 3, 2>(x);      // stride 2
  auto d = unfold<-1, 2, 1>(x);     // last axis
  auto e = unfold<1, 2, 3>(x);      // stride > size: rows 2 and 5 are skipped, 6 dropped
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(a)>, Shape<Batch, 5, 3, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(b)>, Shape<Batch, 3, 3, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(d)>, Shape<Batch, 7, 2, 2>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(e)>, Shape<Batch, 2, 2, 3>>);
  auto prog = compile<B>(a, b, d, e);
  arr xv = uniform({2, 7, 3}, 1);
  prog.bind("x", xv);
  prog.run();
  auto check = [&](const arr& out, std::size_t axis, std::size_t size, std::size_t stride) {
    std::vector<std::size_t> expected_shape{2, 7, 3};
    expected_shape[axis] = (expected_shape[axis] - size) / stride + 1;
    expected_shape.insert(expected_shape.begin() + std::ptrdiff_t(axis) + 1, size);
    REQUIRE(shape_of(out) == expected_shape);
    arr expected = xt::zeros<double>(expected_shape);
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t i = 0; i < expected_shape[axis]; ++i)
        for (std::size_t k = 0; k < size; ++k)
          for (std::size_t o = 0; o < (axis == 1 ? 3u : 7u); ++o) {
            if (axis == 1) expected(n, i, k, o) = xv(n, i * stride + k, o);
            else expected(n, o, i, k) = xv(n, o, i * stride + k);
          }
    test::require_close(out, expected, 0, 0);
  };
  check(prog.output<0>(), 1, 3, 1);
  check(prog.output<1>(), 1, 3, 2);
  check(prog.output<2>(), 2, 2, 1);
  check(prog.output<3>(), 1, 2, 3);
}

TEST_CASE("nn: unfold gradient against finite differences, stride 1", "[nn][unfold][fd]") {
  auto x = param<"x", f64>(shape<2, 6, 3>);
  auto r = input<"r", f64>(shape<2, 4, 3, 3>);
  check_gradients<B>(sum(sin(unfold<1, 3, 1>(x)) * r), feeds().add("x", uniform({2, 6, 3}, 11)).add("r", uniform({2, 4, 3, 3}, 12)), x);
}

TEST_CASE("nn: unfold gradient against finite differences, strides 2 and 3", "[nn][unfold][fd]") {
  // L = 8: stride 2 size 3 drops element 7; stride 3 size 2 skips every third element
  // and its placement runs past L (the slice branch of the rule).
  auto x = param<"x", f64>(shape<3, 8>);
  auto r = input<"r", f64>(shape<3, 3, 3>);
  auto s = input<"s", f64>(shape<3, 3, 2>);
  auto loss = sum(sin(unfold<1, 3, 2>(x)) * r) + sum(square(unfold<-1, 2, 3>(x)) * s);
  check_gradients<B>(loss, feeds().add("x", uniform({3, 8}, 13)).add("r", uniform({3, 3, 3}, 14)).add("s", uniform({3, 3, 2}, 15)), x);
}

// ---------------------------------------------------------------------------------------
// Forward values against naive loops and direct formulas
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: Conv2d matches a naive convolution", "[nn][conv]") {
  nn::Conv2d<"ca", 2, 3, 3, 1, 1> conv_a;  // stride 1, padding 1: same size
  nn::Conv2d<"cb", 2, 4, 3, 2> conv_b;     // stride 2, no padding
  auto x = input<"x", f32>(shape<Batch, 2, 6, 5>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv_a(x))>, Shape<Batch, 3, 6, 5>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv_b(x))>, Shape<Batch, 4, 2, 2>>);
  auto prog = compile<B>(conv_a(x), conv_b(x));
  tensor_store store;
  conv_a.initialize(store, 7);
  conv_b.initialize(store, 7);
  REQUIRE(store.bind(prog) == 4);
  for (std::size_t n : {1, 3}) {
    INFO("Batch = " << n);
    xt::xarray<float> xv = test::random_array<float>({n, 2, 6, 5}, 21);
    prog.bind("x", xv);
    prog.run();
    arr xd = test::to_double(xv);
    auto param = [&](const char* name) { return test::to_double(store.get<f32>(name)); };
    test::require_close(prog.output<0>(), naive_conv(xd, param("ca.weight"), param("ca.bias"), 1, 1), 1e-5, 1e-5);
    test::require_close(prog.output<1>(), naive_conv(xd, param("cb.weight"), param("cb.bias"), 2, 0), 1e-5, 1e-5);
  }
}

TEST_CASE("nn: Conv2d and MaxPool2d over rows of 13 to 16 match naive loops, values and the input's gradient", "[nn][conv][pool]") {
  // Rows of 13 to 16 elements (the padded 14-wide plane, im2col's and col2im's rows) and
  // pool windows shaped (.., 7, 1, 7, 1) and (.., 14, 1, 13, 1) take the loop nest's
  // unrolled short rows; the other tests' planes are narrower.
  nn::Conv2d<"c", 2, 3, 3, 1, 1> conv;
  auto x = input<"x", f32>(shape<2, 2, 14, 14>);
  auto y = input<"y", f32>(shape<2, 2, 28, 26>);
  auto r = input<"r", f32>(shape<2, 3, 14, 14>);
  auto pooled = nn::MaxPool2d<2>{}(conv(x));
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(pooled)>, Shape<2, 3, 7, 7>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(nn::MaxPool2d<2>{}(y))>, Shape<2, 2, 14, 13>>);
  auto prog = compile<B>(pooled, nn::MaxPool2d<2>{}(y), grad(sum(conv(x) * r), x));
  tensor_store store;
  conv.initialize(store, 11);
  REQUIRE(store.bind(prog) == 2);
  xt::xarray<float> xv = test::random_array<float>({2, 2, 14, 14}, 41);
  xt::xarray<float> yv = test::random_array<float>({2, 2, 28, 26}, 42);
  xt::xarray<float> rv = test::random_array<float>({2, 3, 14, 14}, 43);
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.bind("r", rv);
  prog.run();
  arr w = test::to_double(store.get<f32>("c.weight"));
  arr conv_value = naive_conv(test::to_double(xv), w, test::to_double(store.get<f32>("c.bias")), 1, 1);
  test::require_close(prog.output<0>(), naive_pool(conv_value, 2, 2, 0, true), 1e-5, 1e-5);
  test::require_close(prog.output<1>(), naive_pool(test::to_double(yv), 2, 2, 0, true), 0, 0);
  arr dx = xt::zeros<double>({2, 2, 14, 14});
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t co = 0; co < 3; ++co)
      for (long ho = 0; ho < 14; ++ho)
        for (long wo = 0; wo < 14; ++wo)
          for (std::size_t ci = 0; ci < 2; ++ci)
            for (long kh = 0; kh < 3; ++kh)
              for (long kw = 0; kw < 3; ++kw) {
                long h = ho + kh - 1, v = wo + kw - 1;
                if (h < 0 || v < 0 || h >= 14 || v >= 14) continue;
                dx(n, ci, std::size_t(h), std::size_t(v)) +=
                    double(rv(n, co, std::size_t(ho), std::size_t(wo))) * w(co, ci, std::size_t(kh), std::size_t(kw));
              }
  test::require_close(prog.output<2>(), dx, 1e-5, 1e-5);
  // col2im, the input's gradient summed from nine shifted views of one GEMM's product, is
  // one loop: the gradient alone is the cotangent the GEMM reads, the GEMM, and col2im.
  STATIC_REQUIRE(decltype(compile<B>(grad(sum(conv(x) * r), x)))::kernel_count() == 3);
#ifdef LUMINAL_VECTOR_WIDTHS
  // Blocks of 7 and 14 short rows (the pools, im2col, col2im) are compiled for 128-bit
  // vectors, 4 rows a step; 256-bit ones take 8 and left a block of 7 scalar.
  REQUIRE(prog.describe().find("short blocks: 128-bit vectors") != std::string::npos);
#endif
}

TEST_CASE("nn: MaxPool2d and AvgPool2d match naive loops", "[nn][pool]") {
  auto x = input<"x", f32>(shape<Batch, 3, 7, 6>);
  auto max2 = nn::MaxPool2d<2>{}(x);           // drops the last row
  auto max3 = nn::MaxPool2d<3, 2, 1>{}(x);     // -inf padding, overlapping windows
  auto avg2 = nn::AvgPool2d<2>{}(x);
  auto avg3 = nn::AvgPool2d<3, 1, 1>{}(x);     // zero padding counted
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(max2)>, Shape<Batch, 3, 3, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(max3)>, Shape<Batch, 3, 4, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(avg3)>, Shape<Batch, 3, 7, 6>>);
  auto prog = compile<B>(max2, max3, avg2, avg3);
  xt::xarray<float> xv = test::random_array<float>({2, 3, 7, 6}, 31, -2.0, 1.0);  // mostly negative: -inf padding matters
  prog.bind("x", xv);
  prog.run();
  arr xd = test::to_double(xv);
  test::require_close(prog.output<0>(), naive_pool(xd, 2, 2, 0, true), 0, 0);
  test::require_close(prog.output<1>(), naive_pool(xd, 3, 2, 1, true), 0, 0);
  test::require_close(prog.output<2>(), naive_pool(xd, 2, 2, 0, false), 1e-6, 1e-6);
  test::require_close(prog.output<3>(), naive_pool(xd, 3, 1, 1, false), 1e-6, 1e-6);
}

TEST_CASE("nn: MaxPool2d sends each window's gradient to its first maximal element, as torch", "[nn][pool]") {
  auto x = input<"x", f32>(shape<2, 3, 8, 6>);
  auto r1 = input<"r1", f32>(shape<2, 3, 4, 3>);
  auto r2 = input<"r2", f32>(shape<2, 3, 4, 3>);
  // MaxPool2d<2> tiles the 8 x 6 plane (a reshape), <3, 2, 1> overlaps and pads.
  // Values from {0, 1, 2} (and all zeros in some windows, as after a ReLU): most windows tie.
  auto loss = sum(nn::MaxPool2d<2>{}(x) * r1) + sum(nn::MaxPool2d<3, 2, 1>{}(x) * r2);
  auto prog = compile<B>(grad(loss, x));
  xt::xarray<float> xv = test::random_ints<float>({2, 3, 8, 6}, 37, 0, 2);
  for (std::size_t h = 0; h < 8; ++h)
    for (std::size_t w = 0; w < 6; ++w) xv(0, 1, h, w) = 0.0f;
  xt::xarray<float> r1v = test::random_array<float>({2, 3, 4, 3}, 38), r2v = test::random_array<float>({2, 3, 4, 3}, 39);
  prog.bind("x", xv);
  prog.bind("r1", r1v);
  prog.bind("r2", r2v);
  prog.run();
  // torch's max_pool2d: the first element of the window (row-major) that is greater than
  // every element before it receives the window's gradient.
  arr expected = xt::zeros<double>({2, 3, 8, 6});
  auto route = [&](const xt::xarray<float>& r, long k, long stride, long padding) {
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t i = 0; i < r.shape()[2]; ++i)
          for (std::size_t j = 0; j < r.shape()[3]; ++j) {
            long best_h = -1, best_w = -1;
            for (long p = 0; p < k; ++p)
              for (long q = 0; q < k; ++q) {
                long h = long(i) * stride + p - padding, w = long(j) * stride + q - padding;
                if (h < 0 || w < 0 || h >= 8 || w >= 6) continue;
                if (best_h < 0 || xv(n, c, std::size_t(h), std::size_t(w)) > xv(n, c, std::size_t(best_h), std::size_t(best_w)))
                  best_h = h, best_w = w;
              }
            expected(n, c, std::size_t(best_h), std::size_t(best_w)) += r(n, c, i, j);
          }
  };
  route(r1v, 2, 2, 0);
  route(r2v, 3, 2, 1);
  test::require_close(prog.output<0>(), expected, 1e-6, 1e-6);
}

TEST_CASE("nn: MaxPool2d propagates NaN and sends a NaN window's gradient to its first element", "[nn][pool]") {
  auto x = input<"x", f32>(shape<1, 1, 4, 4>);
  auto r = input<"r", f32>(shape<1, 1, 2, 2>);
  auto pooled = nn::MaxPool2d<2>{}(x);
  auto prog = compile<B>(pooled, grad(sum(pooled * r), x));
  xt::xarray<float> xv = test::random_array<float>({1, 1, 4, 4}, 47);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  xv(0, 0, 1, 1) = nan;  // the last element of window (0, 0)
  xv(0, 0, 2, 3) = nan;  // the second element of window (1, 1)
  xt::xarray<float> rv = {{{{1.0f, 2.0f}, {3.0f, 4.0f}}}};
  prog.bind("x", xv);
  prog.bind("r", rv);
  prog.run();
  auto y = prog.output<0>();
  CHECK(std::isnan(y(0, 0, 0, 0)));
  CHECK(std::isnan(y(0, 0, 1, 1)));
  CHECK(y(0, 0, 0, 1) == std::max(std::max(xv(0, 0, 0, 2), xv(0, 0, 0, 3)), std::max(xv(0, 0, 1, 2), xv(0, 0, 1, 3))));
  auto g = prog.output<1>();
  CHECK(g(0, 0, 0, 0) == 1.0f);  // not the NaN at (1, 1)
  CHECK(g(0, 0, 1, 1) == 0.0f);
  CHECK(g(0, 0, 2, 2) == 4.0f);  // not the NaN at (2, 3)
  CHECK(g(0, 0, 2, 3) == 0.0f);
  CHECK(xt::sum(g)() == 10.0f);
}

TEST_CASE("nn: LayerNorm and RMSNorm match their formulas", "[nn][norm]") {
  nn::LayerNorm<"ln", 5> ln;
  nn::RMSNorm<"rms", 5> rms;
  auto x = input<"x", f32>(shape<Batch, 3, 5>);
  auto prog = compile<B>(ln(x), rms(x));
  xt::xarray<float> xv = test::random_array<float>({2, 3, 5}, 41, -3.0, 5.0);
  xt::xarray<float> gamma = test::random_array<float>({5}, 42, 0.5, 1.5), beta = test::random_array<float>({5}, 43);
  xt::xarray<float> scale = test::random_array<float>({5}, 44, 0.5, 1.5);
  prog.bind("x", xv);
  prog.bind("ln.weight", gamma);
  prog.bind("ln.bias", beta);
  prog.bind("rms.weight", scale);
  prog.run();
  arr ln_expected = xt::zeros<double>({2, 3, 5}), rms_expected = xt::zeros<double>({2, 3, 5});
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 3; ++b) {
      double m = 0, v = 0, ms = 0;
      for (std::size_t k = 0; k < 5; ++k) m += xv(a, b, k) / 5.0;
      for (std::size_t k = 0; k < 5; ++k) v += (xv(a, b, k) - m) * (xv(a, b, k) - m) / 5.0;
      for (std::size_t k = 0; k < 5; ++k) ms += double(xv(a, b, k)) * xv(a, b, k) / 5.0;
      for (std::size_t k = 0; k < 5; ++k) {
        ln_expected(a, b, k) = (xv(a, b, k) - m) / std::sqrt(v + 1e-5) * gamma(k) + beta(k);
        rms_expected(a, b, k) = xv(a, b, k) / std::sqrt(ms + 1e-6) * scale(k);
      }
    }
  test::require_close(prog.output<0>(), ln_expected, 1e-5, 1e-5);
  test::require_close(prog.output<1>(), rms_expected, 1e-5, 1e-5);
}

TEST_CASE("nn: losses match direct formulas, with logits that overflow a naive exp", "[nn][loss]") {
  auto logits = input<"logits", f32>(shape<Batch, 4>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto pred = input<"pred", f32>(shape<Batch, 3>);
  auto target = input<"target", f32>(shape<Batch, 3>);
  auto prog = compile<B>(nn::cross_entropy(logits, labels), nn::mse(pred, target),
                         nn::binary_cross_entropy_with_logits(pred, target), nn::huber<1.5>(pred, target));
  // exp(1000) and exp(150) overflow f32 (and exp(1000) f64): only a shifted sum survives.
  xt::xarray<float> lv = {{1000.f, 999.f, -5.f, 0.f}, {-3.f, 150.f, 149.5f, 2.f}, {0.1f, -0.2f, 0.3f, 0.0f}};
  xt::xarray<i32> yv = {1, 2, 0};
  REQUIRE(std::isinf(std::exp(lv(0, 0))));
  xt::xarray<float> pv = {{-120.f, 0.3f, 2.f}, {0.5f, 80.f, -1.f}, {3.f, -0.7f, 0.05f}};
  xt::xarray<float> tv = {{1.f, 0.f, 0.25f}, {0.f, 1.f, 1.f}, {0.f, 0.5f, 1.f}};
  prog.bind("logits", lv);
  prog.bind("labels", yv);
  prog.bind("pred", pv);
  prog.bind("target", tv);
  prog.run();
  double ce = 0;
  for (std::size_t n = 0; n < 3; ++n) {
    double m = -INFINITY, s = 0;
    for (std::size_t k = 0; k < 4; ++k) m = std::max(m, double(lv(n, k)));
    for (std::size_t k = 0; k < 4; ++k) s += std::exp(double(lv(n, k)) - m);
    ce += (m + std::log(s) - lv(n, std::size_t(yv(n)))) / 3.0;
  }
  double mse = 0, bce = 0, hub = 0;
  for (std::size_t i = 0; i < 9; ++i) {
    double p = pv.data()[i], t = tv.data()[i], d = p - t;
    mse += d * d / 9.0;
    bce += (std::max(p, 0.0) - p * t + std::log1p(std::exp(-std::abs(p)))) / 9.0;
    hub += (std::abs(d) < 1.5 ? 0.5 * d * d : 1.5 * (std::abs(d) - 0.75)) / 9.0;
  }
  REQUIRE(std::isfinite(double(prog.output<0>()())));
  REQUIRE(double(prog.output<0>()()) == Approx(ce).epsilon(1e-5));
  REQUIRE(double(prog.output<1>()()) == Approx(mse).epsilon(1e-5));
  REQUIRE(double(prog.output<2>()()) == Approx(bce).epsilon(1e-5));
  REQUIRE(double(prog.output<3>()()) == Approx(hub).epsilon(1e-5));
}

TEST_CASE("nn: Linear, Embedding, Flatten and activations match their formulas", "[nn][linear]") {
  nn::Linear<"fc", 6, 4> fc;
  nn::Linear<"nb", 3, 2, false> no_bias;
  nn::Embedding<"emb", 5, 3> emb;
  nn::Flatten flatten;
  auto x = input<"x", f32>(shape<Batch, 2, 3>);
  auto ids = input<"ids", i32>(shape<Batch, 4>);
  auto h = fc(flatten(x));
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(h)>, Shape<Batch, 4>>);
  auto prog = compile<B>(nn::ReLU{}(h), nn::GELU{}(h), nn::Tanh{}(h), nn::Sigmoid{}(h), no_bias(x), emb(ids));
  tensor_store store;
  fc.initialize(store, 3);
  no_bias.initialize(store, 3);
  emb.initialize(store, 3);
  REQUIRE(store.names() == std::vector<std::string>{"emb.weight", "fc.bias", "fc.weight", "nb.weight"});
  REQUIRE(store.bind(prog) == 4);
  xt::xarray<float> xv = test::random_array<float>({2, 2, 3}, 51);
  xt::xarray<i32> iv = {{0, 4, 2, 2}, {1, 3, 0, 4}};
  prog.bind("x", xv);
  prog.bind("ids", iv);
  prog.run();
  arr w = test::to_double(store.get<f32>("fc.weight")), b = test::to_double(store.get<f32>("fc.bias"));
  arr wn = test::to_double(store.get<f32>("nb.weight")), table = test::to_double(store.get<f32>("emb.weight"));
  arr hv = xt::zeros<double>({2, 4}), nbv = xt::zeros<double>({2, 2, 2}), ev = xt::zeros<double>({2, 4, 3});
  for (std::size_t n = 0; n < 2; ++n) {
    for (std::size_t o = 0; o < 4; ++o) {
      hv(n, o) = b(o);
      for (std::size_t i = 0; i < 6; ++i) hv(n, o) += w(o, i) * xv(n, i / 3, i % 3);
    }
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t o = 0; o < 2; ++o)
        for (std::size_t i = 0; i < 3; ++i) nbv(n, r, o) += wn(o, i) * xv(n, r, i);
    for (std::size_t t = 0; t < 4; ++t)
      for (std::size_t k = 0; k < 3; ++k) ev(n, t, k) = table(std::size_t(iv(n, t)), k);
  }
  test::require_close(prog.output<0>(), test::apply(hv, [](double v) { return std::max(v, 0.0); }), 1e-5, 1e-6);
  test::require_close(prog.output<1>(), test::apply(hv, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }),
                      1e-5, 1e-6);
  test::require_close(prog.output<2>(), test::apply(hv, [](double v) { return std::tanh(v); }), 1e-5, 1e-6);
  test::require_close(prog.output<3>(), test::apply(hv, [](double v) { return 1 / (1 + std::exp(-v)); }), 1e-5, 1e-6);
  test::require_close(prog.output<4>(), nbv, 1e-5, 1e-6);
  test::require_close(prog.output<5>(), ev, 0, 0);
}

// ---------------------------------------------------------------------------------------
// Gradients against finite differences (f64)
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: Conv2d gradients against finite differences", "[nn][conv][fd]") {
  using C1 = nn::Conv2d<"c1", 2, 3, 3, 1, 1, true, f64>;
  using C2 = nn::Conv2d<"c2", 2, 2, 3, 2, 0, true, f64>;
  auto x = input<"x", f64>(shape<Batch, 2, 5, 4>);
  auto r1 = input<"r1", f64>(shape<Batch, 3, 5, 4>);
  auto r2 = input<"r2", f64>(shape<Batch, 2, 2, 1>);
  auto loss = sum(C1{}(x) * r1) + sum(sin(C2{}(x)) * r2);
  check_gradients<B>(loss,
                     feeds().add("x", uniform({2, 2, 5, 4}, 61)).add("r1", uniform({2, 3, 5, 4}, 62)).add("r2", uniform({2, 2, 2, 1}, 63))
                            .add("c1.weight", uniform({3, 2, 3, 3}, 64)).add("c1.bias", uniform({3}, 65))
                            .add("c2.weight", uniform({2, 2, 3, 3}, 66)).add("c2.bias", uniform({2}, 67)),
                     x, C1::weight, C1::bias, C2::weight, C2::bias);
}

TEST_CASE("nn: pooling gradients against finite differences", "[nn][pool][fd]") {
  auto x = input<"x", f64>(shape<2, 2, 5, 6>);
  auto r1 = input<"r1", f64>(shape<2, 2, 2, 3>);
  auto r2 = input<"r2", f64>(shape<2, 2, 3, 3>);
  auto r3 = input<"r3", f64>(shape<2, 2, 3, 4>);
  // Distinct values: no ties inside a window, where max has no derivative.
  auto loss = sum(nn::MaxPool2d<2>{}(x) * r1) + sum(nn::MaxPool2d<3, 2, 1>{}(x) * r2) + sum(nn::AvgPool2d<3, 1>{}(x) * r3);
  check_gradients<B>(loss,
                     feeds().add("x", test::distinct_values({2, 2, 5, 6}, 71)).add("r1", uniform({2, 2, 2, 3}, 72))
                            .add("r2", uniform({2, 2, 3, 3}, 73)).add("r3", uniform({2, 2, 3, 4}, 74)),
                     x);
}

TEST_CASE("nn: LayerNorm and RMSNorm gradients against finite differences", "[nn][norm][fd]") {
  using LN = nn::LayerNorm<"ln", 6, 1e-5, f64>;
  using RMS = nn::RMSNorm<"rms", 6, 1e-6, f64>;
  auto x = input<"x", f64>(shape<Batch, 6>);
  auto r = input<"r", f64>(shape<Batch, 6>);
  auto s = input<"s", f64>(shape<Batch, 6>);
  auto loss = sum(LN{}(x) * r) + sum(RMS{}(x) * s);
  check_gradients<B>(loss,
                     feeds().add("x", uniform({3, 6}, 81, -2.0, 2.0)).add("r", uniform({3, 6}, 82)).add("s", uniform({3, 6}, 83))
                            .add("ln.weight", uniform({6}, 84, 0.5, 1.5)).add("ln.bias", uniform({6}, 85))
                            .add("rms.weight", uniform({6}, 86, 0.5, 1.5)),
                     x, LN::weight, LN::bias, RMS::weight);
}

TEST_CASE("nn: loss gradients against finite differences", "[nn][loss][fd]") {
  auto logits = input<"logits", f64>(shape<Batch, 4>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto z = input<"z", f64>(shape<Batch, 3>);
  auto t = input<"t", f64>(shape<Batch, 3>);
  auto p = input<"p", f64>(shape<Batch, 3>);
  auto q = input<"q", f64>(shape<Batch, 3>);
  auto loss = nn::cross_entropy(logits, labels) + nn::binary_cross_entropy_with_logits(z, t) + nn::huber<1.0>(p, q) +
              nn::mse(p, q);
  arr qv = uniform({3, 3}, 91);
  // Differences on both sides of Delta = 1, away from the kink.
  arr dv = {{-2.5, -0.3, 0.4}, {1.7, -1.4, 0.8}, {0.05, 3.0, -0.6}};
  check_gradients<B>(loss,
                     feeds().add("logits", uniform({3, 4}, 92, -3.0, 3.0)).add("labels", xt::xarray<i32>{3, 0, 2})
                            .add("z", test::signed_away({3, 3}, 93, 0.1, 4.0)).add("t", uniform({3, 3}, 94, 0.0, 1.0))
                            .add("p", arr(qv + dv)).add("q", qv),
                     logits, z, t, p, q);
}

// ---------------------------------------------------------------------------------------
// Dropout
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: Dropout keeps about 1 - P, scales by 1 / (1 - P), and changes with the seed", "[nn][dropout]") {
  nn::Dropout<0.3, 1> drop_a;
  nn::Dropout<0.5, 2> drop_b;
  auto x = input<"x", f32>(shape<Batch, 64, 32>);
  auto r = input<"r", f32>(shape<Batch, 64, 32>);
  // Evaluation is the identity: the very same expression type as x.
  STATIC_REQUIRE(std::is_same_v<decltype(drop_a(x, nn::eval)), decltype(x)>);
  STATIC_REQUIRE(std::is_same_v<decltype(drop_a(x, nn::train)), decltype(drop_a.train(x))>);
  auto ya = drop_a(x, nn::train);
  auto yb = drop_b.train(x);
  auto prog = compile<B>(ya, yb, grad(sum(ya * r), x));
  const std::size_t n = 2;
  xt::xarray<float> xv = test::random_array<float>({n, 64, 32}, 101, 0.5, 1.5);
  xt::xarray<float> rv = test::random_array<float>({n, 64, 32}, 102);
  prog.bind("x", xv);
  prog.bind("r", rv);
  auto run_with = [&](float seed) {
    prog.bind("rng.seed", xt::xarray<float>(seed));
    prog.run();
    return std::tuple{xt::xarray<float>(prog.output<0>()), xt::xarray<float>(prog.output<1>()), xt::xarray<float>(prog.output<2>())};
  };
  // Kept fraction within 5 standard deviations of 1 - P; kept values exactly x / (1 - P)
  // (in f32), dropped ones exactly 0; the gradient is r / (1 - P) where kept, else 0.
  auto check = [&](const xt::xarray<float>& y, double p, std::vector<bool>& kept) {
    const float scale = float(1.0 / (1.0 - p));
    std::size_t count = 0;
    kept.assign(y.size(), false);
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (y.data()[i] != 0.0f) {
        ++count;
        kept[i] = true;
        REQUIRE(y.data()[i] == xv.data()[i] * scale);
      }
    }
    double fraction = double(count) / double(y.size());
    double sigma = std::sqrt(p * (1 - p) / double(y.size()));
    INFO("P = " << p << ", kept fraction " << fraction);
    REQUIRE(std::abs(fraction - (1 - p)) < 5 * sigma);
  };
  auto [a1, b1, g1] = run_with(1.0f);
  std::vector<bool> ka1, kb1, ka2, kb2;
  check(a1, 0.3, ka1);
  check(b1, 0.5, kb1);
  for (std::size_t i = 0; i < g1.size(); ++i)
    REQUIRE(g1.data()[i] == (ka1[i] ? rv.data()[i] * float(1.0 / 0.7) : 0.0f));
  auto second = run_with(2.0f);
  check(std::get<0>(second), 0.3, ka2);
  check(std::get<1>(second), 0.5, kb2);
  auto differing = [](const std::vector<bool>& u, const std::vector<bool>& v) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < u.size(); ++i) d += u[i] != v[i];
    return double(d) / double(u.size());
  };
  // Independent masks differ in P (1 - P') + P' (1 - P) of the elements: 0.42, 0.5, 0.5.
  CHECK(differing(ka1, ka2) > 0.35);
  CHECK(differing(kb1, kb2) > 0.4);
  CHECK(differing(ka1, kb1) > 0.4);  // layers with other salts are independent too
  // The same seed gives the same masks.
  auto again = run_with(1.0f);
  test::require_close(std::get<0>(again), a1, 0, 0);
  test::require_close(std::get<1>(again), b1, 0, 0);
}

// ---------------------------------------------------------------------------------------
// Initializers
// ---------------------------------------------------------------------------------------

TEST_CASE("nn: initializers follow torch.nn.init's bounds and statistics", "[nn][init]") {
  namespace init = nn::init;
  REQUIRE(init::compute_fans({16, 3, 5, 5}).in == 75);
  REQUIRE(init::compute_fans({16, 3, 5, 5}).out == 400);
  REQUIRE(init::compute_fans({10, 20}).in == 20);
  REQUIRE_THROWS(init::compute_fans({10}));
  REQUIRE(init::gain(init::nonlinearity::relu) == Approx(std::sqrt(2.0)));
  REQUIRE(init::gain(init::nonlinearity::leaky_relu, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3.0)));
  REQUIRE(init::gain(init::nonlinearity::tanh) == Approx(5.0 / 3.0));

  SECTION("kaiming_uniform with a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
    auto w = init::kaiming_uniform({256, 784}, 1, std::sqrt(5.0));
    const double bound = 1 / std::sqrt(784.0);
    REQUIRE(max_abs(w) <= bound * (1 + 1e-7));
    REQUIRE(max_abs(w) > 0.999 * bound);
    REQUIRE(std::abs(mean_of(w)) < 5 * bound / std::sqrt(3.0 * double(w.size())));
    REQUIRE(std_of(w) == Approx(bound / std::sqrt(3.0)).epsilon(0.01));
  }
  SECTION("kaiming_normal: N(0, 2 / fan) for relu, fan_in or fan_out of a conv weight") {
    auto w = init::kaiming_normal({64, 32, 3, 3}, 2, 0.0, init::fan_mode::fan_in, init::nonlinearity::relu);
    const double s = std::sqrt(2.0 / (32 * 9));
    REQUIRE(std_of(w) == Approx(s).epsilon(0.01));
    REQUIRE(std::abs(mean_of(w)) < 5 * s / std::sqrt(double(w.size())));
    // About 68.27% within one standard deviation: the transform is normal, not just scaled.
    double within = 0;
    for (float v : w) within += std::abs(v) < s;
    REQUIRE(within / double(w.size()) == Approx(0.6827).margin(0.01));
    auto wo = init::kaiming_normal({64, 32, 3, 3}, 2, 0.0, init::fan_mode::fan_out, init::nonlinearity::relu);
    REQUIRE(std_of(wo) == Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.01));
  }
  SECTION("xavier_uniform and xavier_normal") {
    auto u = init::xavier_uniform({100, 200}, 3);
    const double bound = std::sqrt(6.0 / 300.0);
    REQUIRE(max_abs(u) <= bound * (1 + 1e-7));
    REQUIRE(max_abs(u) > 0.999 * bound);
    REQUIRE(std_of(u) == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
    auto g = init::xavier_normal({100, 200}, 4, 2.0);
    REQUIRE(std_of(g) == Approx(2.0 * std::sqrt(2.0 / 300.0)).epsilon(0.02));
    REQUIRE(std::abs(mean_of(g)) < 0.01);
  }
  SECTION("reproducible: the same seed gives the same values, another seed others") {
    auto a = init::kaiming_uniform<double>({30, 40}, 5);
    auto b = init::kaiming_uniform<double>({30, 40}, 5);
    auto c = init::kaiming_uniform<double>({30, 40}, 6);
    REQUIRE((a == b));
    REQUIRE((a != c));
    REQUIRE(init::stream_seed(5, "fc1.weight") != init::stream_seed(5, "fc2.weight"));
    REQUIRE(init::stream_seed(5, "fc1.weight") != init::stream_seed(6, "fc1.weight"));
    // Pinned: mt19937_64's output is fixed by the standard and the transforms are ours,
    // so these values are the same with every standard library.
    std::mt19937_64 rng(42);
    REQUIRE(init::uniform01(rng) == double(std::mt19937_64(42)() >> 11) * 0x1.0p-53);
    auto pinned = init::uniform<double>({3}, 42, 0.0, 1.0);
    std::mt19937_64 check(42);
    for (double v : pinned) REQUIRE(v == double(check() >> 11) * 0x1.0p-53);
  }
}

TEST_CASE("nn: modules initialize their parameters as PyTorch does, by (seed, name)", "[nn][init]") {
  nn::Linear<"fc1", 784, 256> fc1;
  nn::Linear<"fc2", 784, 256> fc2;
  nn::Conv2d<"conv", 3, 8, 5> conv;
  nn::LayerNorm<"ln", 16> ln;
  nn::RMSNorm<"rms", 16> rms;
  nn::Embedding<"emb", 100, 32> emb;
  tensor_store forward, backward;
  fc1.initialize(forward, 9);
  fc2.initialize(forward, 9);
  conv.initialize(forward, 9);
  ln.initialize(forward, 9);
  rms.initialize(forward, 9);
  emb.initialize(forward, 9);
  emb.initialize(backward, 9);
  rms.initialize(backward, 9);
  ln.initialize(backward, 9);
  conv.initialize(backward, 9);
  fc2.initialize(backward, 9);
  fc1.initialize(backward, 9);
  REQUIRE(forward.names() == std::vector<std::string>{"conv.bias", "conv.weight", "emb.weight", "fc1.bias", "fc1.weight",
                                                      "fc2.bias", "fc2.weight", "ln.bias", "ln.weight", "rms.weight"});
  // The order of initialization does not matter.
  for (const auto& name : forward.names()) {
    INFO(name);
    REQUIRE((forward.get<f32>(name) == backward.get<f32>(name)));
  }
  auto w1 = forward.get<f32>("fc1.weight");
  REQUIRE(shape_of(w1) == std::vector<std::size_t>{256, 784});
  REQUIRE(shape_of(forward.get<f32>("conv.weight")) == std::vector<std::size_t>{8, 3, 5, 5});
  // Different names draw different streams.
  REQUIRE((w1 != forward.get<f32>("fc2.weight")));
  // Linear and Conv2d: weight and bias in U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const double linear_bound = 1 / std::sqrt(784.0), conv_bound = 1 / std::sqrt(75.0);
  REQUIRE(max_abs(w1) <= linear_bound * (1 + 1e-7));
  REQUIRE(max_abs(w1) > 0.99 * linear_bound);
  REQUIRE(std_of(w1) == Approx(linear_bound / std::sqrt(3.0)).epsilon(0.01));
  REQUIRE(max_abs(forward.get<f32>("fc1.bias")) <= linear_bound * (1 + 1e-7));
  REQUIRE(max_abs(forward.get<f32>("fc1.bias")) > 0.9 * linear_bound);
  REQUIRE(max_abs(forward.get<f32>("conv.weight")) <= conv_bound * (1 + 1e-7));
  REQUIRE(max_abs(forward.get<f32>("conv.weight")) > 0.98 * conv_bound);
  REQUIRE(max_abs(forward.get<f32>("conv.bias")) <= conv_bound * (1 + 1e-7));
  // Norms: ones and zeros. Embedding: N(0, 1).
  REQUIRE((forward.get<f32>("ln.weight") == xt::ones<float>({16})));
  REQUIRE((forward.get<f32>("ln.bias") == xt::zeros<float>({16})));
  REQUIRE((forward.get<f32>("rms.weight") == xt::ones<float>({16})));
  auto e = forward.get<f32>("emb.weight");
  REQUIRE(std_of(e) == Approx(1.0).epsilon(0.03));
  REQUIRE(std::abs(mean_of(e)) < 0.05);
  // Another seed, other values.
  tensor_store other;
  fc1.initialize(other, 10);
  REQUIRE((other.get<f32>("fc1.weight") != w1));
}
