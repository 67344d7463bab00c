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

namespace {
/// max over axis 1, differentiated as the identity: a custom rule whose node the backward
/// reads as the value of the reduction under it.
struct max_as_identity {
  static constexpr auto forward(auto x) { return max<1>(x, keepdim); }
  static constexpr auto vjp(auto g, auto, auto x) { return expand(g, shape_t<decltype(x)>{}); }
};
}  // namespace

TEST_CASE("an identity map the backward reads is kept as the value under it, not copied", "[grad][plan]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto w = param<"w", f32>(shape<8, 6>);
  // The backward reads stop_gradient(m), an identity map over a custom node (another)
  // over max's result: the plan keeps the reduction's buffer, not a copy of either map.
  auto m = custom_vjp<max_as_identity>(matmul(x, w));
  auto loss = sum(m * stop_gradient(m));
  auto prog = compile(loss, grad(loss, w));
  auto xv = test::random_array<float>({3, 8}, 31), wv = test::random_array<float>({8, 6}, 32);
  prog.bind("x", xv);
  prog.bind("w", wv);
  prog.run();
  const auto kept = prog.retained_nodes();
  REQUIRE(!kept.empty());
  for (const auto& line : kept) {
    INFO(line);
    CHECK(line.find("custom") == std::string::npos);
    CHECK(line.find("stop_gradient") == std::string::npos);
  }
  // d loss / d m = m, and the rule spreads it over each row of x w: dw[i, k] = sum_b x[b, i] m[b].
  xt::xarray<double> expected = xt::zeros<double>({8, 6});
  for (std::size_t b = 0; b < 3; ++b) {
    double mb = -1e300;
    for (std::size_t k = 0; k < 6; ++k) {
      double xw = 0;
      for (std::size_t i = 0; i < 8; ++i) xw += double(xv(b, i)) * double(wv(i, k));
      mb = std::max(mb, xw);
    }
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t k = 0; k < 6; ++k) expected(i, k) += double(xv(b, i)) * mb;
  }
  test::require_close(prog.template output<1>(), expected, 1e-5, 1e-5);
}

