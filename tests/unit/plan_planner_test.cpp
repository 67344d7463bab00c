// The planner on its own (plan/plan.hpp, plan/retention.hpp), over graph tables written
// by hand: which nodes get a buffer and a kernel, what a GEMM reads, what the backward
// keeps under each retention policy, and what a budget recomputes. No node type, no
// program: the tables are the planner's whole input, as CuTe tests its layouts.
#include <catch2/catch.hpp>

#include <array>
#include <initializer_list>
#include <luminal/plan/retention.hpp>
#include <vector>

using namespace luminal;
using detail::make_plan;

namespace {
/// A row of a hand-written table: rank 2, 4-byte elements.
constexpr node_info row(op_kind kind, std::initializer_list<int> children = {}, int cost = 1) {
  node_info n;
  n.kind = kind;
  n.cost = cost;
  n.rank = 2;
  n.element_bytes = 4;
  for (int c : children) n.children[std::size_t(n.child_count++)] = c;
  return n;
}
constexpr node_info leaf() { return row(op_kind::input); }
constexpr node_info map(std::initializer_list<int> children, int cost = 1) { return row(op_kind::map, children, cost); }
constexpr node_info reshape_of(int child) {
  node_info n = row(op_kind::view, {child});
  n.is_reshape = true;
  return n;
}
constexpr node_info transpose_of(int child) {
  node_info n = row(op_kind::view, {child});
  n.is_last_two_transpose = true;
  return n;
}
constexpr node_info batch_expand_of(int child) {
  node_info n = row(op_kind::view, {child});
  n.rank = 3;
  n.is_batch_expand = true;
  n.expansion = 16;
  return n;
}
constexpr node_info sum_of(int child, int axis) {
  node_info n = row(op_kind::reduce, {child});
  n.summed_axis = axis;
  return n;
}

/// The plan's kernels in run order.
template <std::size_t N, std::size_t O>
std::vector<int> kernels_of(const plan_data<N, O>& plan) {
  return {plan.kernels.begin(), plan.kernels.begin() + plan.kernel_count};
}
template <std::size_t N, std::size_t O>
std::vector<int> stored_of(const plan_data<N, O>& plan) {
  std::vector<int> ids;
  for (std::size_t i = 0; i < N; ++i)
    if (plan.stored[i]) ids.push_back(int(i));
  return ids;
}

// y = sum(relu(x @ w)) + 1, forward only.
constexpr std::array<node_info, 6> mlp_forward{
    leaf(),                                   // 0 x
    leaf(),                                   // 1 w
    row(op_kind::matmul, {0, 1}),             // 2 x @ w
    map({2}),                                 // 3 relu
    sum_of(3, 1),                             // 4 sum
    map({4}),                                 // 5 + 1
};

// The forward and backward of loss = sum(relu(reshape(x @ w))), with dW = x^T (g * mask).
constexpr std::array<node_info, 12> mlp_step{
    leaf(),                                   // 0 x
    leaf(),                                   // 1 w
    row(op_kind::matmul, {0, 1}),             // 2 h = x @ w
    reshape_of(2),                            // 3 v = reshape(h)
    map({3}),                                 // 4 a = relu(v)
    sum_of(4, 1),                             // 5 loss                     output 0
    row(op_kind::constant),                   // 6 the seed
    row(op_kind::view, {6}),                  // 7 g = expand(seed)         backward from here
    map({3, 7}),                              // 8 g where v > 0 (reads v)
    map({4, 8}),                              // 9 ... * a (reads a)
    transpose_of(0),                          // 10 x^T
    row(op_kind::matmul, {10, 9}),            // 11 dW                      output 1
};
constexpr std::array<int, 2> step_outputs{5, 11};
constexpr std::array<Dim, 12> step_counts{};  // no two kernels known to share a count
}  // namespace

