// torch.nn.functional's activations that luminal writes as composites (ops/composite.hpp):
// elu, selu, celu, mish, hardsigmoid, hardswish, relu6, hardtanh, logsigmoid, softsign,
// tanhshrink, against PyTorch. tests/fixtures/activations.json holds, for 41 float32
// inputs (the kinks exactly, points beside them, +-30, +-100, +-1000), torch's f(x) and
// the gradient of sum(f(x) * w); make_activation_fixtures.py writes it (float64 torch, so
// the tolerance below measures luminal's float32 rounding). No torch at run time.
//
// All cases are one program per backend, each activation on a leaf of its own: one
// compile instead of fourteen keeps this file's compile time down.
#include <cmath>
#include <fstream>
#include <limits>
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

constexpr std::size_t points = 41;  // the fixture's inputs
// float32 results against the true values. On the host, luminal's worst error here is half
// of 1e-6 relative plus 1e-7 absolute (0.9 of it on 2001 points in [-25, 25]; float32
// torch's is a third), so twice that. A GPU's exp2, expm1 and division round
// differently: test_support's float32 tolerance there.
#if defined(LUMINAL_TEST_CUDA) || defined(LUMINAL_TEST_KOKKOS_DEVICE)
constexpr double relative_tolerance = test::rtol_of<f32>;
constexpr double absolute_tolerance = test::atol_of<f32>;
#else
constexpr double relative_tolerance = 2e-6;
constexpr double absolute_tolerance = 2e-7;
#endif

/// The fixture cases, in the order of the program's outputs below.
const std::vector<std::string> case_names{
    "elu",      "elu_alpha_0.5", "selu",     "celu",            "celu_alpha_2", "mish",     "hardsigmoid",
    "hardswish", "relu6",        "hardtanh", "hardtanh_-2_0.5", "logsigmoid",   "softsign", "tanhshrink"};

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "activations.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path.string() +
                               " (regenerate it with tests/fixtures/make_activation_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

/// A list the script wrote: numbers, or "inf", "-inf", "nan" as strings.
xt::xarray<f32> floats(const json& list) {
  REQUIRE(list.size() == points);
  xt::xarray<f32> out = xt::xarray<f32>::from_shape({points});
  for (std::size_t i = 0; i < points; ++i)
    out(i) = static_cast<f32>(list[i].is_string() ? std::stod(list[i].get<std::string>()) : list[i].get<double>());
  return out;
}

template <class B>
auto activations_program() {
  auto w = input<"w", f32>(shape<points>);
  auto x0 = input<"elu", f32>(shape<points>);
  auto x1 = input<"elu_alpha_0.5", f32>(shape<points>);
  auto x2 = input<"selu", f32>(shape<points>);
  auto x3 = input<"celu", f32>(shape<points>);
  auto x4 = input<"celu_alpha_2", f32>(shape<points>);
  auto x5 = input<"mish", f32>(shape<points>);
  auto x6 = input<"hardsigmoid", f32>(shape<points>);
  auto x7 = input<"hardswish", f32>(shape<points>);
  auto x8 = input<"relu6", f32>(shape<points>);
  auto x9 = input<"hardtanh", f32>(shape<points>);
  auto x10 = input<"hardtanh_-2_0.5", f32>(shape<points>);
  auto x11 = input<"logsigmoid", f32>(shape<points>);
  auto x12 = input<"softsign", f32>(shape<points>);
  auto x13 = input<"tanhshrink", f32>(shape<points>);
  auto y0 = elu(x0);
  auto y1 = elu<0.5>(x1);
  auto y2 = selu(x2);
  auto y3 = celu(x3);
  auto y4 = celu<2.0>(x4);
  auto y5 = mish(x5);
  auto y6 = hardsigmoid(x6);
  auto y7 = hardswish(x7);
  auto y8 = relu6(x8);
  auto y9 = hardtanh(x9);
  auto y10 = hardtanh<-2.0, 0.5>(x10);
  auto y11 = logsigmoid(x11);
  auto y12 = softsign(x12);
  auto y13 = tanhshrink(x13);
  // Each leaf is seen by one term only, so d loss / d x_k is activation k's gradient.
  auto loss = sum(y0 * w) + sum(y1 * w) + sum(y2 * w) + sum(y3 * w) + sum(y4 * w) + sum(y5 * w) + sum(y6 * w) +
              sum(y7 * w) + sum(y8 * w) + sum(y9 * w) + sum(y10 * w) + sum(y11 * w) + sum(y12 * w) + sum(y13 * w);
  auto grads = grad(loss, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13);
  return std::apply(
      [&](auto... g) {
        return compile<B>(y0, y1, y2, y3, y4, y5, y6, y7, y8, y9, y10, y11, y12, y13, g...);
      },
      grads);
}

