// GroupNorm, InstanceNorm1d/2d, AdaptiveAvgPool2d and BatchNorm2d against PyTorch:
// values and gradients, and BatchNorm's running statistics through three compiled SGD
// steps, in evaluation mode, in checkpoints and from a torch state_dict.
// tests/fixtures/norm.json and norm_state_dict.safetensors come from
// make_norm_fixtures.py (float64 torch on float32 inputs: the tolerances measure luminal's
// float32 rounding). No torch at run time.
#include <filesystem>
#include <fstream>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;
constexpr Dim Batch{"Batch"};

// Normalizing divides by a standard deviation, which scales float32 rounding up a little.
constexpr double rtol = 1e-4;
constexpr double atol = 1e-5;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "norm.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path.string() +
                               " (regenerate it with tests/fixtures/make_norm_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

/// A flat list of the fixture as a float32 array of `shape`.
xt::xarray<f32> floats(const json& list, std::vector<std::size_t> shape) {
  xt::xarray<f32> out = xt::xarray<f32>::from_shape(shape);
  REQUIRE(list.size() == out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out.flat(i) = static_cast<f32>(list[i].get<double>());
  return out;
}

template <class Prog, std::size_t I>
void require_output(const Prog& prog, const json& expected, double rtol_ = rtol, double atol_ = atol) {
  auto actual = prog.template output<I>();
  test::require_close(actual, floats(expected, {actual.shape().begin(), actual.shape().end()}), rtol_, atol_);
}

// ---- GroupNorm and InstanceNorm -------------------------------------------------------

nn::GroupNorm<"gn", 2, 4> group_norm;
nn::InstanceNorm2d<"in2", 3> instance_norm_2d;
nn::InstanceNorm1d<"in1", 3, 1e-5, true> instance_norm_1d;

TEMPLATE_LIST_TEST_CASE("GroupNorm and InstanceNorm match torch, values and gradients", "[nn][norm]", test_backends) {
  auto x1 = input<"gn.x", f32>(shape<2, 4, 3, 3>);
  auto r1 = input<"gn.r", f32>(shape<2, 4, 3, 3>);
  auto x2 = input<"in2.x", f32>(shape<2, 3, 4, 4>);
  auto r2 = input<"in2.r", f32>(shape<2, 3, 4, 4>);
  auto x3 = input<"in1.x", f32>(shape<2, 3, 5>);
  auto r3 = input<"in1.r", f32>(shape<2, 3, 5>);
  auto y1 = group_norm(x1);
  auto y2 = instance_norm_2d(x2);
  auto y3 = instance_norm_1d(x3);
  auto l1 = sum(y1 * r1);
  auto l3 = sum(y3 * r3);
  auto prog = compile<TestType>(y1, grad(l1, x1), grad(l1, group_norm.weight), grad(l1, group_norm.bias), y2,
                                grad(sum(y2 * r2), x2), y3, grad(l3, x3), grad(l3, instance_norm_1d.weight),
                                grad(l3, instance_norm_1d.bias));
  STATIC_REQUIRE(std::tuple_size_v<decltype(instance_norm_2d.parameters)> == 0);  // affine=False, as torch

  const json& gn = fixture()["group_norm"];
  const json& in2 = fixture()["instance_norm_2d"];
  const json& in1 = fixture()["instance_norm_1d"];
  prog.bind("gn.x", floats(gn["x"], {2, 4, 3, 3}));
  prog.bind("gn.r", floats(gn["r"], {2, 4, 3, 3}));
  prog.bind("gn.weight", floats(gn["weight"], {4}));
  prog.bind("gn.bias", floats(gn["bias"], {4}));
  prog.bind("in2.x", floats(in2["x"], {2, 3, 4, 4}));
  prog.bind("in2.r", floats(in2["r"], {2, 3, 4, 4}));
  prog.bind("in1.x", floats(in1["x"], {2, 3, 5}));
  prog.bind("in1.r", floats(in1["r"], {2, 3, 5}));
  prog.bind("in1.weight", floats(in1["weight"], {3}));
  prog.bind("in1.bias", floats(in1["bias"], {3}));
  prog.run();
  require_output<decltype(prog), 0>(prog, gn["y"]);
  require_output<decltype(prog), 1>(prog, gn["dx"]);
  require_output<decltype(prog), 2>(prog, gn["dweight"]);
  require_output<decltype(prog), 3>(prog, gn["dbias"]);
  require_output<decltype(prog), 4>(prog, in2["y"]);
  require_output<decltype(prog), 5>(prog, in2["dx"]);
  require_output<decltype(prog), 6>(prog, in1["y"]);
  require_output<decltype(prog), 7>(prog, in1["dx"]);
  require_output<decltype(prog), 8>(prog, in1["dweight"]);
  require_output<decltype(prog), 9>(prog, in1["dbias"]);

  tensor_store init;
  group_norm.initialize(init, 0);
  CHECK(init.names() == std::vector<std::string>{"gn.bias", "gn.weight"});
}

// ---- AdaptiveAvgPool2d ----------------------------------------------------------------

template <class N>
using is_matmul = std::bool_constant<node_with_op<N, MatMul>>;

TEMPLATE_LIST_TEST_CASE("AdaptiveAvgPool2d matches torch's windows, tiling or not", "[nn][pool]", test_backends) {
  auto a = input<"a", f32>(shape<2, 3, 6, 4>);
  auto b = input<"b", f32>(shape<2, 3, 7, 7>);
  auto g = input<"g", f32>(shape<2, 3, 7, 5>);
  auto pa = nn::AdaptiveAvgPool2d<3, 2>{}(a);
  auto pb = nn::AdaptiveAvgPool2d<3, 3>{}(b);
  auto pg = nn::AdaptiveAvgPool2d<1, 1>{}(g);
  auto ra = input<"ra", f32>(shape_t<decltype(pa)>{});
  auto rb = input<"rb", f32>(shape_t<decltype(pb)>{});
  auto rg = input<"rg", f32>(shape_t<decltype(pg)>{});
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(pb)>, Shape<2, 3, 3, 3>>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(pg)>, Shape<2, 3, 1, 1>>);
  auto prog = compile<TestType>(pa, grad(sum(pa * ra), a), pb, grad(sum(pb * rb), b), pg, grad(sum(pg * rg), g));
  // Where the windows tile the axes, no GEMM: a reshape and means.
  STATIC_REQUIRE(boost::mp11::mp_count_if<topo_nodes<decltype(pa)>, is_matmul>::value == 0);
  STATIC_REQUIRE(boost::mp11::mp_count_if<topo_nodes<decltype(pg)>, is_matmul>::value == 0);
  STATIC_REQUIRE(boost::mp11::mp_count_if<topo_nodes<decltype(pb)>, is_matmul>::value == 2);

  struct pool_case {
    const char *input, *weights, *name;
    std::vector<std::size_t> in_shape, out_shape;
  };
  const std::vector<pool_case> cases{{"a", "ra", "pool_6x4_to_3x2", {2, 3, 6, 4}, {2, 3, 3, 2}},
                                     {"b", "rb", "pool_7x7_to_3x3", {2, 3, 7, 7}, {2, 3, 3, 3}},
                                     {"g", "rg", "pool_7x5_to_1x1", {2, 3, 7, 5}, {2, 3, 1, 1}}};
  for (const auto& c : cases) {
    prog.bind(c.input, floats(fixture()[c.name]["x"], c.in_shape));
    prog.bind(c.weights, floats(fixture()[c.name]["r"], c.out_shape));
  }
  prog.run();
  require_output<decltype(prog), 0>(prog, fixture()["pool_6x4_to_3x2"]["y"]);
  require_output<decltype(prog), 1>(prog, fixture()["pool_6x4_to_3x2"]["dx"]);
  require_output<decltype(prog), 2>(prog, fixture()["pool_7x7_to_3x3"]["y"]);
  require_output<decltype(prog), 3>(prog, fixture()["pool_7x7_to_3x3"]["dx"]);
  require_output<decltype(prog), 4>(prog, fixture()["pool_7x5_to_1x1"]["y"]);
  require_output<decltype(prog), 5>(prog, fixture()["pool_7x5_to_1x1"]["dx"]);
}