TEST_CASE("plan: boundaries, leaves and outputs get buffers; what fuses is evaluated where it is read", "[plan]") {
  constexpr auto plan = make_plan(mlp_forward, std::array<int, 1>{5});
  STATIC_REQUIRE(plan.stored[0] && plan.stored[1]);  // leaves: bound, no kernel
  STATIC_REQUIRE(plan.stored[2] && plan.stored[4]);  // a GEMM and a reduction
  STATIC_REQUIRE(!plan.stored[3]);                   // relu fuses into the sum's loop
  STATIC_REQUIRE(plan.stored[5] && plan.is_output[5]);
  CHECK(kernels_of(plan) == std::vector<int>{2, 4, 5});
  CHECK(plan.kernel_of[3] == -1);
  CHECK(plan.kernel_of[4] == 1);
  CHECK(plan.inline_cost[3] == 2);  // its own op and a load of the GEMM's result
  // One output: every kernel is the forward's, and the caller reads the output last.
  CHECK(plan.boundary == plan.kernel_count);
  CHECK(plan.forward_last_use[2] == 1);  // the sum reads the GEMM through relu
  CHECK(plan.backward_last_use[5] == plan.kernel_count);
}

TEST_CASE("plan: a GEMM reads its operands' memory, through transposes, batch broadcasts and reshapes", "[plan]") {
  constexpr std::array<node_info, 9> table{
      leaf(),                         // 0 x (B, 6, 4)
      leaf(),                         // 1 w (4, 4)
      transpose_of(1),                // 2 w^T
      batch_expand_of(2),             // 3 w^T for every batch
      row(op_kind::matmul, {0, 3}),   // 4 x @ w^T
      map({0}),                       // 5 2 x
      row(op_kind::matmul, {5, 3}),   // 6 (2 x) @ w^T
      reshape_of(0),                  // 7 x as (B * 6, 4)
      row(op_kind::matmul, {7, 1}),   // 8
  };
  constexpr auto plan = make_plan(table, std::array<int, 3>{4, 6, 8});
  STATIC_REQUIRE(plan.gemm_base[3] == 1);               // the weight itself: no copy
  STATIC_REQUIRE(!plan.stored[2] && !plan.stored[3]);
  STATIC_REQUIRE(plan.gemm_base[5] == 5 && plan.stored[5]);  // a map has no memory: it gets a buffer
  STATIC_REQUIRE(plan.gemm_base[7] == 0 && !plan.stored[7]);  // a reshape of x is x's memory
  CHECK(kernels_of(plan) == std::vector<int>{4, 5, 6, 8});
}

TEST_CASE("plan: an op with a kernel of its own reads its children from buffers", "[plan]") {
  constexpr std::array<node_info, 4> table{leaf(), map({0}), row(op_kind::opaque, {1}), map({2})};
  constexpr auto plan = make_plan(table, std::array<int, 1>{3});
  CHECK(stored_of(plan) == std::vector<int>{0, 1, 2, 3});
  CHECK(kernels_of(plan) == std::vector<int>{1, 2, 3});
}
TEST_CASE("plan: an op that names one child several times reads it once", "[plan]") {
  // Attention over a cache given the same tensor as past and new keys and values: five
  // children, two distinct, in a table of four nodes. The walk of a kernel's reads holds
  // each node once, so it fits a stack of the table's size.
  constexpr std::array<node_info, 4> table{leaf(), leaf(), row(op_kind::opaque, {0, 1, 1, 1, 1}), map({2})};
  constexpr auto plan = make_plan(table, std::array<int, 1>{3});
  STATIC_REQUIRE(plan.kernel_count == 2);
  STATIC_REQUIRE(plan.forward_last_use[0] == 0 && plan.forward_last_use[1] == 0);
  CHECK(kernels_of(plan) == std::vector<int>{2, 3});
}

TEST_CASE("plan: a value read many times is stored once evaluating it inline costs more than the limit", "[plan]") {
  // A chain of maps of cost 4 over x: the sixth costs 25 inline, the fifth 21.
  constexpr std::array<node_info, 11> table{
      leaf(),                                          // 0 x
      map({0}, 4), map({1}, 4), map({2}, 4), map({3}, 4), map({4}, 4),  // 1..5 (5 costs 21)
      map({5}, 4),                                     // 6 costs 25
      map({6}), map({6}),                              // 7, 8: two reads of 6
      map({5, 7}),                                     // 9: 5 read a second time
      map({8, 9}),                                     // 10 output
  };
  constexpr auto plan = make_plan(table, std::array<int, 1>{10});
  STATIC_REQUIRE(fanout_recompute_limit == 24);
  STATIC_REQUIRE(plan.reads[6] == 2 && plan.stored[6]);
  STATIC_REQUIRE(plan.reads[5] == 2 && !plan.stored[5]);  // 21: cheap enough to evaluate twice
  STATIC_REQUIRE(plan.inline_cost[7] == 2);               // reads 6 as a load
  CHECK(kernels_of(plan) == std::vector<int>{6, 10});
  // An expand that shows each element 16 times counts as 16 reads.
  constexpr std::array<node_info, 9> spread{leaf(),       map({0}, 4), map({1}, 4), map({2}, 4), map({3}, 4),
                                            map({4}, 4),  map({5}, 4), batch_expand_of(6), map({7})};
  constexpr auto spread_plan = make_plan(spread, std::array<int, 1>{8});
  STATIC_REQUIRE(spread_plan.reads[6] == 16 && spread_plan.stored[6]);
}

