// autocast<bf16> and autocast<f16> (ops/autocast.hpp) against PyTorch: the loss and the
// f32 parameters' gradients of a small model with linear layers and attention's batched
// products, against the same model written in torch with explicit casts (luminal's
// semantics: close to each element's rounding) and against torch.autocast itself (which
// also rounds the elementwise work in between: close, not equal); and a training step of
// the rewritten loss, whose parameters and optimizer state stay f32 (master weights).
// tests/fixtures/autocast.json comes from make_autocast_fixtures.py; no torch at run time.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <luminal/ops/autocast.hpp>
#include <luminal/nn/linear.hpp>
#include <luminal/nn/losses.hpp>
#include <luminal/train/train.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "autocast.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string() + " (tests/fixtures/make_autocast_fixtures.py writes it)");
    return json::parse(in);
  }();
  return data;
}

std::vector<float> floats(const json& list) { return list.get<std::vector<float>>(); }

template <class H>
constexpr const char* name_of() {
  return std::is_same_v<H, bf16> ? "bf16" : std::is_same_v<H, f16> ? "f16" : "f32";
}

constexpr nn::Linear<"fc1", 16, 32> fc1{};
constexpr nn::Linear<"fc2", 32, 4> fc2{};
constexpr auto x = input<"x", f32>(shape<2, 8, 16>);
constexpr auto labels = input<"labels", i32>(shape<2, 8>);

constexpr auto model_loss() {
  auto h = gelu(fc1(x));
  auto att = softmax<-1>(matmul(h, transpose(h)) * 0.25_c);
  return nn::cross_entropy(fc2(matmul(att, h)), labels);
}

const char* const parameter_names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

template <class Program>
void bind_inputs(Program& prog, bool with_parameters) {
  const json& data = fixture();
  const auto xs = floats(data.at("x"));
  const auto ls = data.at("labels").get<std::vector<std::int32_t>>();
  prog.bind("x", xs.data(), std::vector<index_t>{2, 8, 16});
  prog.bind("labels", ls.data(), std::vector<index_t>{2, 8});
  if (with_parameters) {
    const std::vector<index_t> shapes[] = {{32, 16}, {32}, {4, 32}, {4}};
    for (int k = 0; k < 4; ++k) {
      const auto values = floats(data.at(parameter_names[k]));
      prog.bind(parameter_names[k], values.data(), shapes[k]);
    }
  }
}

template <class B, class H>
auto gradient_program() {
  auto loss = autocast<H>(model_loss());
  auto [gw1, gb1, gw2, gb2] = grad(loss, fc1.weight, fc1.bias, fc2.weight, fc2.bias);
  return compile<B>(loss, gw1, gb1, gw2, gb2);
}