// ---- BatchNorm2d ----------------------------------------------------------------------

nn::Conv2d<"conv", 2, 3, 3, 1, 1> conv;
nn::BatchNorm2d<"bn", 3> bn;
auto bn_x = input<"x", f32>(shape<Batch, 2, 4, 4>);
auto bn_t = input<"t", f32>(shape<Batch, 3, 4, 4>);
auto bn_train_y = bn(conv(bn_x), nn::train);
auto bn_loss = mean(square(bn_train_y - bn_t));

const std::vector<std::string> model_tensors{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                             "bn.running_var"};
const std::vector<std::size_t> conv_weight_shape{3, 2, 3, 3};

std::vector<std::size_t> shape_of(const std::string& name) {
  return name == "conv.weight" ? conv_weight_shape : std::vector<std::size_t>{3};
}

/// The fixture's model tensors (torch's names) as a tensor_store.
tensor_store model_values(const json& values) {
  tensor_store store;
  for (const auto& name : model_tensors) store.set(name, floats(values[name], shape_of(name)));
  return store;
}

template <class Step>
void require_model(const Step& step, const json& expected) {
  for (const auto& name : model_tensors) {
    INFO(name);
    test::require_close(step.store().template get<f32>(name), floats(expected[name], shape_of(name)), rtol, atol);
  }
}