TEST_CASE("plan: a sum over a batch axis of a GEMM nothing else reads is one summed GEMM", "[plan]") {
  node_info a = leaf(), b = leaf(), product = row(op_kind::matmul, {0, 1});
  a.rank = b.rank = product.rank = 3;
  node_info summed = sum_of(2, 0);
  summed.rank = 3;
  const std::array<node_info, 4> table{a, b, product, summed};
  const auto summed_plan = make_plan(table, std::array<int, 1>{3}, {}, true);
  CHECK(summed_plan.sums_gemm[3]);
  CHECK(!summed_plan.stored[2]);
  CHECK(kernels_of(summed_plan) == std::vector<int>{3});
  const auto plain = make_plan(table, std::array<int, 1>{3}, {}, false);  // the backend cannot
  CHECK(!plain.sums_gemm[3]);
  CHECK(kernels_of(plain) == std::vector<int>{2, 3});
  const auto kept = make_plan(table, std::array<int, 2>{3, 2}, {}, true);  // the product is wanted
  CHECK(!kept.sums_gemm[3]);
}

TEST_CASE("plan: an elementwise kernel moves up to the run of loops over as many elements", "[plan]") {
  constexpr std::array<node_info, 4> table{leaf(), map({0}), sum_of(1, 1), map({1})};
  constexpr std::array<int, 3> outputs{1, 2, 3};
  const std::array<Dim, 4> counts{Dim{64}, Dim{64}, Dim{8}, Dim{64}};
  auto plan = make_plan(table, outputs);
  CHECK(kernels_of(plan) == std::vector<int>{1, 2, 3});
  detail::hoist_into_groups(table, outputs, counts, plan, false);
  CHECK(kernels_of(plan) == std::vector<int>{1, 3, 2});  // beside the map it reads
  CHECK(plan.kernel_of[3] == 1);
}

TEST_CASE("retention: the backward keeps the forward values it reads, under views, never leaves", "[plan][retention]") {
  constexpr auto retained = detail::retention_set(mlp_step, step_outputs);
  STATIC_REQUIRE(retained[2]);   // v is read by the backward: the value under it, h
  STATIC_REQUIRE(!retained[3]);
  STATIC_REQUIRE(retained[4]);   // a
  STATIC_REQUIRE(!retained[0]);  // x, read through its transpose, is bound
  int count = 0;
  for (bool r : retained) count += r;
  CHECK(count == 2);
  // A program without a backward keeps nothing.
  STATIC_REQUIRE(!detail::retention_set(mlp_step, std::array<int, 1>{5})[4]);
  // A value no input reaches (a mask of iotas) is never kept: as cheap as its constants.
  constexpr std::array<node_info, 7> masked{
      row(op_kind::iota), map({0}),  // 0, 1: a mask of iotas
      leaf(),                        // 2 x
      map({1, 2}), sum_of(3, 1),     // 3, 4: loss = sum(mask * x)  output 0
      map({1}), map({5, 2}),         // 5, 6: the backward reads the mask
  };
  STATIC_REQUIRE(!detail::retention_set(masked, std::array<int, 2>{4, 6})[1]);
}

