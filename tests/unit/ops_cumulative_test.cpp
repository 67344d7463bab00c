// cumsum, cumprod, logcumsumexp, their reversed forms and linear_recurrence
// (ops/cumulative.hpp) against PyTorch: values, gradients and forward-mode derivatives.
// tests/fixtures/cumulative.json (make_cumulative_fixtures.py) holds, per case, torch's
// float64 results on float32 inputs: rank 1, rank 3 along each axis, cumprod over zeros,
// logcumsumexp around 1e4, and one program run at two lengths of a symbolic axis. No
// torch at run time.
//
// All static cases are one program per backend, each case on a leaf of its own (weights
// and tangents are one per shape): one compile keeps this file's compile time down.
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;

// float32 results against float64 torch: sums of up to 9 products, a few roundings each
// (relative; a tenth of it absolute, for results near 0).
constexpr double relative_tolerance = 2e-5;
// logcumsumexp around 1e4: float32 rounds y to 2^-10, so e^(x - y) in its derivatives is
// off by up to 2^-11 relative (float32 torch as much).
constexpr double large_tolerance = 2e-3;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "cumulative.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path.string() +
                               " (regenerate it with tests/fixtures/make_cumulative_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

std::vector<std::size_t> shape_of(const json& c) { return c.at("shape").get<std::vector<std::size_t>>(); }

xt::xarray<f32> floats(const json& list, const std::vector<std::size_t>& shape) {
  xt::xarray<f32> out = xt::xarray<f32>::from_shape(shape);
  REQUIRE(list.size() == out.size());
  std::size_t i = 0;
  for (auto& v : out) v = static_cast<f32>(list[i++].get<double>());
  return out;
}

void require_matches(const xt::xarray<f32>& got, const json& expected, double tolerance) {
  xt::xarray<f32> flat = got;
  flat.reshape({flat.size()});
  test::require_close(flat, floats(expected, {expected.size()}), tolerance, tolerance / 10);
}

/// The static cases, in the order of the program's leaves (the linear recurrence's a and b last).
const std::vector<std::string> case_names{
    "cumsum_rank1",       "cumsum_rank3_axis0",       "cumsum_rank3_axis1",      "cumsum_rank3_axis2",
    "cumprod_rank1",      "cumprod_rank3_axis0",      "cumprod_rank3_axis1",     "cumprod_rank3_axis2",
    "logcumsumexp_rank1", "logcumsumexp_rank3_axis0", "logcumsumexp_rank3_axis1", "logcumsumexp_rank3_axis2",
    "cumprod_zeros",      "logcumsumexp_large",       "reversed_cumsum_axis1",   "reversed_cumprod_axis2",
    "reversed_logcumsumexp_axis0", "linear_axis1"};
constexpr std::size_t cases = 18, leaves = 19;