/// Largest |got - want| over the elements, relative to the largest |want|.
double relative_error(const xt::xarray<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(double(got.data()[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return worst / scale;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("autocast: matmuls in bf16 and f16 give torch's loss and f32 gradients", "[autocast][half][grad][torch]",
                        test_backends) {
  auto check = [&]<class H>(H) {
    INFO(name_of<H>() << " on " << TestType::name);
    const json& expected = fixture().at(name_of<H>());
    auto prog = gradient_program<TestType, H>();
    bind_inputs(prog, true);
    prog.run();
    // Each matmul's f32 sum runs in another order than torch's and may round to the other
    // neighbour in the half type: a few units of its last place, relative to the largest.
    const double unit = std::is_same_v<H, bf16> ? 0x1p-8 : 0x1p-11;
    const double loss = prog.template output<0>()(), f32_loss = fixture().at("f32").at("loss").get<double>();
    CHECK(std::abs(loss - expected.at("cast").at("loss").get<double>()) <= 4 * unit * f32_loss);
    CHECK(std::abs(loss - expected.at("autocast").at("loss").get<double>()) <= 8 * unit * f32_loss);
    // The half type's rounding shows: the loss is not f32's bit for bit.
    CHECK(float(loss) != float(f32_loss));
    auto gradients = [&](auto I, const char* name) {
      INFO(name);
      const xt::xarray<float> got = prog.template output<decltype(I)::value>();
      const double to_cast = relative_error(got, floats(expected.at("cast").at(std::string("grad.") + name)));
      const double to_autocast = relative_error(got, floats(expected.at("autocast").at(std::string("grad.") + name)));
      const double to_f32 = relative_error(got, floats(fixture().at("f32").at(std::string("grad.") + name)));
      INFO("relative error against the casts " << to_cast << ", torch.autocast " << to_autocast << ", f32 " << to_f32);
      CHECK(to_cast <= 8 * unit);
      CHECK(to_autocast <= 32 * unit);
      CHECK(to_f32 > 0);  // computed in the half type, not in f32
    };
    gradients(std::integral_constant<int, 1>{}, "fc1.weight");
    gradients(std::integral_constant<int, 2>{}, "fc1.bias");
    gradients(std::integral_constant<int, 3>{}, "fc2.weight");
    gradients(std::integral_constant<int, 4>{}, "fc2.bias");
  };
  check(bf16{});
  check(f16{});
}

TEST_CASE("autocast: the graph's matmuls take half operands, and nothing else changes", "[autocast][half]") {
  auto y = matmul(x, transpose(fc1.weight));
  using Y = decltype(autocast<bf16>(y));
  STATIC_REQUIRE(std::is_same_v<value_t<Y>, f32>);
  using Product = boost::mp11::mp_first<typename Y::children>;  // under the widening cast
  STATIC_REQUIRE(Product::kind == op_kind::matmul);
  STATIC_REQUIRE(std::is_same_v<value_t<Product>, bf16>);
  // The cast sits under the transpose: the weight is rounded at its own extents.
  using Weight = boost::mp11::mp_second<typename Product::children>;
  STATIC_REQUIRE(Weight::kind == op_kind::view);
  STATIC_REQUIRE(std::is_same_v<value_t<Weight>, bf16>);
  // A graph without f32 matmuls is itself; autocast<f32> changes nothing.
  auto z = exp(x) + 1.0_c;
  STATIC_REQUIRE(std::is_same_v<decltype(autocast<bf16>(z)), decltype(z)>);
  STATIC_REQUIRE(std::is_same_v<decltype(autocast<f32>(y)), decltype(y)>);
  // A product read by another matmul is not rounded twice: cast<bf16>(cast<f32>(p)) is p.
  auto two = autocast<bf16>(matmul(y, fc1.weight));
  using Inner = boost::mp11::mp_first<typename boost::mp11::mp_first<typename decltype(two)::children>::children>;
  STATIC_REQUIRE(Inner::kind == op_kind::matmul);
}

TEST_CASE("autocast: a training step keeps f32 master weights and learns as the f32 step does", "[autocast][half][train]") {
  auto f32_step = compile_train_step(model_loss(), adamw{.lr = 1e-2f});
  auto bf16_step = compile_train_step(autocast<bf16>(model_loss()), adamw{.lr = 1e-2f});
  tensor_store initial;
  const std::vector<std::size_t> shapes[] = {{32, 16}, {32}, {4, 32}, {4}};
  for (int k = 0; k < 4; ++k)
    initial.set(parameter_names[k], xt::xarray<float>(xt::adapt(floats(fixture().at(parameter_names[k])), shapes[k])));
  f32_step.store().assign(initial);
  bf16_step.store().assign(initial);
  for (const auto& [name, tensor] : bf16_step.store()) {
    INFO(name);
    CHECK(tensor.dtype == dtype_tag::f32);  // parameters and AdamW's moments
  }
  bind_inputs(f32_step, false);
  bind_inputs(bf16_step, false);
  float first = 0, last_f32 = 0, last_bf16 = 0;
  for (int step = 0; step < 40; ++step) {
    last_f32 = f32_step.run();
    last_bf16 = bf16_step.run();
    if (step == 0) first = last_f32;
  }
  INFO("loss " << first << " -> f32 " << last_f32 << ", bf16 " << last_bf16);
  CHECK(last_f32 < 0.5f * first);
  CHECK(std::abs(last_bf16 - last_f32) <= 0.05f * first);
  // Updates smaller than a bf16 unit of the weights still land in the f32 masters.
  const auto w = bf16_step.store().to_tensors().at("fc1.weight");
  CHECK(w.dtype == dtype_tag::f32);
}

TEST_CASE("autocast<f16> with dynamic loss scaling: overflowing steps are skipped and the scale backs off",
          "[autocast][half][train][loss-scale]") {
  tensor_store initial;
  const std::vector<std::size_t> shapes[] = {{32, 16}, {32}, {4, 32}, {4}};
  for (int k = 0; k < 4; ++k)
    initial.set(parameter_names[k], xt::xarray<float>(xt::adapt(floats(fixture().at(parameter_names[k])), shapes[k])));
  auto f32_step = compile_train_step(model_loss(), adamw{.lr = 1e-2f});
  // 2^40: every cotangent that reaches an f16 matmul is far past f16's largest, 65504.
  auto step = compile_train_step(autocast<f16>(model_loss()), adamw{.lr = 1e-2f},
                                 dynamic_loss_scale{.scale = 0x1p40, .growth_interval = 5});
  f32_step.store().assign(initial);
  step.store().assign(initial);
  bind_inputs(f32_step, false);
  bind_inputs(step, false);
  const float first = step.run();
  CHECK(std::isfinite(first));
  CHECK(step.step_count() == 0);  // skipped: nothing was updated
  CHECK(step.loss_scaling().skipped_steps == 1);
  CHECK(step.loss_scaling().scale == 0x1p39);
  const auto unchanged = step.store().to_tensors();
  CHECK(unchanged.at("fc1.weight").data == initial.at("fc1.weight").data);
  for (const auto& [name, tensor] : unchanged)
    if (name.starts_with("optimizer."))  // AdamW's moments are still zero
      CHECK(std::all_of(tensor.data.begin(), tensor.data.end(), [](std::byte b) { return b == std::byte{0}; }));
  // The scale falls until the gradients fit, then the steps apply and learn as f32's do.
  float last = first, last_f32 = 0;
  int runs = 1;
  while (step.step_count() < 40 && runs < 200) {
    last = step.run();
    ++runs;
  }
  for (int k = 0; k < 40; ++k) last_f32 = f32_step.run();
  const auto& scaling = step.loss_scaling();
  INFO("skipped " << scaling.skipped_steps << ", scale " << scaling.scale << ", loss " << first << " -> " << last
                  << " (f32 " << last_f32 << ")");
  CHECK(step.step_count() == 40);
  CHECK(scaling.skipped_steps == runs - 40);
  CHECK(scaling.skipped_steps >= 20);  // 2^40 down to where f16 holds the cotangents
  CHECK(scaling.scale < 0x1p20);
  CHECK(std::abs(last - last_f32) <= 0.05f * first);
  // Grown after growth_interval good steps: the last overflow was at most 5 steps before a doubling.
  CHECK(scaling.good_steps < 5);

  // The scale travels with the checkpoint.
  const tensor_store saved = step.state();
  REQUIRE(saved.metadata.contains("luminal.loss_scale"));
  auto resumed = compile_train_step(autocast<f16>(model_loss()), adamw{.lr = 1e-2f}, dynamic_loss_scale{});
  resumed.load_state(saved);
  CHECK(resumed.loss_scaling().scale == scaling.scale);
  CHECK(resumed.loss_scaling().good_steps == scaling.good_steps);
  tensor_store corrupt = saved;
  corrupt.metadata["luminal.loss_scale"] = "-3";
  CHECK_THROWS_WITH(resumed.load_state(corrupt), Catch::Contains("loss scale '-3'"));
}