namespace {
/// A three-layer network's loss and weight gradients: eight forward buffers the backward
/// reads (two GEMM results per layer and their activations), some recomputable.
auto three_layer_loss_and_gradients() {
  auto x = input<"x", f32>(shape<Batch, 16>);
  auto w1 = param<"w1", f32>(shape<16, 32>);
  auto w2 = param<"w2", f32>(shape<32, 24>);
  auto w3 = param<"w3", f32>(shape<24, 4>);
  auto h1 = tanh(matmul(x, w1));
  auto h2 = sigmoid(matmul(h1, w2)) * c<2>;
  auto loss = mean(square(tanh(matmul(h2, w3))));
  auto [dw1, dw2, dw3] = grad(loss, w1, w2, w3);
  return std::tuple(loss, dw1, dw2, dw3);
}

template <class Program>
void run_three_layer(Program& prog, index_t batch) {
  prog.bind("x", test::random_array<float>({std::size_t(batch), 16}, 21));
  prog.bind("w1", test::random_array<float>({16, 32}, 22, -0.4, 0.4));
  prog.bind("w2", test::random_array<float>({32, 24}, 23, -0.4, 0.4));
  prog.bind("w3", test::random_array<float>({24, 4}, 24, -0.4, 0.4));
  prog.run();
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("a retention budget keeps at most its bytes, recomputes the rest and gives the same gradients",
                        "[grad][retention]", test_backends) {
  auto compile_with = [](auto policy) {
    return std::apply([](auto... outputs) { return compile<TestType, decltype(policy)::value>(outputs...); },
                      three_layer_loss_and_gradients());
  };
  auto stored = compile_with(std::integral_constant<retention_policy, retention_policy::store_all>{});
  auto nothing = compile_with(std::integral_constant<retention_policy, retention_policy::budget{0}>{});
  auto some = compile_with(std::integral_constant<retention_policy, retention_policy::budget{3000}>{});
  auto ample = compile_with(std::integral_constant<retention_policy, retention_policy::budget{1 << 20}>{});
  for (index_t batch : {20, 7}) {  // the choice is made again for new extents
    run_three_layer(stored, batch);
    run_three_layer(nothing, batch);
    run_three_layer(some, batch);
    run_three_layer(ample, batch);
    INFO("Batch = " << batch);
    // Nothing kept: every value the backward reads is recomputed from the inputs.
    REQUIRE(nothing.retained_bytes() == 0);
    REQUIRE(nothing.recomputed_flops() > 0);
    // Between: within the budget, and cheaper than recomputing everything.
    REQUIRE(some.retained_bytes() <= 3000);
    REQUIRE(some.recomputed_flops() < nothing.recomputed_flops());
    // A budget above what store_all keeps recomputes nothing. (It may keep other bytes
    // than store_all: store_all lets a backward kernel join the forward's loops, and
    // keeps its result, where a budget keeps the backward after the forward.)
    REQUIRE(ample.retained_bytes() <= std::size_t(1 << 20));
    REQUIRE(ample.recomputed_flops() == 0);
    bool any_recomputed = false, all_kept = true;
    for (const auto& line : nothing.retained_nodes()) any_recomputed |= line.find("[recomputed]") != std::string::npos;
    for (const auto& line : ample.retained_nodes()) all_kept &= line.find("[kept]") != std::string::npos;
    REQUIRE(any_recomputed);
    REQUIRE(all_kept);
    // The recomputed values are the forward's own kernels run again: identical results.
    REQUIRE(bool(nothing.template output<1>() == stored.template output<1>()));
    REQUIRE(bool(nothing.template output<2>() == stored.template output<2>()));
    REQUIRE(bool(nothing.template output<3>() == stored.template output<3>()));
    REQUIRE(bool(some.template output<1>() == stored.template output<1>()));
    REQUIRE(bool(some.template output<3>() == stored.template output<3>()));
    REQUIRE(bool(ample.template output<2>() == stored.template output<2>()));
  }
  // Without running: the bytes and FLOPs for other extents.
  REQUIRE(some.retained_bytes({{"Batch", 200}}) <= 3000);
  REQUIRE(some.recomputed_flops({{"Batch", 200}}) > some.recomputed_flops({{"Batch", 7}}));
}

#ifndef __CUDACC__  // host only; nvcc misspells the decltypes of these programs (test_support.hpp)
TEST_CASE("the budget's choice matches brute force over every set of recomputed values", "[grad][retention]") {
  auto prog = std::apply([](auto... outputs) { return compile<host, retention_policy::budget{0}>(outputs...); },
                         three_layer_loss_and_gradients());
  using layout = decltype(prog)::layout;
  constexpr auto& plan = layout::plan;
  std::vector<int> candidates;
  for (std::size_t i = 0; i < layout::node_count; ++i)
    if (plan.recompute_entry[i] >= 0) candidates.push_back(int(i));
  REQUIRE(candidates.size() >= 8);
  REQUIRE(candidates.size() <= 16);
  // The extents table for Batch = 20, and each node's bytes and recompute FLOPs.
  symbol_values symbols;
  symbols.set("Batch", 20);
  std::vector<index_t> dims(layout::node_count * layout::max_rank, 0);
  layout::extents::resolve_all(symbols, dims.data());
  auto [bytes, flops] = detail::node_costs<layout>(dims);
  // Every subset: its kept bytes (by kept_bytes, not by the search's own bookkeeping) and work.
  std::vector<std::pair<std::size_t, double>> subsets;
  for (unsigned mask = 0; mask < (1u << candidates.size()); ++mask) {
    std::vector<bool> recompute(layout::node_count);
    double work = 0;
    for (std::size_t c = 0; c < candidates.size(); ++c)
      if (mask >> c & 1u) recompute[std::size_t(candidates[c])] = true, work += flops[std::size_t(candidates[c])];
    subsets.emplace_back(detail::kept_bytes(plan, bytes, recompute), work);
  }
  std::vector<std::size_t> budgets{0};
  for (const auto& [kept, work] : subsets) budgets.push_back(kept), budgets.push_back(kept + 1);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  REQUIRE(budgets.size() > 10);
  for (std::size_t budget : budgets) {
    double least = -1;
    for (const auto& [kept, work] : subsets)
      if (kept <= budget && (least < 0 || work < least)) least = work;
    auto choice = detail::choose_recomputation(plan, bytes, flops, budget);
    INFO("budget " << budget << " bytes");
    REQUIRE(choice.exact);
    REQUIRE(choice.retained_bytes <= budget);
    REQUIRE(choice.retained_bytes == detail::kept_bytes(plan, bytes, choice.recompute));
    REQUIRE(choice.recomputed_flops == Approx(least).margin(1e-9));
  }
}
#endif

TEST_CASE("without a budget, the bytes kept for the backward are counted alike from the buffers and the plan",
          "[grad][retention]") {
  // retention_for sums the arena's buffers (program_layout::buffers) so that a program
  // without a budget never reads its plan at run time; kept_bytes counts from the plan.
  auto check = [](auto prog) {
    using layout = typename decltype(prog)::layout;
    for (index_t batch : {1, 20, 333}) {
      symbol_values symbols;
      symbols.set("Batch", batch);
      std::vector<index_t> dims(layout::node_count * layout::max_rank, 0);
      layout::extents::resolve_all(symbols, dims.data());
      auto bytes = detail::node_costs<layout>(dims).first;
      std::size_t from_buffers = detail::retention_for<layout>(dims).retained_bytes;
      INFO("Batch = " << batch);
      REQUIRE(from_buffers > 0);
      REQUIRE(from_buffers == detail::kept_bytes(layout::plan, bytes, std::vector<bool>(layout::node_count)));
    }
  };
  check(std::apply([](auto... outputs) { return compile<host, retention_policy::store_all>(outputs...); },
                   three_layer_loss_and_gradients()));
  check(std::apply([](auto... outputs) { return compile<host, retention_policy::recompute_elementwise>(outputs...); },
                   three_layer_loss_and_gradients()));
}