/// Output k (k < 14: value of case k, else the gradient of case k - 14) as a vector.
template <std::size_t... K, class Program>
std::vector<xt::xarray<f32>> outputs(Program& prog, std::index_sequence<K...>) {
  return {xt::xarray<f32>(prog.template output<K>())...};
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("activations elu selu celu mish hardsigmoid hardswish relu6 hardtanh logsigmoid softsign "
                        "tanhshrink: values and gradients as torch's",
                        "[ops][composite][torch]", test_backends) {
  const json& data = fixture();
  REQUIRE(data.at("cases").size() == case_names.size());
  auto prog = activations_program<TestType>();
  const auto x = floats(data.at("inputs"));
  prog.bind("w", floats(data.at("weights")));
  for (const auto& name : case_names) prog.bind(name, x);
  prog.run();
  const auto results = outputs(prog, std::make_index_sequence<28>{});
  for (std::size_t k = 0; k < case_names.size(); ++k) {
    const json& expected = data.at("cases").at(case_names[k]);
    INFO("activation " << case_names[k] << " (torch: " << expected.at("torch").get<std::string>() << ") on "
                       << TestType::name);
    {
      INFO("the value");
      test::require_close(results[k], floats(expected.at("value")), relative_tolerance, absolute_tolerance);
    }
    {
      INFO("the gradient of sum(f(x) * w)");
      test::require_close(results[k + case_names.size()], floats(expected.at("grad")), relative_tolerance, absolute_tolerance);
    }
  }

  SECTION("NaN in, NaN out") {
    auto with_nan = x;
    with_nan(0) = std::numeric_limits<f32>::quiet_NaN();
    for (const auto& name : case_names) prog.bind(name, with_nan);
    prog.run();
    const auto again = outputs(prog, std::make_index_sequence<14>{});
    for (std::size_t k = 0; k < case_names.size(); ++k) {
      INFO("activation " << case_names[k]);
      CHECK(std::isnan(again[k](0)));
      CHECK(again[k](1) == results[k](1));  // its neighbours are untouched
    }
  }
}

TEST_CASE("activations fuse into the elementwise epilogue of a matmul", "[ops][composite][plan]") {
  auto x = input<"x", f32>(shape<4, 8>);
  auto w = param<"w", f32>(shape<8, 16>);
  auto b = param<"b", f32>(shape<16>);
  // matmul, then bias and the activation in one kernel, as relu's (program_test.cpp).
  STATIC_REQUIRE(decltype(compile(hardswish(matmul(x, w) + b)))::kernel_count() == 2);
  STATIC_REQUIRE(decltype(compile(mish(matmul(x, w) + b)))::kernel_count() == 2);
  STATIC_REQUIRE(decltype(compile(selu(matmul(x, w) + b)))::kernel_count() == 2);
  STATIC_REQUIRE(decltype(compile(logsigmoid(matmul(x, w) + b)))::kernel_count() == 2);
}

TEST_CASE("sigmoid, tanh and silu keep finite gradients far out on the negative side, as torch's",
          "[ops][composite]") {
  // e^-x overflows float32 below -88: the reciprocal's gradient was inf * 0 = NaN there.
  auto x = input<"x", f32>(shape<8>);
  auto loss = sum(sigmoid(x)) + sum(tanh(x)) + sum(silu(x));
  auto prog = compile(sigmoid(x), tanh(x), silu(x), grad(loss, x));
  const std::vector<double> at{-1000.0, -100.0, -88.5, -50.0, -1.0, 0.0, 1.0, 100.0};
  xt::xarray<f32> values = xt::zeros<f32>({at.size()});
  for (std::size_t i = 0; i < at.size(); ++i) values(i) = f32(at[i]);
  prog.bind("x", values);
  prog.run();
  const xt::xarray<f32> s = prog.output<0>(), t = prog.output<1>(), u = prog.output<2>(), g = prog.output<3>();
  for (std::size_t i = 0; i < at.size(); ++i) {
    INFO("x = " << at[i]);
    const double sd = 1.0 / (1.0 + std::exp(-at[i])), td = std::tanh(at[i]);
    const double derivative = sd * (1 - sd) + (1 - td * td) + sd + at[i] * sd * (1 - sd);
    CHECK(std::abs(s(i) - sd) <= 1e-6);
    CHECK(std::abs(t(i) - td) <= 1e-6);
    CHECK(std::abs(u(i) - at[i] * sd) <= 1e-6 * std::max(1.0, std::abs(at[i])));
    REQUIRE(std::isfinite(g(i)));
    CHECK(std::abs(g(i) - derivative) <= 1e-5);
  }
}
