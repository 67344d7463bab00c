// The tape: blocks compiled once and called at run time must give the gradients of the
// fully static compile of the same model, parameters used by several calls accumulate,
// loop counts may depend on computed values, and bad calls are refused with a message.
#include <luminal/nn.hpp>
#include <luminal/nn/attention.hpp>
#include <luminal/tape.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"}, Seq{"Seq"};

template <fixed_string P>
auto residual_layer(auto x) { return x + tanh(nn::Linear<P + ".fc", 8, 8>{}(x)); }

// A 2-layer GPT: token and position embeddings, two pre-norm transformer blocks, a final
// layer norm and a linear head, trained with cross-entropy on next tokens.
constexpr std::int64_t vocab = 11, width = 16, heads = 2, max_seq = 8;
auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
auto targets = input<"targets", i32>(shape<Batch, Seq>);

auto embed(auto ids) {
  return nn::PositionEmbedding<"wpe", max_seq, width>{}(nn::Embedding<"wte", vocab, width>{}(ids));
}
auto head_loss(auto h, auto labels) {
  return nn::cross_entropy(nn::Linear<"lm_head", width, vocab>{}(nn::LayerNorm<"ln_f", width>{}(h)), labels);
}

tensor_store gpt_parameters(int layers) {
  tensor_store params;
  nn::Embedding<"wte", vocab, width>{}.initialize(params, 1);
  nn::PositionEmbedding<"wpe", max_seq, width>{}.initialize(params, 2);
  nn::LayerNorm<"ln_f", width>{}.initialize(params, 3);
  nn::Linear<"lm_head", width, vocab>{}.initialize(params, 4);
  for (int i = 0; i < layers; ++i) {
    tensor_store one;
    nn::TransformerBlock<"layer", width, heads>{}.initialize(one, 10 + unsigned(i));
    for (const auto& [name, entry] : one)
      params.insert("h." + std::to_string(i) + name.substr(std::string_view("layer").size()), entry);
  }
  // LayerNorm starts at ones and zeros; perturb it so that its gradients are exercised.
  for (const auto& name : params.names()) {
    auto& e = params.at(name);
    float* v = reinterpret_cast<float*>(e.data.data());
    for (std::size_t i = 0; i < e.element_count(); ++i) v[i] += 0.05f * float(std::sin(double(i) + name.size()));
  }
  return params;
}

void require_same_store(const tensor_store& actual, const std::map<std::string, xt::xarray<float>>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (const auto& [name, value] : expected) {
    INFO("parameter " << name);
    REQUIRE(actual.contains(name));
    test::require_close(actual.get<float>(name), value, 2e-4, 2e-5);
  }
}
}  // namespace

