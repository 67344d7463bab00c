// Gradients against PyTorch autograd, part 1: the fixture file itself and the networks
// (MLPs with cross-entropy, layer norm, attention, a pre-norm attention block, residual
// fan-out).
// tests/fixtures/make_grad_fixtures.py (run with Debian's python3-torch:
// /usr/bin/python3 tests/fixtures/make_grad_fixtures.py) wrote
// tests/fixtures/grad_fixtures.json: for each named case the float32 inputs, the scalar
// loss and torch's gradient of the loss with respect to each differentiable input. Each
// test builds the same expression in luminal, compiles the loss with its gradients into
// one program and compares every output at float32 tolerance, on every backend (see
// grad_torch_fixtures.hpp). Parts 2 and 3, the single ops, are grad_torch_ops_test.cpp and
// grad_torch_elementwise_test.cpp.
#include <set>

#include "grad_torch_fixtures.hpp"

using namespace luminal;
using torch_oracle::check_case;

namespace {
// Every case the script writes, each tested below; the file must hold exactly these.
const std::vector<std::string> case_names = {
    "mlp_relu_cross_entropy", "mlp_gelu_cross_entropy_onehot", "mse_regression", "layer_norm", "attention",
    "attention_causal", "attention_multihead", "prenorm_attention_block", "residual_fanout", "slice_pad",
    "pad_concat_value", "max_reduce_ties", "max_reduce_ties_keepdim_fanout", "max_reduce_all_ties",
    "max_reduce_two_axes", "elementwise_max_ties", "elementwise_min_ties", "softplus", "log_softmax",
    "softmax_axis0", "logsumexp", "variance", "mean_multi_axes", "pow_positive_base", "division", "sigmoid_tanh",
    "gelu_tanh", "leaky_relu", "clamp", "abs_square", "elementwise_primitives", "batched_matmul_broadcast",
    "matmul_batched_by_matrix", "transpose_permute_chain", "expand_sum", "broadcast_binary", "gather_embedding",
    "where_mask", "stop_gradient", "sum_of_shared_subexpression"};

constexpr double inv_sqrt8 = 0.35355339059327373;  // 1 / sqrt(8)

/// Mean softmax cross-entropy of logits [B, C] against a one-hot [B, C].
template <class L, class O>
auto cross_entropy(L logits, O onehot) {
  return neg(mean(sum<-1>(onehot * log_softmax<-1>(logits))));
}

/// (x - mean) / sqrt(variance + 1e-5) over the last axis, as torch's layer_norm.
template <class X>
auto normalize(X x) {
  return (x - mean<-1>(x, keepdim)) * recip(sqrt(variance<-1>(x, keepdim) + c<1e-5>));
}

/// Key position <= query position, for scores [..., S, S].
template <int S>
auto causal() {
  return less_than(iota<1, i32>(shape<S, S>), iota<0, i32>(shape<S, S>) + c<1>);
}
}  // namespace

TEST_CASE("torch oracle: the fixture file holds every case", "[grad][torch]") {
  const auto& cases = torch_oracle::fixture_cases(torch_oracle::grad_file);
  std::set<std::string> in_file;
  for (const auto& item : cases.items()) in_file.insert(item.key());
  const std::set<std::string> tested(case_names.begin(), case_names.end());
  REQUIRE(tested.size() == case_names.size());
  REQUIRE(tested.size() >= 30);
  REQUIRE(in_file == tested);
}

