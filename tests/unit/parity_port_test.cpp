// A held-out port (issue 17), part 1: 18 composite expressions as a PyTorch user writes
// them, ported to luminal as that user would, against torch 2.x's values and gradients
// (tests/fixtures/make_port_fixtures.py writes port_fixtures.json). The inputs put edge
// points first: x = 0, clamp bounds, negative bases, the kinks of losses. Model A, the
// held-out training script, is in parity_model_test.cpp.
#include <limits>
#include <luminal/nn/losses.hpp>
#include <luminal/backends/host.hpp>
#include <set>

#include "grad_torch_fixtures.hpp"

using namespace luminal;

namespace {
using torch_oracle::check_case_in;
using torch_oracle::port_file;

/// sum(f(x) * r) over 16 elements, f(x) checked as the value.
template <class B, class F>
void check_elementwise(const std::string& name, F f) {
  auto x = input<"x", f32>(shape<16>);
  auto r = input<"r", f32>(shape<16>);
  check_case_in<B>(port_file, name, std::tuple{f(x)}, sum(f(x) * r), x);
}

/// sum(f(x) * r) over rows of x [4, 6], f(x) [4, 6] checked as the value.
template <class B, class F>
void check_rows(const std::string& name, F f) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case_in<B>(port_file, name, std::tuple{f(x)}, sum(f(x) * r), x);
}
}  // namespace

TEST_CASE("port: the fixture file holds the 18 expressions and model A", "[parity][port][torch]") {
  std::set<std::string> expressions;
  for (const auto& item : torch_oracle::fixture_cases(port_file).items())
    if (item.key().starts_with("port_")) expressions.insert(item.key());
  REQUIRE(expressions.size() == 18);
  REQUIRE(torch_oracle::fixture_cases(port_file).contains("model_a"));
}

TEMPLATE_LIST_TEST_CASE("port: elementwise expressions at 0, clamp bounds and negative bases", "[parity][port][torch]",
                        test_backends) {
  SECTION("(x - x.mean()) ** 2") {
    check_elementwise<TestType>("port_centered_square", [](auto x) { return pow(x - mean(x), 2.0_c); });
  }
  SECTION("x**3 - 2 x**2 + x / 2") {
    check_elementwise<TestType>("port_cubic",
                                [](auto x) { return pow(x, 3.0_c) - 2.0_c * pow(x, 2.0_c) + 0.5_c * x; });
  }
  SECTION("silu") { check_elementwise<TestType>("port_silu", [](auto x) { return x * sigmoid(x); }); }
  SECTION("mish") { check_elementwise<TestType>("port_mish", [](auto x) { return x * tanh(softplus(x)); }); }
  SECTION("gelu, exact and tanh") {
    check_elementwise<TestType>("port_gelu_both",
                                [](auto x) { return gelu(x) + 0.5_c * gelu(x, approximate::tanh); });
  }
  SECTION("ELU by where, at 0") {
    check_elementwise<TestType>("port_elu_where",
                                [](auto x) { return where(greater_than(x, 0.0_c), x, 0.5_c * expm1(x)); });
  }
  SECTION("clamp at its bounds, relu at 0") {
    check_elementwise<TestType>("port_hardtanh_relu",
                                [](auto x) { return clamp<-1.0, 1.0>(x) * 2.0_c + relu(x); });
  }
  SECTION("relu6") { check_elementwise<TestType>("port_relu6", [](auto x) { return clamp<0.0, 6.0>(x); }); }
  SECTION("abs and sign at 0") {
    check_elementwise<TestType>("port_abs_sign", [](auto x) { return abs(x) * 3.0_c + sign(x) * pow(x, 2.0_c); });
  }
  SECTION("leaky_relu and softplus") {
    check_elementwise<TestType>("port_leaky_softplus", [](auto x) { return leaky_relu<0.2>(x) + softplus(x); });
  }
  SECTION("log1p and sqrt") {
    check_elementwise<TestType>("port_safe_log", [](auto x) { return log1p(abs(x)) + sqrt(x * x + 1.0_c); });
  }
  SECTION("rsqrt and floor") {
    check_elementwise<TestType>("port_rsqrt_floor", [](auto x) { return rsqrt(x * x + 0.5_c) + floor(x) * x; });
  }
}

TEMPLATE_LIST_TEST_CASE("port: softmax, logsumexp and a layer norm by hand, over rows", "[parity][port][torch]",
                        test_backends) {
  SECTION("softmax + logsumexp / 4") {
    check_rows<TestType>("port_softmax_logsumexp",
                         [](auto x) { return softmax<1>(x) + logsumexp<1>(x, keepdim) * 0.25_c; });
  }
  SECTION("(x - mean) / sqrt(var + eps)") {
    check_rows<TestType>("port_layer_norm_by_hand", [](auto x) {
      return (x - mean<1>(x, keepdim)) / sqrt(var<1>(x, keepdim, correction<0>) + 1e-5_c);
    });
  }
}

TEMPLATE_LIST_TEST_CASE("port: losses at their kinks, cosine similarity, causal attention", "[parity][port][torch]",
                        test_backends) {
  SECTION("smooth_l1 + mse + l1") {
    auto pred = input<"pred", f32>(shape<16>);
    auto target = input<"target", f32>(shape<16>);
    auto loss = nn::huber<1.0>(pred, target) + nn::mse(pred, target) + mean(abs(pred - target));
    check_case_in<TestType>(port_file, "port_smooth_l1_mse", std::tuple{}, loss, pred);
  }
  SECTION("cosine_similarity and normalize") {
    auto a = input<"a", f32>(shape<4, 6>);
    auto b = input<"b", f32>(shape<4, 6>);
    auto r = input<"r", f32>(shape<4>);
    auto s = input<"s", f32>(shape<4, 6>);
    auto cosine = sum<1>(a * b) / (sqrt(sum<1>(a * a)) * sqrt(sum<1>(b * b)));
    auto normalized = a / sqrt(sum<1>(a * a, keepdim));
    check_case_in<TestType>(port_file, "port_cosine_normalize", std::tuple{cosine}, sum(cosine * r) + sum(normalized * s),
                            a, b);
  }
  SECTION("binary_cross_entropy_with_logits at 0 and +-30") {
    auto z = input<"z", f32>(shape<4, 4>);
    auto y = input<"y", f32>(shape<4, 4>);
    check_case_in<TestType>(port_file, "port_bce_with_logits", std::tuple{}, nn::binary_cross_entropy_with_logits(z, y),
                            z);
  }
  SECTION("softmax(q k^T / sqrt(d), causal) v") {
    auto q = input<"q", f32>(shape<6, 8>);
    auto k = input<"k", f32>(shape<6, 8>);
    auto v = input<"v", f32>(shape<6, 8>);
    auto r = input<"r", f32>(shape<6, 8>);
    auto scores = matmul(q, transpose(k)) / c<2.8284271247461903>;  // sqrt(8)
    auto causal = less_equal(iota<1, i32>(shape<6, 6>), iota<0, i32>(shape<6, 6>));
    auto attended = matmul(softmax<1>(where(causal, scores, c<-std::numeric_limits<double>::infinity()>)), v);
    check_case_in<TestType>(port_file, "port_causal_attention", std::tuple{attended}, sum(attended * r), q, k, v);
  }
}
