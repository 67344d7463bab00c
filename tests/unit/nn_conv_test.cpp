// Convolutions against PyTorch: Conv1d (stride, padding, dilation), Conv2d with dilation,
// groups and depthwise, Conv3d, and ConvTranspose2d (stride, padding, output_padding;
// groups and dilation). tests/fixtures/conv.json holds, per case, float32 inputs x,
// weight, bias and a cotangent r, torch's output y and the gradients of sum(y * r) with
// respect to x, weight and bias; make_conv_fixtures.py writes it (float64 torch, so the
// tolerance below measures luminal's float32 rounding). No torch at run time.
//
// Also: a Conv2d without dilation or groups is the graph it was before they existed (the
// im2col views and one GEMM), and groups are a batch axis of that one GEMM.
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <luminal/nn.hpp>
#include <nlohmann/json.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;
constexpr Dim Batch{"Batch"};

// A few dozen float32 products summed per element, of terms below 1 in magnitude: the
// error is a few float32 ulps of the largest term.
constexpr double relative_tolerance = 1e-5;
constexpr double absolute_tolerance = 1e-5;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "conv.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path.string() + " (regenerate it with tests/fixtures/make_conv_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

/// A tensor the script wrote: {"shape": [...], "values": [...]} (row-major).
xt::xarray<f32> tensor(const json& entry) {
  std::vector<std::size_t> shape = entry.at("shape").get<std::vector<std::size_t>>();
  xt::xarray<f32> out = xt::xarray<f32>::from_shape(shape);
  const json& values = entry.at("values");
  REQUIRE(values.size() == out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = static_cast<f32>(values[i].get<double>());
  return out;
}

/// Runs module m on the fixture case `name` (input x: [Batch, C, ...]) on backend B and
/// requires torch's output and gradients of sum(m(x) * r) for x, weight and bias.
template <class B, class Module, class X>
void require_torch_case(const std::string& name, Module m, X x) {
  const json& c = fixture().at("cases").at(name);
  INFO("case " << name << " (" << c.at("torch").get<std::string>() << ") on " << B::name);
  auto y = m(x);
  auto r = input<"r", f32>(shape_t<decltype(y)>{});
  auto [dx, dw, db] = grad(sum(y * r), x, m.weight, m.bias);
  auto prog = compile<B>(y, dx, dw, db);
  tensor_store store;
  store.set(std::string(decltype(m.weight)::name.view()), tensor(c.at("weight")));
  store.set(std::string(decltype(m.bias)::name.view()), tensor(c.at("bias")));
  REQUIRE(store.bind(prog) == 2);
  prog.bind("x", tensor(c.at("x")));
  prog.bind("r", tensor(c.at("r")));
  prog.run();
  for (auto [k, key] : {std::pair{0, "y"}, {1, "grad_x"}, {2, "grad_weight"}, {3, "grad_bias"}}) {
    INFO(key);
    const auto expected = tensor(c.at(key));
    if (k == 0) test::require_close(prog.template output<0>(), expected, relative_tolerance, absolute_tolerance);
    if (k == 1) test::require_close(prog.template output<1>(), expected, relative_tolerance, absolute_tolerance);
    if (k == 2) test::require_close(prog.template output<2>(), expected, relative_tolerance, absolute_tolerance);
    if (k == 3) test::require_close(prog.template output<3>(), expected, relative_tolerance, absolute_tolerance);
  }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("nn: Conv1d, Conv2d (dilation, groups, depthwise) and Conv3d: values and gradients as torch's",
                        "[nn][conv][torch]", test_backends) {
  SECTION("Conv1d, stride 2, padding 1, dilation 2") {
    nn::Conv1d<"c", 4, 6, 3, 2, 1, true, f32, 2> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<6, 4, 3>>);
    require_torch_case<TestType>("conv1d_stride2_pad1_dil2", conv, input<"x", f32>(shape<Batch, 4, 9>));
  }
  SECTION("Conv2d, padding 1, dilation 2") {
    nn::Conv2d<"c", 3, 4, 3, 1, 1, true, f32, 2> conv;
    require_torch_case<TestType>("conv2d_dil2", conv, input<"x", f32>(shape<Batch, 3, 7, 8>));
  }
  SECTION("Conv2d, padding 1, groups 2") {
    nn::Conv2d<"c", 4, 6, 3, 1, 1, true, f32, 1, 2> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<6, 2, 3, 3>>);
    require_torch_case<TestType>("conv2d_groups2", conv, input<"x", f32>(shape<Batch, 4, 6, 5>));
  }
  SECTION("depthwise Conv2d (groups = in_channels, 2 filters each), stride 2, padding 1") {
    nn::Conv2d<"c", 3, 6, 3, 2, 1, true, f32, 1, 3> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<6, 1, 3, 3>>);
    require_torch_case<TestType>("conv2d_depthwise_stride2", conv, input<"x", f32>(shape<Batch, 3, 7, 6>));
  }
  SECTION("Conv3d, stride 2, padding 1") {
    nn::Conv3d<"c", 2, 3, 3, 2, 1> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<3, 2, 3, 3, 3>>);
    require_torch_case<TestType>("conv3d", conv, input<"x", f32>(shape<Batch, 2, 5, 4, 5>));
  }
}

