// What the backward keeps, as plan/retention.hpp decides it for types: which values
// recompute from leaves (a block's backward and a training step's update compute them
// again), and what a block cuts, by the rule the plan fuses by: a gather fuses, so a
// block recomputes it from its table and ids rather than keeping it. And what a budget
// does to the arena: the backward's kernel order (plan.hpp, order_backward_for_memory)
// and the recompute entries placed where the backward reaches each value let the peak
// fall with the bytes kept, with store_all's gradients.
#include <luminal/backends/host.hpp>
#include <luminal/tape/tape.hpp>

#include "tape_support.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
}

TEST_CASE("retention: a value recomputes from leaves when all it holds over them fuses", "[plan][retention]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto ids = input<"ids", i32>(shape<Batch>);
  auto w = param<"w", f32>(shape<8, 8>);
  auto table = param<"table", f32>(shape<10, 8>);
  STATIC_REQUIRE(detail::recomputes_from_leaves<decltype(x)>::value);
  STATIC_REQUIRE(detail::recomputes_from_leaves<decltype(transpose(w))>::value);
  STATIC_REQUIRE(detail::recomputes_from_leaves<decltype(gather(table, ids))>::value);
  STATIC_REQUIRE(detail::recomputes_from_leaves<decltype(iota<1, f32>(shape<Batch, 8>) * x)>::value);
  STATIC_REQUIRE(!detail::recomputes_from_leaves<decltype(matmul(x, w))>::value);
  STATIC_REQUIRE(!detail::recomputes_from_leaves<decltype(x + expand(sum<1>(x, keepdim), shape<Batch, 8>))>::value);
  // What a fusing value is recomputed from: the nearest values under it that do not fuse.
  using h = decltype(matmul(x, w));
  using rows = decltype(gather(tanh(matmul(table, w)), ids));
  using from = detail::recomputed_from_t<decltype(tanh(h{}) * gather(table, ids) + rows{})>;
  STATIC_REQUIRE(std::is_same_v<from, boost::mp11::mp_list<h, decltype(matmul(table, w))>>);
  STATIC_REQUIRE(std::is_same_v<detail::recomputed_from_t<h>, boost::mp11::mp_list<h>>);
  STATIC_REQUIRE(std::is_same_v<detail::recomputed_from_t<decltype(gather(table, ids))>, boost::mp11::mp_list<>>);
}

TEST_CASE("retention: a block recomputes a gather from its table and ids, as the plan fuses it", "[plan][retention]") {
  // The backward of y = x * table[ids] reads table[ids] (for x's gradient). A gather
  // fuses, and its table and ids are leaves the backward binds: the block keeps y only.
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto ids = input<"ids", i32>(shape<Batch>);
  auto table = param<"emb.table", f32>(shape<10, 8>);
  auto y = x * gather(table, ids);
  auto embed = compile_block<"emb">(y, x);
  using kept = std::remove_reference_t<decltype(*embed)>::kept;
  STATIC_REQUIRE(boost::mp11::mp_size<kept>::value == 1);
  // A gather of a computed table is recomputed from what the table does not fuse over.
  auto w = param<"emb.w", f32>(shape<8, 8>);
  auto projected = compile_block<"emb">(x * gather(tanh(matmul(table, w)), ids), x);
  using kept_projected = std::remove_reference_t<decltype(*projected)>::kept;
  STATIC_REQUIRE(boost::mp11::mp_size<kept_projected>::value == 2);
  STATIC_REQUIRE(boost::mp11::mp_at_c<kept_projected, 1>::kind == op_kind::matmul);

  auto objective = compile_block<"">(mean(square(x)), x);
  tensor_store params;
  params.set("emb.table", test::random_array<float>({10, 8}, 11));
  auto xv = test::random_array<float>({6, 8}, 12);
  xt::xarray<std::int32_t> idv = {3, 0, 9, 3, 7, 1};
  tape<> t(params);
  auto xt_value = t.variable(xv);
  auto loss = t.call(*objective, "", {{"x", t.call(*embed, "", {{"x", xt_value}, {"ids", t.constant(idv)}})}});
  t.backward(loss);

  auto [dtable, dx] = grad(mean(square(y)), table, x);
  auto expected = compile(dtable, dx);
  REQUIRE(params.bind(expected) == 1);
  expected.bind("x", xv);
  expected.bind("ids", idv);
  expected.run();
  test::require_same_store(t.gradients(), {{"emb.table", expected.output<0>()}});
  test::require_close(t.gradient<float>(xt_value), expected.output<1>(), 2e-4, 2e-5);
}