TEST_CASE("retention: each policy decides what the backward keeps, in one place", "[plan][retention]") {
  constexpr auto retained = detail::retention_set(mlp_step, step_outputs);
  constexpr auto store_all =
      detail::plan_with_retention<retention_policy::store_all>(mlp_step, step_outputs, retained, step_counts, false);
  constexpr auto recompute = detail::plan_with_retention<retention_policy::recompute_elementwise>(
      mlp_step, step_outputs, retained, step_counts, false);
  constexpr auto budget = detail::plan_with_retention<retention_policy::budget{0}>(mlp_step, step_outputs, retained,
                                                                                   step_counts, false);
  // store_all: relu's result gets a buffer for the backward.
  STATIC_REQUIRE(store_all.stored[4] && store_all.kernel_of[4] >= 0);
  // recompute_elementwise: relu fuses into the loss's sum and again into the backward's map.
  STATIC_REQUIRE(!recompute.stored[4]);
  STATIC_REQUIRE(recompute.stored[9]);  // the GEMM's operand: a buffer, of the backward
  // budget: the retention set, and a recompute entry for each forward buffer the backward reads.
  STATIC_REQUIRE(budget.stored[4]);
  STATIC_REQUIRE(budget.recompute_entry[4] >= 0 && budget.recompute_entry[2] >= 0);
  STATIC_REQUIRE(budget.is_recompute[std::size_t(budget.recompute_entry[2])]);
  STATIC_REQUIRE(budget.recompute_entry[2] < budget.recompute_entry[4]);  // h, then a from h
  STATIC_REQUIRE(budget.recompute_entry[4] < budget.kernel_of[9]);          // before the first reader
  STATIC_REQUIRE(budget.recompute_entry[9] == -1 && budget.recompute_entry[5] == -1);  // backward, output
  CHECK(store_all.recompute_read_count == 0);
}

TEST_CASE("retention: a budget keeps the cheapest set of forward buffers that fits", "[plan][retention]") {
  constexpr auto retained = detail::retention_set(mlp_step, step_outputs);
  constexpr auto plan = detail::plan_with_retention<retention_policy::budget{0}>(mlp_step, step_outputs, retained,
                                                                                 step_counts, false);
  std::vector<double> bytes(12, 100.0), flops(12, 0.0);
  flops[2] = 1000;  // recomputing h runs the GEMM again
  flops[4] = 10;    // recomputing a from h, a map
  auto choose = [&](std::size_t budget) { return detail::choose_recomputation(plan, bytes, flops, budget); };
  auto nothing = choose(0);  // recompute both: a from h recomputed from x and w
  CHECK(nothing.recompute[2]);
  CHECK(nothing.recompute[4]);
  CHECK(nothing.retained_bytes == 0);
  CHECK(nothing.recomputed_flops == 1010);
  auto some = choose(100);  // keep h, recompute the cheap a from it
  CHECK(!some.recompute[2]);
  CHECK(some.recompute[4]);
  CHECK(some.retained_bytes == 100);
  CHECK(some.recomputed_flops == 10);
  auto ample = choose(200);
  CHECK(!ample.recompute[2]);
  CHECK(!ample.recompute[4]);
  CHECK(ample.retained_bytes == 200);
  CHECK(ample.exact);
}

TEST_CASE("retention: a budget that even recomputing everything cannot meet is refused", "[plan][retention]") {
  // The backward reads an opaque op's result, which is never recomputed.
  constexpr std::array<node_info, 5> table{leaf(), row(op_kind::opaque, {0}), sum_of(1, 1), map({1}), map({3, 0})};
  constexpr std::array<int, 2> outputs{2, 4};
  constexpr auto retained = detail::retention_set(table, outputs);
  constexpr auto plan =
      detail::plan_with_retention<retention_policy::budget{0}>(table, outputs, retained, std::array<Dim, 5>{}, false);
  STATIC_REQUIRE(plan.recompute_entry[1] == -1);
  std::vector<double> bytes(5, 64.0), flops(5, 1.0);
  REQUIRE_THROWS_AS(detail::choose_recomputation(plan, bytes, flops, 0), input_error);
  CHECK(detail::choose_recomputation(plan, bytes, flops, 64).retained_bytes == 64);
}

TEST_CASE("retention: the FLOPs and bytes a recomputation is weighed by", "[plan][retention]") {
  constexpr auto plan = make_plan(mlp_forward, std::array<int, 1>{5});
  // Extents, rows of max_rank 2: x (8, 3), w (3, 5), x @ w (8, 5), relu, sum (8, 1), + 1.
  const std::vector<index_t> dims{8, 3, 3, 5, 8, 5, 8, 5, 8, 1, 8, 1};
  CHECK(detail::node_bytes(mlp_forward, dims.data(), 2, 2) == 8 * 5 * 4);
  CHECK(detail::kernel_flops(mlp_forward, plan, dims.data(), 2, 2) == 2.0 * 8 * 5 * 3);  // 2 m n k
  CHECK(detail::kernel_flops(mlp_forward, plan, dims.data(), 2, 4) == 8 * 5 * plan.inline_cost[4]);  // per input
}
