// Forward mode against PyTorch (issue 19), part 1: the fixture file itself and the
// networks (MLP losses, layer norm, attention); jvp() against
// torch.func.jvp and hvp() against torch.autograd.functional.hvp.
// tests/fixtures/make_forward_fixtures.py (run with a torch 2.x:
// /work/venv-torch/bin/python tests/fixtures/make_forward_fixtures.py) wrote
// tests/fixtures/forward_fixtures.json: for each named case the inputs, a random tangent
// per differentiable leaf, the output(s) and their tangents and, for a scalar output, a
// random vector per leaf and the Hessian-vector products. Each test builds the same
// expression in luminal, compiles the output, its jvp and (for a scalar) its hvp into one
// program and compares every result at float32 tolerance on every backend (see
// grad_forward_fixtures.hpp). Part 2, the softmax family, reductions, elementwise chains
// and a residual fan-out, is grad_forward_torch_ops_test.cpp.
#include <set>

#include "grad_forward_fixtures.hpp"

using namespace luminal;
using forward_oracle::check_forward;
using forward_oracle::cross_entropy;

namespace {
// Every case the script writes, each tested below; the file must hold exactly these.
const std::vector<std::string> case_names = {
    "mlp_relu_cross_entropy", "mlp_tanh_mse", "mlp_gelu_tanh_logits", "layer_norm", "softmax_cross_entropy",
    "log_softmax", "softmax_logsumexp_pair", "attention", "attention_causal", "attention_causal_output",
    "gelu_erf", "mse_regression", "logsumexp", "variance", "sigmoid_tanh", "pow_division",
    "batched_matmul_broadcast", "max_reduce", "softplus", "residual_fanout"};

constexpr double inv_sqrt8 = 0.35355339059327373;  // 1 / sqrt(8)

/// (x - mean) / sqrt(variance + 1e-5) over the last axis, as torch's layer_norm.
template <class X>
auto normalize(X x) {
  return (x - mean<-1>(x, keepdim)) * recip(sqrt(variance<-1>(x, keepdim) + c<1e-5>));
}

/// softmax(q k^T * scale) v with key position <= query position (else -1e9), for [..., S, D].
template <int S, double Scale, class Q, class K, class V>
auto causal_attention(Q q, K k, V v) {
  auto allowed = less_than(iota<1, i32>(shape<S, S>), iota<0, i32>(shape<S, S>) + c<1>);
  return matmul(softmax<-1>(where(allowed, matmul(q, transpose(k)) * c<Scale>, c<-1e9>)), v);
}
}  // namespace

TEST_CASE("forward oracle: the fixture file holds every case", "[grad][forward][torch]") {
  const auto& cases = torch_oracle::fixture_cases(torch_oracle::forward_file);
  std::set<std::string> in_file, with_hvp;
  for (const auto& item : cases.items()) {
    in_file.insert(item.key());
    if (item.value().contains("hvps")) with_hvp.insert(item.key());
  }
  const std::set<std::string> tested(case_names.begin(), case_names.end());
  REQUIRE(tested.size() == case_names.size());
  REQUIRE(tested.size() >= 15);
  REQUIRE(with_hvp.size() >= 15);  // issue 19: both jvp and hvp on at least 15 functions
  REQUIRE(in_file == tested);
}

// ---- networks -------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: mlp_relu_cross_entropy", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<8, 10>);
  auto w1 = param<"w1", f32>(shape<10, 12>);
  auto b1 = param<"b1", f32>(shape<12>);
  auto w2 = param<"w2", f32>(shape<12, 5>);
  auto b2 = param<"b2", f32>(shape<5>);
  auto labels = input<"labels", i32>(shape<8>);
  auto logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
  auto onehot = cast<f32>(equal(reshape(labels, shape<8, 1>), iota<1, i32>(shape<8, 5>)));
  check_forward<TestType>("mlp_relu_cross_entropy", cross_entropy(logits, onehot), w1, b1, w2, b2);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: mlp_tanh_mse", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 5>);
  auto w1 = param<"w1", f32>(shape<5, 8>);
  auto b1 = param<"b1", f32>(shape<8>);
  auto w2 = param<"w2", f32>(shape<8, 3>);
  auto y = input<"y", f32>(shape<6, 3>);
  check_forward<TestType>("mlp_tanh_mse", mean(square(matmul(tanh(matmul(x, w1) + b1), w2) - y)), x, w1, b1, w2);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: mlp_gelu_tanh_logits", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<8, 6>);
  auto w1 = param<"w1", f32>(shape<6, 10>);
  auto b1 = param<"b1", f32>(shape<10>);
  auto w2 = param<"w2", f32>(shape<10, 5>);
  check_forward<TestType>("mlp_gelu_tanh_logits", matmul(gelu(matmul(x, w1) + b1, approximate::tanh), w2), x, w1,
                          b1, w2);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: layer_norm", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 16>);
  auto gamma = param<"gamma", f32>(shape<16>);
  auto beta = param<"beta", f32>(shape<16>);
  auto r = input<"r", f32>(shape<6, 16>);
  check_forward<TestType>("layer_norm", sum(square(normalize(x) * gamma + beta) * r), x, gamma, beta);
}

// ---- attention ------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("forward oracle: attention", "[grad][forward][torch]", test_backends) {
  auto q = input<"q", f32>(shape<6, 8>);
  auto k = input<"k", f32>(shape<6, 8>);
  auto v = input<"v", f32>(shape<6, 8>);
  auto r = input<"r", f32>(shape<6, 8>);
  auto p = softmax<-1>(matmul(q, transpose(k)) * c<inv_sqrt8>);
  check_forward<TestType>("attention", sum(matmul(p, v) * r), q, k, v);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: attention_causal", "[grad][forward][torch]", test_backends) {
  auto q = input<"q", f32>(shape<2, 6, 4>);
  auto k = input<"k", f32>(shape<2, 6, 4>);
  auto v = input<"v", f32>(shape<2, 6, 4>);
  auto r = input<"r", f32>(shape<2, 6, 4>);
  check_forward<TestType>("attention_causal", sum(causal_attention<6, 0.5>(q, k, v) * r), q, k, v);
}

TEMPLATE_LIST_TEST_CASE("forward oracle: attention_causal_output", "[grad][forward][torch]", test_backends) {
  auto x = input<"x", f32>(shape<2, 5, 6>);
  auto wq = param<"wq", f32>(shape<6, 4>);
  auto wk = param<"wk", f32>(shape<6, 4>);
  auto wv = param<"wv", f32>(shape<6, 4>);
  check_forward<TestType>("attention_causal_output",
                          causal_attention<5, 0.5>(matmul(x, wq), matmul(x, wk), matmul(x, wv)), x, wq, wk, wv);
}