template <class B>
auto static_program() {
  using S9 = Shape<9>;
  using S345 = Shape<3, 4, 5>;
  auto x0 = input<"cumsum_rank1", f32>(S9{});
  auto x1 = input<"cumsum_rank3_axis0", f32>(S345{});
  auto x2 = input<"cumsum_rank3_axis1", f32>(S345{});
  auto x3 = input<"cumsum_rank3_axis2", f32>(S345{});
  auto x4 = input<"cumprod_rank1", f32>(S9{});
  auto x5 = input<"cumprod_rank3_axis0", f32>(S345{});
  auto x6 = input<"cumprod_rank3_axis1", f32>(S345{});
  auto x7 = input<"cumprod_rank3_axis2", f32>(S345{});
  auto x8 = input<"logcumsumexp_rank1", f32>(S9{});
  auto x9 = input<"logcumsumexp_rank3_axis0", f32>(S345{});
  auto x10 = input<"logcumsumexp_rank3_axis1", f32>(S345{});
  auto x11 = input<"logcumsumexp_rank3_axis2", f32>(S345{});
  auto x12 = input<"cumprod_zeros", f32>(shape<3, 6>);
  auto x13 = input<"logcumsumexp_large", f32>(shape<2, 7>);
  auto x14 = input<"reversed_cumsum_axis1", f32>(S345{});
  auto x15 = input<"reversed_cumprod_axis2", f32>(S345{});
  auto x16 = input<"reversed_logcumsumexp_axis0", f32>(S345{});
  auto a17 = input<"linear_axis1", f32>(shape<3, 6>);
  auto b17 = input<"linear_axis1.b", f32>(shape<3, 6>);
  // Negative axes on some: torch's dim=-1, -2.
  auto ys = std::tuple{cumsum<0>(x0), cumsum<0>(x1), cumsum<1>(x2), cumsum<-1>(x3),
                       cumprod<-1>(x4), cumprod<0>(x5), cumprod<1>(x6), cumprod<2>(x7),
                       logcumsumexp<0>(x8), logcumsumexp<0>(x9), logcumsumexp<-2>(x10), logcumsumexp<2>(x11),
                       cumprod<1>(x12), logcumsumexp<1>(x13), cumulative<recurrence::sum, 1, true>(x14),
                       cumulative<recurrence::product, 2, true>(x15), cumulative<recurrence::logaddexp, 0, true>(x16),
                       linear_recurrence<1>(a17, b17)};
  auto w9 = input<"w9", f32>(S9{});
  auto w345 = input<"w345", f32>(S345{});
  auto w36 = input<"w36", f32>(shape<3, 6>);
  auto w27 = input<"w27", f32>(shape<2, 7>);
  auto v9 = input<"v9", f32>(S9{});
  auto v345 = input<"v345", f32>(S345{});
  auto v36 = input<"v36", f32>(shape<3, 6>);
  auto v27 = input<"v27", f32>(shape<2, 7>);
  auto v36b = input<"v36.b", f32>(shape<3, 6>);
  // Each leaf is seen by one term only, so d loss / d x_k is case k's gradient.
  auto loss = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto weight = [&](auto y) {
      using S = shape_t<decltype(y)>;
      if constexpr (std::is_same_v<S, S9>) return w9;
      else if constexpr (std::is_same_v<S, S345>) return w345;
      else if constexpr (std::is_same_v<S, Shape<3, 6>>) return w36;
      else return w27;
    };
    return (sum(std::get<K>(ys) * weight(std::get<K>(ys))) + ...);
  }(std::make_index_sequence<cases>{});
  auto grads = grad(loss, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15, x16, a17, b17);
  auto tangents = jvp(ys, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15, x16, a17, b17, v9, v345,
                      v345, v345, v9, v345, v345, v345, v9, v345, v345, v345, v36, v27, v345, v345, v345, v36, v36b);
  return std::apply([](auto... all) { return compile<B>(all...); }, std::tuple_cat(ys, grads, tangents));
}

template <std::size_t... K, class Program>
std::vector<xt::xarray<f32>> outputs(Program& prog, std::index_sequence<K...>) {
  return {xt::xarray<f32>(prog.template output<K>())...};
}