TEMPLATE_LIST_TEST_CASE("nn: ConvTranspose2d: values and gradients as torch's", "[nn][conv][torch]", test_backends) {
  SECTION("stride 2, padding 1, output_padding 1") {
    nn::ConvTranspose2d<"c", 4, 3, 3, 2, 1, 1> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<4, 3, 3, 3>>);
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv(input<"x", f32>(shape<Batch, 4, 4, 5>)))>, Shape<Batch, 3, 8, 10>>);
    require_torch_case<TestType>("conv_transpose2d_stride2_pad1_outpad1", conv, input<"x", f32>(shape<Batch, 4, 4, 5>));
  }
  SECTION("groups 2, dilation 2, output_padding 1 (beyond every window: zeros plus the bias)") {
    nn::ConvTranspose2d<"c", 4, 4, 3, 1, 0, 1, true, f32, 2, 2> conv;
    STATIC_REQUIRE(std::is_same_v<shape_t<decltype(conv.weight)>, Shape<4, 2, 3, 3>>);
    require_torch_case<TestType>("conv_transpose2d_groups2_dil2_outpad1", conv, input<"x", f32>(shape<Batch, 4, 3, 4>));
  }
}

TEST_CASE("nn: convolution graphs: one GEMM, groups as its batch axis", "[nn][conv]") {
  auto x = input<"x", f32>(shape<Batch, 4, 6, 5>);
  // Groups: one GEMM multiplies [G, Cout/G, Cin/G K K] by [N, G, Cin/G K K, Ho Wo].
  nn::Conv2d<"g", 4, 6, 3, 1, 1, true, f32, 1, 2> grouped;
  using Biased = boost::mp11::mp_first<typename decltype(grouped(x))::children>;  // the output's reshape of it
  using Product = boost::mp11::mp_first<typename Biased::children>;
  STATIC_REQUIRE(std::is_same_v<typename Product::op, MatMul>);
  STATIC_REQUIRE(std::is_same_v<shape_t<Product>, Shape<Batch, 2, 3, 30>>);
  // im2col, the GEMM, the bias: three kernels, with groups or a dilation (a step inside
  // the unfold view) as without; a transposed convolution is the GEMM and one col2im
  // loop that adds the bias.
  STATIC_REQUIRE(decltype(compile(nn::Conv2d<"p", 4, 6, 3, 1, 1>{}(x)))::kernel_count() == 3);
  STATIC_REQUIRE(decltype(compile(grouped(x)))::kernel_count() == 3);
  STATIC_REQUIRE(decltype(compile(nn::Conv2d<"d", 4, 6, 3, 1, 2, true, f32, 2>{}(x)))::kernel_count() == 3);
  STATIC_REQUIRE(decltype(compile(nn::ConvTranspose2d<"t", 4, 6, 3, 2, 1, 1>{}(x)))::kernel_count() == 2);
  // Dilation 1 and groups 1 spelled out are the same module type as the defaults.
  STATIC_REQUIRE(std::is_same_v<nn::Conv2d<"p", 4, 6, 3, 1, 1, true, f32, 1, 1>, nn::Conv2d<"p", 4, 6, 3, 1, 1>>);
  STATIC_REQUIRE(std::is_same_v<decltype(unfold<1, 3, 2, 1>(x)), decltype(unfold<1, 3, 2>(x))>);
}

TEST_CASE("fold adds unfold's windows back in place (its adjoint), with a stride and a dilation", "[ops][view][conv]") {
  auto x = input<"x", f32>(shape<2, 11>);
  auto w = unfold<1, 3, 2, 2>(x);  // w[b, i, k] = x[b, 2 i + 2 k]: 4 windows
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(w)>, Shape<2, 4, 3>>);
  auto folded = fold<1, 11, 2, 2>(w);
  auto prog = compile(w, folded);
  xt::xarray<f32> xv = test::random_array<f32>({2, 11}, 5);
  prog.bind("x", xv);
  prog.run();
  xt::xarray<double> windows = xt::zeros<double>({2, 4, 3}), back = xt::zeros<double>({2, 11});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t k = 0; k < 3; ++k) {
        windows(b, i, k) = xv(b, 2 * i + 2 * k);
        back(b, 2 * i + 2 * k) += xv(b, 2 * i + 2 * k);
      }
  test::check_exact(prog.output<0>(), windows);
  test::require_close(prog.output<1>(), back, 1e-6, 1e-6);  // float32 sums of up to 3 elements
}