TEST_CASE("tape: residual layers give the static compile's loss and gradients", "[tape]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto layer = compile_block<"layer">(residual_layer<"layer">(x), x);
  auto head = compile_block<"head">(nn::cross_entropy(nn::Linear<"head", 8, 3>{}(x), labels), x);
  tensor_store params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(params, 1);
  nn::Linear<"h.1.fc", 8, 8>{}.initialize(params, 2);
  nn::Linear<"head", 8, 3>{}.initialize(params, 3);
  auto data = test::random_array<float>({5, 8}, 7);
  xt::xarray<int> classes = {0, 1, 2, 1, 0};

  // h.0 is used twice: its gradients must be the sum of both calls'.
  tape<> t(params);
  auto x0 = t.variable(data);
  auto h = t.call(*layer, "h.0", {{"x", x0}});
  h = t.call(*layer, "h.1", {{"x", h}});
  h = t.call(*layer, "h.0", {{"x", h}});
  auto loss = t.call(*head, "", {{"x", h}, {"labels", t.constant(classes)}});
  t.backward(loss);
  REQUIRE(t.call_count() == 4);

  auto static_loss = nn::cross_entropy(
      nn::Linear<"head", 8, 3>{}(residual_layer<"h.0">(residual_layer<"h.1">(residual_layer<"h.0">(x)))), labels);
  using L0 = nn::Linear<"h.0.fc", 8, 8>;
  using L1 = nn::Linear<"h.1.fc", 8, 8>;
  using H = nn::Linear<"head", 8, 3>;
  auto [value, dx, dw0, db0, dw1, db1, dwh, dbh] =
      value_and_grad(static_loss, x, L0::weight, L0::bias, L1::weight, L1::bias, H::weight, H::bias);
  auto prog = compile(value, dx, dw0, db0, dw1, db1, dwh, dbh);
  prog.bind("x", data);
  prog.bind("labels", classes);
  for (const auto& name : params.names()) prog.bind(name, params.get<float>(name));
  prog.run();
  REQUIRE(t.item<float>(loss) == Approx(prog.output<0>()()).epsilon(1e-6));
  test::require_close(t.gradient<float>(x0), prog.output<1>(), 1e-5, 1e-6);
  require_same_store(t.gradients(), {{"h.0.fc.weight", prog.output<2>()}, {"h.0.fc.bias", prog.output<3>()},
                                     {"h.1.fc.weight", prog.output<4>()}, {"h.1.fc.bias", prog.output<5>()},
                                     {"head.weight", prog.output<6>()}, {"head.bias", prog.output<7>()}});
}

TEST_CASE("tape: a 2-layer GPT gives the static compile's loss and gradients", "[tape][gpt]") {
  auto x = input<"x", f32>(shape<Batch, Seq, width>);
  auto embedding = compile_block<"embed">(embed(tokens));
  auto layer = compile_block<"layer">(nn::TransformerBlock<"layer", width, heads>{}(x), x);
  auto head = compile_block<"head">(head_loss(x, targets), x);
  // The layer keeps what its backward reads; everything cheap is recomputed.
  REQUIRE(std::remove_reference_t<decltype(*layer)>::kept_count >= 5);

  const tensor_store params = gpt_parameters(2);
  auto ids = test::random_ints<int>({3, 7}, 5, 0, int(vocab) - 1);
  auto next = test::random_ints<int>({3, 7}, 6, 0, int(vocab) - 1);

  tape<> t(params);
  auto h = t.call(*embedding, "", {{"tokens", t.constant(ids)}});
  for (int i = 0; i < 2; ++i) h = t.call(*layer, "h." + std::to_string(i), {{"x", h}});
  auto loss = t.call(*head, "", {{"x", h}, {"targets", t.constant(next)}});
  t.backward(loss);

  auto model = head_loss(nn::TransformerBlock<"h.1", width, heads>{}(nn::TransformerBlock<"h.0", width, heads>{}(embed(tokens))),
                         targets);
  constexpr auto all = std::tuple_cat(nn::Embedding<"wte", vocab, width>::parameters,
                                      nn::PositionEmbedding<"wpe", max_seq, width>::parameters,
                                      nn::TransformerBlock<"h.0", width, heads>::parameters,
                                      nn::TransformerBlock<"h.1", width, heads>::parameters,
                                      nn::LayerNorm<"ln_f", width>::parameters, nn::Linear<"lm_head", width, vocab>::parameters);
  auto prog = std::apply([&](auto... p) { return std::apply([](auto... o) { return compile(o...); }, value_and_grad(model, p...)); }, all);
  prog.bind("tokens", ids);
  prog.bind("targets", next);
  for (const auto& name : params.names()) prog.bind(name, params.get<float>(name));
  prog.run();
  REQUIRE(t.item<float>(loss) == Approx(prog.output<0>()()).epsilon(1e-5));

  std::map<std::string, xt::xarray<float>> expected;
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<std::tuple_size_v<decltype(all)>>>([&](auto I) {
    using P = std::remove_cvref_t<std::tuple_element_t<I, decltype(all)>>;
    expected[std::string(P::name.view())] = prog.template output<1 + I>();
  });
  require_same_store(t.gradients(), expected);
}

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
