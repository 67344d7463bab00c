// Gradients against PyTorch autograd, part 3: elementwise ops, at ties and kinks (max,
// min, clamp, abs) and on their domains (pow, division, softplus, GELU). The fixtures,
// their regeneration and the comparison are described in grad_torch_fixtures.hpp and
// grad_torch_test.cpp. (A file of its own: with the views and reductions of
// grad_torch_ops_test.cpp, one file needed over 3 GB of compiler memory.)
#include "grad_torch_fixtures.hpp"

using namespace luminal;
using torch_oracle::check_case;

// ---- elementwise -------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("torch oracle: elementwise_max_ties", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto b = input<"b", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4, 5>);
  check_case<TestType>("elementwise_max_ties", sum(max(a, b) * r), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: elementwise_min_ties", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto b = input<"b", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4, 5>);
  check_case<TestType>("elementwise_min_ties", sum(min(a, b) * r), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: softplus", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case<TestType>("softplus", sum(softplus(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: pow_positive_base", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto b = input<"b", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4, 5>);
  check_case<TestType>("pow_positive_base", sum(pow(a, b) * r) + sum(pow(a, c<3>)), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: division", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto b = input<"b", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4, 5>);
  check_case<TestType>("division", sum(a / b * r) + sum(c<1> / b) + sum(a / c<4>), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: sigmoid_tanh", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto y = input<"y", f32>(shape<4, 6>);
  check_case<TestType>("sigmoid_tanh", sum(sigmoid(x) * tanh(y)), x, y);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: gelu_tanh", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case<TestType>("gelu_tanh", sum(gelu(x, approximate::tanh) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: leaky_relu", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case<TestType>("leaky_relu", sum(leaky_relu<0.1>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: clamp", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  auto y = clamp<-0.5, 0.5>(x);
  check_case<TestType>("clamp", sum(y * r) + sum(y * y), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: abs_square", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case<TestType>("abs_square", sum(abs(x) * r + square(x)), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: elementwise_primitives", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto x = input<"x", f32>(shape<4, 5>);
  auto loss = sum(sqrt(a) * sin(x) + exp(x) * log(a) + exp2(x) * log2(a) + recip(a));
  check_case<TestType>("elementwise_primitives", loss, a, x);
}
