// Gradients against PyTorch autograd, part 2: single ops and small compositions (views,
// broadcasting, gather, where, stop_gradient, reductions with ties). Elementwise ops are
// part 3, grad_torch_elementwise_test.cpp.
// The fixtures, their regeneration and the comparison are described in
// grad_torch_fixtures.hpp and grad_torch_test.cpp.
#include "grad_torch_fixtures.hpp"

using namespace luminal;
using torch_oracle::check_case;

// ---- movement ops ----------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("torch oracle: slice_pad", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 10>);
  auto r = input<"r", f32>(shape<7, 5>);
  auto y = pad<0, 1, 2>(slice<1, 2, 7>(x));
  check_case<TestType>("slice_pad", sum(y * r) + sum(square(slice<0, 1, 3>(x))), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: pad_concat_value", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<3, 4>);
  auto b = input<"b", f32>(shape<3, 2>);
  auto r = input<"r", f32>(shape<4, 6>);
  auto joined = pad<1, 0, 2>(a) + pad<1, 4, 0>(b);
  auto z = pad<0, 1, 0, 0.5>(joined);
  check_case<TestType>("pad_concat_value", sum(sigmoid(z) * r), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: batched_matmul_broadcast", "[grad][torch]", test_backends) {
  auto a = input<"a", f32>(shape<2, 1, 3, 4>);
  auto b = input<"b", f32>(shape<3, 4, 5>);
  auto r = input<"r", f32>(shape<2, 3, 3, 5>);
  check_case<TestType>("batched_matmul_broadcast", sum(matmul(a, b) * r), a, b, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: matmul_batched_by_matrix", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 4, 5>);
  auto w = param<"w", f32>(shape<5, 2>);
  check_case<TestType>("matmul_batched_by_matrix", sum(tanh(matmul(x, w))), x, w);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: transpose_permute_chain", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto w = param<"w", f32>(shape<6, 3>);
  auto r = input<"r", f32>(shape<4, 3>);
  auto y = reshape(transpose(permute<2, 0, 1>(x)), shape<4, 6>);
  check_case<TestType>("transpose_permute_chain", sum(tanh(matmul(y, w)) * r), x, w, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: expand_sum", "[grad][torch]", test_backends) {
  auto b = input<"b", f32>(shape<1, 5>);
  auto v = input<"v", f32>(shape<5>);
  auto x = input<"x", f32>(shape<3, 4, 5>);
  auto r = input<"r", f32>(shape<4>);
  auto y = expand(b, shape<3, 4, 5>) * expand(v, shape<3, 4, 5>) + x;
  check_case<TestType>("expand_sum", sum(sum<0, 2>(square(y)) * r), b, v, x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: broadcast_binary", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 5>);
  auto bias = input<"bias", f32>(shape<5>);
  auto scale = input<"scale", f32>(shape<1, 5>);
  auto col = input<"col", f32>(shape<4, 1>);
  check_case<TestType>("broadcast_binary", sum(square((x + bias) * scale - col)), x, bias, scale, col);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: gather_embedding", "[grad][torch]", test_backends) {
  auto table = param<"table", f32>(shape<10, 6>);
  auto ids = input<"ids", i32>(shape<3, 4>);
  auto r = input<"r", f32>(shape<3, 4, 6>);
  check_case<TestType>("gather_embedding", sum(tanh(gather(table, ids)) * r), table, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: where_mask", "[grad][torch]", test_backends) {
  auto m = input<"m", f32>(shape<4, 6>);
  auto x = input<"x", f32>(shape<4, 6>);
  auto y = input<"y", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4, 6>);
  check_case<TestType>("where_mask", sum(where(less_than(m, c<0>), x * y, square(y)) * r), x, y, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: stop_gradient", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto z = input<"z", f32>(shape<4, 6>);
  auto loss = sum(square(x - stop_gradient(mean<1>(x, keepdim)))) + sum(stop_gradient(z) * x);
  check_case<TestType>("stop_gradient", loss, x, z);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: sum_of_shared_subexpression", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 5>);
  auto y = input<"y", f32>(shape<3, 5>);
  auto u = exp(x);
  check_case<TestType>("sum_of_shared_subexpression", sum(u * u + u * y + sigmoid(u)), x, y);
}

// ---- reductions --------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("torch oracle: max_reduce_ties", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 6>);
  auto r = input<"r", f32>(shape<5>);
  check_case<TestType>("max_reduce_ties", sum(max<1>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: max_reduce_ties_keepdim_fanout", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<6, 5>);
  auto r = input<"r", f32>(shape<6, 5>);
  check_case<TestType>("max_reduce_ties_keepdim_fanout", sum(exp(x - max<0>(x, keepdim)) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: max_reduce_all_ties", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 4>);
  check_case<TestType>("max_reduce_all_ties", max(x) * c<3>, x);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: max_reduce_two_axes", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 4, 5>);
  auto r = input<"r", f32>(shape<4>);
  check_case<TestType>("max_reduce_two_axes", sum(max<0, 2>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: softmax_axis0", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 3>);
  auto r = input<"r", f32>(shape<5, 3>);
  check_case<TestType>("softmax_axis0", sum(softmax<0>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: log_softmax", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 7>);
  auto r = input<"r", f32>(shape<4, 7>);
  check_case<TestType>("log_softmax", sum(log_softmax<-1>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: logsumexp", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<4, 6>);
  auto r = input<"r", f32>(shape<4>);
  check_case<TestType>("logsumexp", sum(logsumexp<1>(x) * r), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: variance", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<5, 6>);
  auto r = input<"r", f32>(shape<5>);
  check_case<TestType>("variance", sum(variance<1>(x) * r) + variance<0, 1>(x), x, r);
}

TEMPLATE_LIST_TEST_CASE("torch oracle: mean_multi_axes", "[grad][torch]", test_backends) {
  auto x = input<"x", f32>(shape<3, 4, 5>);
  auto r = input<"r", f32>(shape<4>);
  check_case<TestType>("mean_multi_axes", sum(mean<0, 2>(square(x)) * r) + mean(x), x, r);
}
