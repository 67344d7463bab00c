// The tape on every test backend: residual layers recorded as block calls (one parameter
// set used twice) give the loss and gradients of the fully static compile.
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/tape/tape.hpp>

#include "tape_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

template <fixed_string P>
auto residual_layer(auto x) { return x + tanh(nn::Linear<P + ".fc", 8, 8>{}(x)); }
}  // namespace

TEMPLATE_LIST_TEST_CASE("tape: residual layers give the static compile's loss and gradients", "[tape]", test_backends) {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto layer = compile_block<"layer", TestType>(residual_layer<"layer">(x), x);
  auto head = compile_block<"head", TestType>(nn::cross_entropy(nn::Linear<"head", 8, 3>{}(x), labels), x);
  tensor_store params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(params, 1);
  nn::Linear<"h.1.fc", 8, 8>{}.initialize(params, 2);
  nn::Linear<"head", 8, 3>{}.initialize(params, 3);
  auto data = test::random_array<float>({5, 8}, 7);
  xt::xarray<int> classes = {0, 1, 2, 1, 0};

  // h.0 is used twice: its gradients must be the sum of both calls'.
  tape<TestType> t(params);
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
  auto prog = compile<TestType>(value, dx, dw0, db0, dw1, db1, dwh, dbh);
  prog.bind("x", data);
  prog.bind("labels", classes);
  for (const auto& name : params.names()) prog.bind(name, params.get<float>(name));
  prog.run();
  REQUIRE(t.template item<float>(loss) == Approx(prog.template output<0>()()).epsilon(1e-6));
  test::require_close(t.template gradient<float>(x0), prog.template output<1>(), 1e-5, 1e-6);
  test::require_same_store(t.gradients(), {{"h.0.fc.weight", prog.template output<2>()},
                                           {"h.0.fc.bias", prog.template output<3>()},
                                           {"h.1.fc.weight", prog.template output<4>()},
                                           {"h.1.fc.bias", prog.template output<5>()},
                                           {"head.weight", prog.template output<6>()},
                                           {"head.bias", prog.template output<7>()}});
}