TEMPLATE_LIST_TEST_CASE("BatchNorm2d in training mode: output and gradients match torch", "[nn][batch_norm]",
                        test_backends) {
  const json& bn_case = fixture()["batch_norm"];
  auto [value, dx, dw, dgamma, dbeta] = value_and_grad(bn_loss, bn_x, conv.weight, bn.weight, bn.bias);
  auto prog = compile<TestType>(bn_train_y, value, dx, dw, dgamma, dbeta);
  model_values(bn_case["initial"]).bind(prog);
  prog.bind("x", floats(bn_case["x"][0], {4, 2, 4, 4}));
  prog.bind("t", floats(bn_case["t"][0], {4, 3, 4, 4}));
  prog.run();
  require_output<decltype(prog), 0>(prog, bn_case["first"]["y"]);
  CHECK(prog.template output<1>()() == Approx(bn_case["first"]["loss"].get<double>()).epsilon(1e-5));
  require_output<decltype(prog), 2>(prog, bn_case["first"]["dx"]);
  require_output<decltype(prog), 3>(prog, bn_case["first"]["dconv_weight"]);
  require_output<decltype(prog), 4>(prog, bn_case["first"]["dbn_weight"]);
  require_output<decltype(prog), 5>(prog, bn_case["first"]["dbn_bias"]);
}

TEMPLATE_LIST_TEST_CASE("BatchNorm2d's running statistics: updated by the compiled step, read in eval mode, saved",
                        "[nn][batch_norm][train]", test_backends) {
  const json& bn_case = fixture()["batch_norm"];
  auto step = compile_train_step<TestType>(bn_loss, sgd{.lr = 0.1f, .momentum = 0.9f});
  // The buffers are the step's, beside the parameters; a data input cannot take their names.
  CHECK(step.store().contains("bn.running_mean"));
  CHECK(step.store().contains("bn.num_batches_tracked"));
  CHECK_THROWS_AS(step.bind("bn.running_var", xt::xarray<f32>(xt::ones<f32>({3}))), input_error);

  // torch's state_dict, saved by safetensors.torch (num_batches_tracked is int64 there).
  step.load((test::fixture_dir() / "norm_state_dict.safetensors").string());
  require_model(step, bn_case["initial"]);
  CHECK(step.store().template get<i32>("bn.num_batches_tracked")() == 0);

  for (int k = 0; k < 3; ++k) {
    step.bind("x", floats(bn_case["x"][k], {4, 2, 4, 4}));
    step.bind("t", floats(bn_case["t"][k], {4, 3, 4, 4}));
    CHECK(step.run() == Approx(bn_case["losses"][k].get<double>()).epsilon(1e-5));
  }
  require_model(step, bn_case["after"]);
  CHECK(step.store().template get<i32>("bn.num_batches_tracked")() == 3);

  // A step whose loss is NaN changes no buffer either.
  const auto running_var = step.store().template get<f32>("bn.running_var");
  xt::xarray<f32> nan_batch = floats(bn_case["x"][0], {4, 2, 4, 4});
  nan_batch(0, 0, 0, 0) = std::numeric_limits<f32>::quiet_NaN();
  step.bind("x", nan_batch);
  CHECK_THROWS_AS(step.run(), run_error);
  CHECK(bool(step.store().template get<f32>("bn.running_var") == running_var));
  CHECK(step.store().template get<i32>("bn.num_batches_tracked")() == 3);

  // Evaluation mode reads the running statistics from the step's store.
  const json& eval_case = bn_case["eval"];
  auto x = input<"x", f32>(shape<Batch, 2, 4, 4>);
  auto r = input<"r", f32>(shape<Batch, 3, 4, 4>);
  auto y = bn(conv(x), nn::eval);
  auto eval = compile<TestType>(y, grad(sum(y * r), x));
  step.store().bind(eval);
  eval.bind("x", floats(eval_case["x"], {4, 2, 4, 4}));
  eval.bind("r", floats(eval_case["r"], {4, 3, 4, 4}));
  eval.run();
  require_output<decltype(eval), 0>(eval, eval_case["y"]);
  require_output<decltype(eval), 1>(eval, eval_case["dx"]);

  // A checkpoint round trip: the buffers under torch's names, beside parameters and state.
  const auto path = (std::filesystem::temp_directory_path() / "luminal_nn_norm_test.safetensors").string();
  step.save(path);
  const tensor_store saved = load_safetensors(path);
  CHECK(saved.contains("bn.running_mean"));
  CHECK(saved.at("bn.num_batches_tracked").dtype == dtype_tag::i32);
  auto resumed = compile_train_step<TestType>(bn_loss, sgd{.lr = 0.1f, .momentum = 0.9f});
  resumed.load(path);
  std::filesystem::remove(path);
  CHECK(resumed.step_count() == 3);
  require_model(resumed, bn_case["after"]);
  CHECK(resumed.store().template get<i32>("bn.num_batches_tracked")() == 3);

  // A buffer is required as a parameter is.
  tensor_store partial = step.state();
  tensor_store without;
  for (const auto& [name, entry] : partial)
    if (name != "bn.running_var") without.insert(name, entry);
  without.metadata = partial.metadata;
  try {
    resumed.load_state(without);
    FAIL("load_state accepted a checkpoint without bn.running_var");
  } catch (const checkpoint_error& e) {
    CHECK(std::string(e.what()).find("'bn.running_var', a buffer of this model") != std::string::npos);
  }
}

}  // namespace
