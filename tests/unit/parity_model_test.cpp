// A held-out port (issue 17), part 2: model A, a residual MLP with LayerNorm, exact GELU
// and cross-entropy trained by AdamW, written with luminal's torch.nn-named modules as a
// PyTorch user would port it. Its loss and gradients, and three AdamW steps of
// compile_train_step, against torch 2.x's (tests/fixtures/make_port_fixtures.py).
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>

#include "grad_torch_fixtures.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

struct model_a {
  nn::Linear<"fc1", 20, 32> fc1;
  nn::LayerNorm<"ln", 32> ln;
  nn::Linear<"fc2", 32, 32> fc2;
  nn::Linear<"fc3", 32, 5> fc3;

  auto loss() const {
    auto x = input<"x", f32>(shape<Batch, 20>);
    auto labels = input<"labels", i32>(shape<Batch>);
    auto h = gelu(ln(fc1(x)));
    auto residual = h + gelu(fc2(h));
    return nn::cross_entropy(fc3(residual), labels);
  }
};
}  // namespace

TEMPLATE_LIST_TEST_CASE("port: model A's loss and the gradients of its eight parameters match torch",
                        "[parity][port][torch]", test_backends) {
  model_a m;
  torch_oracle::check_case_in<TestType>(torch_oracle::port_file, "model_a", std::tuple{}, m.loss(), m.fc1.weight,
                                        m.fc1.bias, m.ln.weight, m.ln.bias, m.fc2.weight, m.fc2.bias, m.fc3.weight,
                                        m.fc3.bias);
}

TEMPLATE_LIST_TEST_CASE("port: three AdamW steps of model A match torch.optim.AdamW", "[parity][port][torch]",
                        test_backends) {
  using torch_oracle::array_from;
  using torch_oracle::number_from;
  const auto& record = torch_oracle::fixture_case(torch_oracle::port_file, "model_a_adamw");
  const auto& options = record.at("adamw");
  auto step = compile_train_step<TestType>(
      model_a{}.loss(), adamw{.lr = float(number_from(options.at("lr"))),
                              .beta1 = float(number_from(options.at("beta1"))),
                              .beta2 = float(number_from(options.at("beta2"))),
                              .eps = float(number_from(options.at("eps"))),
                              .weight_decay = float(number_from(options.at("weight_decay")))});
  tensor_store initial;
  for (const auto& item : record.at("initial").items())
    initial.set(item.key(), array_from<f32>(item.value(), "initial " + item.key()));
  step.store().assign(initial);
  step.bind("x", array_from<f32>(record.at("inputs").at("x"), "x"));
  step.bind("labels", array_from<i32>(record.at("inputs").at("labels"), "labels"));

  const auto& losses = record.at("losses");
  REQUIRE(losses.size() == 3);
  for (std::size_t k = 0; k < losses.size(); ++k) {
    INFO("step " << k + 1);
    // run() returns the loss before its update, as loss.backward(); optimizer.step() does.
    REQUIRE_THAT(step.run(), Catch::Matchers::WithinRel(number_from(losses[k]), 1e-4));
  }
  // AdamW moves every element by about lr whatever its gradient's size; 0.1 lr over three
  // steps separates a reduction order's rounding from a wrong update.
  const double lr = number_from(options.at("lr"));
  for (const auto& item : record.at("final").items()) {
    INFO("parameter " << item.key() << " after three steps");
    test::require_close(step.store().template get<f32>(item.key()), array_from<f32>(item.value(), item.key()), 1e-4,
                        0.1 * lr);
  }
}
