// What the backward keeps, as plan/retention.hpp decides it for types: which values
// recompute from leaves (a block's backward and a training step's update compute them
// again), and what a block cuts, by the rule the plan fuses by: a gather fuses, so a
// block recomputes it from its table and ids rather than keeping it.
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
