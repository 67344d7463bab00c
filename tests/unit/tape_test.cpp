// The tape: blocks compiled once and called at run time must give the gradients of the
// fully static compile of the same model, parameters used by several calls accumulate,
// loop counts may depend on computed values, and bad calls are refused with a message.
// The 2-layer GPT is in tape_gpt_test.cpp (a heavy translation unit of its own); the
// comparison that runs on every backend (host, Kokkos, CUDA) in tape_backends_test.cpp.
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <xtensor/xview.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/tape/tape.hpp>
#include <luminal/train/train.hpp>

#include "tape_support.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

template <fixed_string P>
auto residual_layer(auto x) { return x + tanh(nn::Linear<P + ".fc", 8, 8>{}(x)); }

}  // namespace

TEST_CASE("tape: a loop whose trip count depends on computed values matches finite differences", "[tape]") {
  // x <- x + 0.5 tanh(x w^T) until the mean of x passes 2 (or 50 steps): how many steps
  // run depends on w, and d mean(x) / d w goes through exactly those steps.
  auto w = param<"w", f64>(shape<4, 4>);
  auto xd = input<"x", f64>(shape<4>);
  auto step = compile_block<"">(xd + c<0.5> * tanh(reshape(matmul(reshape(xd, shape<1, 4>), transpose(w)), shape<4>)), xd);
  auto objective = compile_block<"">(mean(xd), xd);

  auto run = [&](const tensor_store& params, int* steps, tensor_store* grads) {
    tape<> t(params);
    auto h = t.variable(xt::xarray<double>{0.5, 0.25, 0.0, 1.0});
    int n = 0;
    while (n < 50 && xt::mean(t.value<double>(h))() < 2.0) {
      h = t.call(*step, "", {{"x", h}});
      ++n;
    }
    auto value = t.call(*objective, "", {{"x", h}});
    if (grads) {
      t.backward(value);
      *grads = t.gradients();
    }
    if (steps) *steps = n;
    return t.item<double>(value);
  };
  tensor_store params;
  params.set("w", xt::xarray<double>(test::random_array<double>({4, 4}, 3, 0.1, 0.6)));
  int steps = 0;
  tensor_store grads;
  run(params, &steps, &grads);
  REQUIRE(steps > 1);
  REQUIRE(steps < 50);
  auto dw = grads.get<double>("w");
  for (std::size_t i = 0; i < 16; ++i) {
    tensor_store plus = params, minus = params;
    const double h = 1e-6;
    reinterpret_cast<double*>(plus.at("w").data.data())[i] += h;
    reinterpret_cast<double*>(minus.at("w").data.data())[i] -= h;
    int steps_plus = 0, steps_minus = 0;
    double fd = (run(plus, &steps_plus, nullptr) - run(minus, &steps_minus, nullptr)) / (2 * h);
    REQUIRE(steps_plus == steps);  // the perturbation keeps the trip count
    REQUIRE(steps_minus == steps);
    REQUIRE(dw.flat(i) == Approx(fd).epsilon(1e-5).margin(1e-8));
  }
}

TEST_CASE("tape: a value passed as two inputs of one call gets the sum of both gradients", "[tape]") {
  // The backward writes a cotangent nothing has reached in place: the second input's
  // gradient must then add to it, not write over it.
  auto x = input<"x", f64>(shape<3>);
  auto y = input<"y", f64>(shape<3>);
  auto cubed = compile_block<"">(sum(x * y * y), x, y);
  tensor_store params;
  tape<> t(params);
  xt::xarray<double> a = {1.0, -2.0, 0.5};
  auto v = t.variable(a);
  t.backward(t.call(*cubed, "", {{"x", v}, {"y", v}}));
  REQUIRE(xt::allclose(t.gradient<double>(v), 3.0 * a * a));  // y^2 + 2 x y
}