// ---- networks ------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("torch oracle: mlp_relu_cross_entropy", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<8, 16>);
  auto w1 = param<"w1", f32>(shape<16, 12>);
  auto b1 = param<"b1", f32>(shape<12>);
  auto w2 = param<"w2", f32>(shape<12, 5>);
  auto b2 = param<"b2", f32>(shape<5>);
  auto labels = input<"labels", i32>(shape<8>);
  auto logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
  auto onehot = cast<f32>(equal(reshape(labels, shape<8, 1>), iota<1, i32>(shape<8, 5>)));
  check_case<TestType>("mlp_relu_cross_entropy", cross_entropy(logits, onehot), x, w1, b1, w2, b2);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: mlp_gelu_cross_entropy_onehot", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<8, 16>);
  auto w1 = param<"w1", f32>(shape<16, 12>);
  auto b1 = param<"b1", f32>(shape<12>);
  auto w2 = param<"w2", f32>(shape<12, 5>);
  auto b2 = param<"b2", f32>(shape<5>);
  auto onehot = input<"onehot", f32>(shape<8, 5>);
  auto logits = matmul(gelu(matmul(x, w1) + b1, approximate::tanh), w2) + b2;
  check_case<TestType>("mlp_gelu_cross_entropy_onehot", cross_entropy(logits, onehot), x, w1, b1, w2, b2);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: mse_regression", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 5>);
  auto w = param<"w", f32>(shape<5, 3>);
  auto b = param<"b", f32>(shape<3>);
  auto y = input<"y", f32>(shape<6, 3>);
  check_case<TestType>("mse_regression", mean(square(matmul(x, w) + b - y)), x, w, b, y);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: layer_norm", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 16>);
  auto gamma = param<"gamma", f32>(shape<16>);
  auto beta = param<"beta", f32>(shape<16>);
  auto r = input<"r", f32>(shape<6, 16>);
  check_case<TestType>("layer_norm", sum((normalize(x) * gamma + beta) * r), x, gamma, beta, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: attention", "[grad][torch]", test_backends) {
  auto q = input<"q", f32>(shape<6, 8>);
  auto k = input<"k", f32>(shape<6, 8>);
  auto v = input<"v", f32>(shape<6, 8>);
  auto r = input<"r", f32>(shape<6, 8>);
  auto p = softmax<-1>(matmul(q, transpose(k)) * c<inv_sqrt8>);
  check_case<TestType>("attention", sum(matmul(p, v) * r), q, k, v, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: attention_causal", "[grad][torch]", test_backends) {
  auto q = input<"q", f32>(shape<2, 6, 8>);
  auto k = input<"k", f32>(shape<2, 6, 8>);
  auto v = input<"v", f32>(shape<2, 6, 8>);
  auto r = input<"r", f32>(shape<2, 6, 8>);
  // The [6, 6] mask broadcasts over the batch.
  auto p = softmax<-1>(where(causal<6>(), matmul(q, transpose(k)) * c<inv_sqrt8>, c<-1e9>));
  check_case<TestType>("attention_causal", sum(matmul(p, v) * r), q, k, v, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: attention_multihead", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<2, 5, 8>);
  auto wq = param<"wq", f32>(shape<8, 8>);
  auto wk = param<"wk", f32>(shape<8, 8>);
  auto wv = param<"wv", f32>(shape<8, 8>);
  auto wo = param<"wo", f32>(shape<8, 8>);
  auto r = input<"r", f32>(shape<2, 5, 8>);
  auto heads = [](auto y) { return permute<0, 2, 1, 3>(reshape(y, shape<2, 5, 2, 4>)); };
  auto q = heads(matmul(x, wq));
  auto k = heads(matmul(x, wk));
  auto v = heads(matmul(x, wv));
  auto p = softmax<-1>(where(causal<5>(), matmul(q, transpose(k)) * c<0.5>, c<-1e9>));
  auto merged = reshape(permute<0, 2, 1, 3>(matmul(p, v)), shape<2, 5, 8>);
  check_case<TestType>("attention_multihead", sum(matmul(merged, wo) * r), x, wq, wk, wv, wo, r);
}

// Found a planner bug: the GEMM reading k through the stored (retained) transpose(k)
// did not extend the liveness of k's buffer, which a later kernel then reused.
TEMPLATE_LIST_TEST_CASE("torch oracle: prenorm_attention_block", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<2, 4, 8>);
  auto wq = param<"wq", f32>(shape<8, 8>);
  auto wk = param<"wk", f32>(shape<8, 8>);
  auto wv = param<"wv", f32>(shape<8, 8>);
  auto a = normalize(x);
  auto scores = matmul(matmul(a, wq), transpose(matmul(a, wk))) * c<inv_sqrt8>;
  auto h = x + matmul(softmax<-1>(where(causal<4>(), scores, c<-1e9>)), matmul(a, wv));
  check_case<TestType>("prenorm_attention_block", mean(square(h)), x, wq, wk, wv);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: residual_fanout", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 8>);
  auto w = param<"w", f32>(shape<8, 8>);
  auto w2 = param<"w2", f32>(shape<8, 3>);
  auto h = x + tanh(matmul(x, w));
  check_case<TestType>("residual_fanout", sum(h * h) + sum(sigmoid(matmul(h, w2))), x, w, w2);
}

