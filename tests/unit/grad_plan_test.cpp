// The reverse pass as a compiler pass: type-level simplification, CSE across forward and
// backward, the retention set and its policies, one fused program for both directions.
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
}

#ifndef __CUDACC__  // compile-time checks only; nvcc misspells these decltypes (test_support.hpp)
TEST_CASE("simplification rewrites redundant nodes away when they are built", "[grad][simplify]") {
  auto x = input<"x", f32>(shape<Batch, 4>);
  using X = decltype(x);
  STATIC_REQUIRE(std::is_same_v<decltype(x * 1.0_c), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(1.0_c * x), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(x + 0.0_c), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(0.0_c + x), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(neg(neg(x))), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(recip(recip(x))), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(exp2(log2(x))), X>);
  STATIC_REQUIRE(std::is_same_v<decltype(log2(exp2(x))), X>);
  // x * 0 is a constant zero of x's shape; constants fold.
  STATIC_REQUIRE(std::is_same_v<decltype(x * 0.0_c), decltype(expand(Const<f32, 0.0f>{}, shape<Batch, 4>))>);
  STATIC_REQUIRE(std::is_same_v<decltype(constant<f32, 2.0f> * constant<f32, 3.0f>), Const<f32, 6.0f>>);
  STATIC_REQUIRE(std::is_same_v<decltype(constant<f32, 2.0f> + constant<f32, 3.0f>), Const<f32, 5.0f>>);
  // A broadcasting x * 1 keeps the broadcast: the result has the larger shape.
  auto ones = expand(Const<f32, 1.0f>{}, shape<3, Batch, 4>);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(x * ones)>, Shape<3, Batch, 4>>);
}

TEST_CASE("forward and backward share nodes by type identity", "[grad][cse]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto w = param<"w", f32>(shape<8, 8>);
  auto h = tanh(matmul(x, w));
  auto loss = sum(h * h);
  auto dw = grad(loss, w);
  using forward = topo_nodes<decltype(loss)>;
  using both = topo_nodes<decltype(loss), decltype(dw)>;
  // The backward reads the forward's tanh and matmul: the combined graph holds each once.
  STATIC_REQUIRE(boost::mp11::mp_contains<both, decltype(h)>::value);
  STATIC_REQUIRE(boost::mp11::mp_contains<topo_nodes<decltype(dw)>, decltype(h)>::value);
  STATIC_REQUIRE(boost::mp11::mp_size<both>::value <
                 boost::mp11::mp_size<forward>::value + boost::mp11::mp_size<topo_nodes<decltype(dw)>>::value);
}

#endif

TEMPLATE_LIST_TEST_CASE("recompute-elementwise retains fewer bytes and gives the same gradients", "[grad][retention]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 16>);
  auto w1 = param<"w1", f32>(shape<16, 32>);
  auto w2 = param<"w2", f32>(shape<32, 4>);
  auto hidden = sigmoid(matmul(x, w1)) * c<2>;
  auto loss = mean(square(tanh(matmul(hidden, w2))));
  auto [dw1, dw2] = grad(loss, w1, w2);

  auto stored = compile<TestType, retention_policy::store_all>(loss, dw1, dw2);
  auto recomputed = compile<TestType, retention_policy::recompute_elementwise>(loss, dw1, dw2);
  REQUIRE(stored.retained_count() > 0);
  REQUIRE(stored.retained_count() == recomputed.retained_count());
  auto lines = stored.retained_nodes();
  REQUIRE(lines.size() == stored.retained_count());
  for (const auto& line : lines) REQUIRE(line.find("[stored]") != std::string::npos);
  bool any_recomputed = false;
  for (const auto& line : recomputed.retained_nodes()) any_recomputed |= line.find("[recomputed]") != std::string::npos;
  REQUIRE(any_recomputed);

  auto data = test::random_array<float>({10, 16}, 11);
  auto weights1 = test::random_array<float>({16, 32}, 12, -0.3, 0.3);
  auto weights2 = test::random_array<float>({32, 4}, 13, -0.3, 0.3);
  auto run = [&](auto& prog) {
    prog.bind("x", data);
    prog.bind("w1", weights1);
    prog.bind("w2", weights2);
    prog.run();
  };
  run(stored);
  run(recomputed);
  REQUIRE(recomputed.retained_bytes() < stored.retained_bytes());
  // The bytes for given extents, without running: equal at the bound Batch, growing with it.
  REQUIRE(stored.retained_bytes({{"Batch", 10}}) == stored.retained_bytes());
  REQUIRE(stored.retained_bytes({{"Batch", 20}}) > stored.retained_bytes());
  test::require_close(recomputed.template output<0>(), stored.template output<0>(), 1e-6, 0);
  test::require_close(recomputed.template output<1>(), stored.template output<1>(), 1e-5, 1e-7);
  test::require_close(recomputed.template output<2>(), stored.template output<2>(), 1e-5, 1e-7);
}

TEST_CASE("forward and backward compile into one fused program", "[grad][plan]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto w = param<"w", f32>(shape<8, 4>);
  auto loss = sum(exp(matmul(x, w)) * c<0.5>);
  auto dw = grad(loss, w);
  // forward: matmul, sum over axis 1, sum over axis 0, the scalar loss; backward: the
  // cotangent 0.5 * exp(xw) * ln2-scaled chain as ONE fused kernel, then x^T @ it.
  STATIC_REQUIRE(decltype(compile<host, retention_policy::recompute_elementwise>(loss, dw))::kernel_count() == 6);
}
