// Forward mode against PyTorch (issue 19), part 2: the softmax family, reductions,
// elementwise chains and a residual fan-out. The fixtures, their regeneration and the
// comparison are described in grad_forward_torch_test.cpp (part 1, which also checks that
// the file holds exactly the tested cases) and grad_forward_fixtures.hpp.
#include "grad_forward_fixtures.hpp"

using namespace luminal;
using forward_oracle::check_forward;
using forward_oracle::cross_entropy;

// ---- softmax family -------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: softmax_cross_entropy", "[grad][forward][torch]", test_backends) {
  auto logits = input<"logits", f32>(shape<6, 5>);
  auto onehot = input<"onehot", f32>(shape<6, 5>);
  check_forward<TestType>("softmax_cross_entropy", cross_entropy(logits, onehot), logits);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: log_softmax", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 7>);
  check_forward<TestType>("log_softmax", log_softmax<-1>(x), x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: softmax_logsumexp_pair", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 3>);
  check_forward<TestType>("softmax_logsumexp_pair", std::tuple{softmax<0>(x), logsumexp<1>(x)}, x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: logsumexp", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4>);
  check_forward<TestType>("logsumexp", sum(logsumexp<1>(x) * r), x);
}

// ---- reductions and matmul ------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: mse_regression", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 5>);
  auto w = param<"w", f32>(shape<5, 3>);
  auto b = param<"b", f32>(shape<3>);
  auto y = input<"y", f32>(shape<6, 3>);
  check_forward<TestType>("mse_regression", mean(square(matmul(x, w) + b - y)), x, w, b);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: variance", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 6>);
  auto r = input<"r", f32>(shape<5>);
  check_forward<TestType>("variance", sum(variance<1>(x) * r) + variance(x), x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: max_reduce", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 6>);
  auto r = input<"r", f32>(shape<5>);
  check_forward<TestType>("max_reduce", sum(max<1>(x) * r) + sum(square(max<0>(x))), x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: batched_matmul_broadcast", "[grad][forward][torch]", test_backends) {
  auto a = input<"a", f32>(shape<2, 1, 3, 4>);
  auto b = input<"b", f32>(shape<3, 4, 5>);
  auto r = input<"r", f32>(shape<2, 3, 3, 5>);
  check_forward<TestType>("batched_matmul_broadcast", sum(sin(matmul(a, b)) * r), a, b);
}

// ---- elementwise chains ---------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: gelu_erf", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_forward<TestType>("gelu_erf", sum(gelu(x) * r), x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: softplus", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_forward<TestType>("softplus", sum(softplus(x) * r), x);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: sigmoid_tanh", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto y = input<"y", f32>(shape<4, 6>);
  check_forward<TestType>("sigmoid_tanh", sum(sigmoid(x) * tanh(y)), x, y);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: pow_division", "[grad][forward][torch]", test_backends) {
  auto a = input<"a", f32>(shape<4, 5>);
  auto b = input<"b", f32>(shape<4, 5>);
  auto r = input<"r", f32>(shape<4, 5>);
  check_forward<TestType>("pow_division", sum(pow(a, b) * r) + sum(b / a), a, b);
}

// ---- fan-out --------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: residual_fanout", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 8>);
  auto w = param<"w", f32>(shape<8, 8>);
  auto w2 = param<"w2", f32>(shape<8, 3>);
  auto h = x + tanh(matmul(x, w));
  check_forward<TestType>("residual_fanout", sum(h * h) + sum(sigmoid(matmul(h, w2))), x, w, w2);
}