TEST_CASE("tape: a block keeps what its backward recomputes maps from, not the maps", "[tape]") {
  // The backward of y = proj(gelu(fc(x))) reads gelu(h) and gelu'(h), both maps of fc's
  // matmul: the block keeps that matmul's output besides y, and nothing of the GELU.
  auto x = input<"x", f32>(shape<Batch, 8>);
  nn::Linear<"mlp.fc", 8, 16> fc;
  nn::Linear<"mlp.proj", 16, 8> proj;
  auto y = proj(gelu(fc(x), approximate::tanh));
  auto mlp = compile_block<"mlp">(y, x);
  auto objective = compile_block<"">(mean(square(x)), x);
  using kept = std::remove_reference_t<decltype(*mlp)>::kept;
  STATIC_REQUIRE(boost::mp11::mp_size<kept>::value == 2);
  STATIC_REQUIRE(boost::mp11::mp_at_c<kept, 1>::kind == op_kind::matmul);

  tensor_store params;
  fc.initialize(params, 2);
  proj.initialize(params, 3);
  auto xv = test::random_array<float>({5, 8}, 4);
  tape<> t(params);
  auto loss = t.call(*objective, "", {{"x", t.call(*mlp, "", {{"x", t.variable(xv)}})}});
  t.backward(loss);

  auto [dfw, dfb, dpw, dpb] = grad(mean(square(y)), fc.weight, fc.bias, proj.weight, proj.bias);
  auto expected = compile(dfw, dfb, dpw, dpb);
  REQUIRE(params.bind(expected) == 4);
  expected.bind("x", xv);
  expected.run();
  test::require_same_store(t.gradients(), {{"mlp.fc.weight", expected.output<0>()},
                                           {"mlp.fc.bias", expected.output<1>()},
                                           {"mlp.proj.weight", expected.output<2>()},
                                           {"mlp.proj.bias", expected.output<3>()}});
}

TEST_CASE("tape: calls with missing or mismatched parameters and inputs are refused by name", "[tape][errors]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto layer = compile_block<"layer">(residual_layer<"layer">(x), x);
  tensor_store params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(params, 1);
  params.set("h.1.fc.weight", xt::xarray<float>(xt::zeros<float>({8, 4})));
  params.set("h.1.fc.bias", xt::xarray<float>(xt::zeros<float>({8})));
  tape<> t(params);
  auto v = t.variable(test::random_array<float>({2, 8}, 1));
  REQUIRE_THROWS_WITH(t.call(*layer, "h.7", {{"x", v}}), Catch::Contains("'h.7.fc.weight'"));
  REQUIRE_THROWS_WITH(t.call(*layer, "h.1", {{"x", v}}), Catch::Contains("[8, 4]"));
  REQUIRE_THROWS_WITH(t.call(*layer, "h.0", {{"y", v}}), Catch::Contains("needs the input 'x'"));
  REQUIRE_THROWS_WITH(t.call(*layer, "h.0", {{"x", t.constant(xt::xarray<double>(xt::zeros<double>({2, 8})))}}), Catch::Contains("f64"));
  REQUIRE(t.call_count() == 0);  // refused calls are not recorded
  auto y = t.call(*layer, "h.0", {{"x", v}});
  REQUIRE_THROWS_WITH(t.backward(y), Catch::Contains("one-element"));
  t.clear();
  REQUIRE_THROWS_WITH(t.value<float>(y), Catch::Contains("not a value of this tape"));
}

TEST_CASE("tape: a call whose run fails keeps neither the call nor the memory it took", "[tape][errors]") {
  // The forward program writes what the tape keeps straight into slots taken before it
  // runs; a gather index out of range makes the run throw after that.
  auto ids = input<"ids", i32>(shape<Batch>);
  auto x = input<"x", f32>(shape<Batch, 4>);
  auto table = param<"emb.table", f32>(shape<10, 4>);
  auto emb = compile_block<"emb">(gather(table, ids) * x, x);
  tensor_store params;
  params.set("emb.table", test::random_array<float>({10, 4}, 3));
  tape<> t(params);
  auto v = t.variable(test::random_array<float>({3, 4}, 4));
  const std::size_t held = t.held_bytes();
  REQUIRE_THROWS_AS(t.call(*emb, "", {{"ids", t.constant(xt::xarray<int>{1, 12, 2})}, {"x", v}}), run_error);
  REQUIRE(t.call_count() == 0);
  REQUIRE(t.held_bytes() == held + 3 * sizeof(int));  // the constant made for the call stays
  auto y = t.call(*emb, "", {{"ids", t.constant(xt::xarray<int>{1, 9, 2})}, {"x", v}});
  REQUIRE(t.call_count() == 1);
  xt::xarray<float> expected = xt::view(params.get<float>("emb.table"), xt::keep(1, 9, 2), xt::all()) * t.value<float>(v);
  REQUIRE(bool(t.value<float>(y) == expected));
}