/// Binds the weight and tangents named for a case's shape from that case's fixture.
template <class Program>
void bind_shape_inputs(Program& prog, const json& c, const std::string& suffix) {
  const auto shape = shape_of(c);
  prog.bind("w" + suffix, floats(c.at("w"), shape));
  prog.bind("v" + suffix, floats(c.at("v")[0], shape));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("cumsum, cumprod, logcumsumexp and linear_recurrence: values, gradients and tangents as torch's",
                        "[ops][cumulative][torch]", test_backends) {
  const json& all = fixture().at("cases");
  auto prog = static_program<TestType>();
  for (const auto& name : case_names) prog.bind(name, floats(all.at(name).at("inputs")[0], shape_of(all.at(name))));
  prog.bind("linear_axis1.b", floats(all.at("linear_axis1").at("inputs")[1], {3, 6}));
  bind_shape_inputs(prog, all.at("cumsum_rank1"), "9");
  bind_shape_inputs(prog, all.at("cumsum_rank3_axis0"), "345");
  bind_shape_inputs(prog, all.at("cumprod_zeros"), "36");
  bind_shape_inputs(prog, all.at("logcumsumexp_large"), "27");
  prog.bind("v36.b", floats(all.at("linear_axis1").at("v")[1], {3, 6}));
  prog.run();
  const auto results = outputs(prog, std::make_index_sequence<cases + leaves + cases>{});
  for (std::size_t k = 0; k < cases; ++k) {
    const json& expected = all.at(case_names[k]);
    const double tolerance = case_names[k] == "logcumsumexp_large" ? large_tolerance : relative_tolerance;
    INFO("case " << case_names[k] << " on " << TestType::name);
    {
      INFO("the value");
      require_matches(results[k], expected.at("value"), relative_tolerance);
    }
    {
      INFO("the gradient of sum(f(x) * w)");
      require_matches(results[cases + k], expected.at("grad")[0], tolerance);
      if (k + 1 == cases) require_matches(results[cases + k + 1], expected.at("grad")[1], tolerance);
      // Zeros in cumprod's input: no NaN, torch's gradient exactly where it is 0.
      for (f32 g : results[cases + k]) REQUIRE(std::isfinite(g));
    }
    {
      INFO("the tangent along v");
      require_matches(results[cases + leaves + k], expected.at("jvp"), tolerance);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("cumulative ops along a symbolic axis: one program, two lengths", "[ops][cumulative][torch][symbolic]",
                        test_backends) {
  constexpr Dim S{"S"};
  auto x0 = input<"x0", f32>(shape<S, 3>);
  auto x1 = input<"x1", f32>(shape<2, S>);
  auto x2 = input<"x2", f32>(shape<2, S>);
  auto w0 = input<"w0", f32>(shape<S, 3>);
  auto w1 = input<"w1", f32>(shape<2, S>);
  auto v0 = input<"v0", f32>(shape<S, 3>);
  auto v1 = input<"v1", f32>(shape<2, S>);
  auto ys = std::tuple{cumsum<0>(x0), cumprod<1>(x1), logcumsumexp<-1>(x2)};
  auto loss = sum(std::get<0>(ys) * w0) + sum(std::get<1>(ys) * w1) + sum(std::get<2>(ys) * w1);
  auto [g0, g1, g2] = grad(loss, x0, x1, x2);
  auto [t0, t1, t2] = jvp(ys, x0, x1, x2, v0, v1, v1);
  auto prog = compile<TestType>(std::get<0>(ys), std::get<1>(ys), std::get<2>(ys), g0, g1, g2, t0, t1, t2);
  const json& all = fixture().at("cases");
  for (int s : {5, 3, 5}) {
    const std::string prefix = "sym_" + std::to_string(s) + "_";
    const json& c0 = all.at(prefix + "cumsum");
    const json& c1 = all.at(prefix + "cumprod");
    const json& c2 = all.at(prefix + "logcumsumexp");
    INFO("S = " << s << " on " << TestType::name);
    prog.bind("x0", floats(c0.at("inputs")[0], shape_of(c0)));
    prog.bind("x1", floats(c1.at("inputs")[0], shape_of(c1)));
    prog.bind("x2", floats(c2.at("inputs")[0], shape_of(c2)));
    prog.bind("w0", floats(c0.at("w"), shape_of(c0)));
    prog.bind("w1", floats(c1.at("w"), shape_of(c1)));
    prog.bind("v0", floats(c0.at("v")[0], shape_of(c0)));
    prog.bind("v1", floats(c1.at("v")[0], shape_of(c1)));
    prog.run();
    const auto results = outputs(prog, std::make_index_sequence<9>{});
    REQUIRE(results[0].shape() == std::vector<std::size_t>{std::size_t(s), 3});
    const json* expected[] = {&c0, &c1, &c2};
    for (std::size_t k = 0; k < 3; ++k) {
      INFO("case " << k);
      require_matches(results[k], expected[k]->at("value"), relative_tolerance);
      require_matches(results[3 + k], expected[k]->at("grad")[0], relative_tolerance);
      require_matches(results[6 + k], expected[k]->at("jvp"), relative_tolerance);
    }
  }
}

TEST_CASE("cumulative ops: labels, rank 1 at a million elements, integer running sums", "[ops][cumulative]") {
  auto x = input<"x", f32>(shape<1 << 20>);
  auto prog = compile(cumsum<0>(x));
  xt::xarray<f32> ones = xt::ones<f32>({std::size_t(1) << 20});
  prog.bind("x", ones);
  prog.run();
  CHECK(prog.describe().find("cumsum") != std::string::npos);
  const xt::xarray<f32> y = prog.output<0>();
  CHECK(y(0) == 1.0f);
  CHECK(y((1 << 20) - 1) == f32(1 << 20));  // exact: every partial sum is an integer below 2^24

  auto mask = input<"mask", i32>(shape<2, 5>);
  auto positions = compile(cumsum<1>(mask) - c<1>);  // position ids from an attention mask
  xt::xarray<i32> m = {{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}};
  positions.bind("mask", m);
  positions.run();
  const xt::xarray<i32> expected = {{0, 1, 2, 2, 2}, {0, 1, 2, 3, 4}};
  const xt::xarray<i32> got = positions.output<0>();
  CHECK(bool(got == expected));
}