namespace {
constexpr Dim Rows{"Rows"};
/// A five-layer tanh network's loss and weight gradients: a cotangent chain that every
/// earlier layer's gradient needs, and a weight gradient per layer that reads the
/// layer's input activation.
auto deep_loss_and_gradients() {
  auto x = input<"x", f32>(shape<Rows, 32>);
  auto w1 = param<"w1", f32>(shape<32, 48>);
  auto w2 = param<"w2", f32>(shape<48, 48>);
  auto w3 = param<"w3", f32>(shape<48, 48>);
  auto w4 = param<"w4", f32>(shape<48, 48>);
  auto w5 = param<"w5", f32>(shape<48, 8>);
  auto h = tanh(matmul(tanh(matmul(tanh(matmul(tanh(matmul(x, w1)), w2)), w3)), w4));
  auto loss = mean(square(tanh(matmul(h, w5))));
  auto [d1, d2, d3, d4, d5] = grad(loss, w1, w2, w3, w4, w5);
  return std::tuple(loss, d1, d2, d3, d4, d5);
}

template <class Program>
void run_deep(Program& prog, index_t rows) {
  prog.bind("x", test::random_array<float>({std::size_t(rows), 32}, 31));
  prog.bind("w1", test::random_array<float>({32, 48}, 32, -0.3, 0.3));
  prog.bind("w2", test::random_array<float>({48, 48}, 33, -0.3, 0.3));
  prog.bind("w3", test::random_array<float>({48, 48}, 34, -0.3, 0.3));
  prog.bind("w4", test::random_array<float>({48, 48}, 35, -0.3, 0.3));
  prog.bind("w5", test::random_array<float>({48, 8}, 36, -0.3, 0.3));
  prog.run();
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("retention: a budget lowers the arena's peak, with store_all's gradients", "[plan][retention]",
                        test_backends) {
  auto compile_with = [](auto policy) {
    return std::apply([](auto... outputs) { return compile<TestType, decltype(policy)::value>(outputs...); },
                      deep_loss_and_gradients());
  };
  auto stored = compile_with(std::integral_constant<retention_policy, retention_policy::store_all>{});
  // About a quarter of what store_all keeps at 128 rows (397,312 bytes).
  auto quarter = compile_with(std::integral_constant<retention_policy, retention_policy::budget{99'000}>{});
  auto nothing = compile_with(std::integral_constant<retention_policy, retention_policy::budget{0}>{});
  // Each weight's gradient runs as soon as its layer's cotangent exists: the last layer's
  // first, not after the whole cotangent chain as the graph order has it.
  using stored_type = decltype(stored);
  constexpr auto gradient_kernel = [](int i) {
    return stored_type::plan.kernel_of[std::size_t(stored_type::output_ids[std::size_t(i)])];
  };
  STATIC_REQUIRE(gradient_kernel(5) < gradient_kernel(4));
  STATIC_REQUIRE(gradient_kernel(4) < gradient_kernel(3));
  STATIC_REQUIRE(gradient_kernel(3) < gradient_kernel(2));
  // A value that may be recomputed has an entry before each point of the backward where
  // it may be needed first (its first reader, or the recomputation of a later layer).
  constexpr auto& budget_plan = decltype(quarter)::plan;
  constexpr int entries = [] {
    int n = 0;
    for (int k = 0; k < budget_plan.kernel_count; ++k) n += budget_plan.is_recompute[std::size_t(k)];
    return n;
  }();
  constexpr int recomputable = [] {
    int n = 0;
    for (int e : budget_plan.recompute_entry) n += e >= 0;
    return n;
  }();
  STATIC_REQUIRE(entries > recomputable);
  for (index_t rows : {128, 45}) {
    run_deep(stored, rows);
    run_deep(quarter, rows);
    run_deep(nothing, rows);
    INFO("Rows = " << rows << ": store_all keeps " << stored.retained_bytes() << " bytes, arena " << stored.arena_bytes()
                   << "; the budget keeps " << quarter.retained_bytes() << ", arena " << quarter.arena_bytes());
    REQUIRE(quarter.retained_bytes() <= 99'000);
    REQUIRE(nothing.retained_bytes() == 0);
    auto same_as_stored = [&](auto& prog) {  // the forward's kernels run again: identical values
      REQUIRE(bool(prog.template output<0>() == stored.template output<0>()));
      REQUIRE(bool(prog.template output<1>() == stored.template output<1>()));
      REQUIRE(bool(prog.template output<2>() == stored.template output<2>()));
      REQUIRE(bool(prog.template output<3>() == stored.template output<3>()));
      REQUIRE(bool(prog.template output<4>() == stored.template output<4>()));
      REQUIRE(bool(prog.template output<5>() == stored.template output<5>()));
    };
    same_as_stored(quarter);
    same_as_stored(nothing);
    // One value of each layer is kept; the rest of a layer is recomputed from it where the
    // backward reaches the layer, and lives only through it.
    if (rows == 128) REQUIRE(quarter.arena_bytes() * 10 <= stored.arena_bytes() * 6);
  }
}