TEST_CASE("tape: parameter_optimizer on tape gradients follows compile_train_step", "[tape][optimizer]") {
  // Three AdamW steps with clipping of the same model, once as one compiled training step
  // and once as tape calls plus parameter_optimizer: the parameters must agree.
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto layer = compile_block<"layer">(residual_layer<"layer">(x), x);
  auto head = compile_block<"head">(nn::cross_entropy(nn::Linear<"head", 8, 3>{}(x), labels), x);
  tensor_store params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(params, 4);
  nn::Linear<"head", 8, 3>{}.initialize(params, 5);
  auto data = test::random_array<float>({6, 8}, 9);
  xt::xarray<int> classes = {0, 1, 2, 1, 0, 2};

  auto step = compile_train_step<host, retention_policy::store_all, gradient_clipping::global_norm>(
      nn::cross_entropy(nn::Linear<"head", 8, 3>{}(residual_layer<"h.0">(x)), labels), adamw{.lr = 0.05f});
  step.max_grad_norm = 0.5;
  step.store().assign(params);
  step.bind("x", data);
  step.bind("labels", classes);

  parameter_optimizer<adamw> optimizer({.lr = 0.05f});
  optimizer.max_grad_norm = 0.5;
  tape<> t(params);
  for (int k = 0; k < 3; ++k) {
    float expected_loss = step.run();
    t.clear();
    auto h = t.call(*layer, "h.0", {{"x", t.constant(data)}});
    auto loss = t.call(*head, "", {{"x", h}, {"labels", t.constant(classes)}});
    REQUIRE(t.item<float>(loss) == Approx(expected_loss).epsilon(1e-5));
    t.backward(loss);
    optimizer.step(params, t.gradients());
    REQUIRE(t.gradients().empty());  // step() consumed them
  }
  REQUIRE(optimizer.step_count() == 3);
  tensor_store trained = step.state();
  for (const auto& name : params.names()) {
    INFO("parameter " << name);
    test::require_close(params.get<float>(name), trained.get<float>(name), 1e-4, 1e-6);
  }
  tensor_store state = optimizer.state();
  REQUIRE(state.contains("optimizer.exp_avg.h.0.fc.weight"));
  test::require_close(state.get<float>("optimizer.exp_avg_sq.head.bias"), trained.get<float>("optimizer.exp_avg_sq.head.bias"),
                      1e-4, 1e-9);
}

TEST_CASE("tape: recording again after clear() reuses memory and gives the same gradients", "[tape]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto layer = compile_block<"layer">(residual_layer<"layer">(x), x);
  auto objective = compile_block<"">(mean(square(x)), x);
  tensor_store params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(params, 1);
  tape<> t(params);
  std::vector<xt::xarray<float>> seen;
  std::size_t held = 0;
  for (int round = 0; round < 2; ++round) {
    t.clear();
    t.gradients().clear();
    auto v = t.variable(test::random_array<float>({3, 8}, 2));
    auto y = t.call(*objective, "", {{"x", t.call(*layer, "h.0", {{"x", v}})}});
    t.backward(y);
    t.backward(y);  // again: variables' gradients are recomputed, parameters' added twice
    seen.push_back(t.gradient<float>(v));
    seen.push_back(t.gradients().get<float>("h.0.fc.weight"));
    if (round == 0) held = t.held_bytes();
    else REQUIRE(t.held_bytes() == held);
  }
  test::require_close(seen[2], seen[0], 0, 0);
  test::require_close(seen[3], seen[1], 0, 0);
}
