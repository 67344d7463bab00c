// Gradients of the primitive reductions, matmul, movement ops and gather against central
// finite differences, in f64, as grad_fd_test.cpp checks the elementwise ops (the method,
// tolerances and inputs are described there). Shapes vary, several carry a symbolic
// extent bound at run time to two values, and every case runs on every backend. (Split
// from grad_fd_test.cpp, which needed 2.6 GB of compiler memory with them.)
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using test::check_gradients;
using test::feeds;
using test::uniform;
const auto distinct = test::distinct_values;
const std::vector<std::size_t> batches{2, 5};
}  // namespace

TEMPLATE_LIST_TEST_CASE("grad fd: sum and max reductions", "[grad][fd][reduce]", test_backends) {
  auto sum1 = param<"sum<1>", f64>(shape<2, 3, 4>);
  auto sum02 = param<"sum<0,2>", f64>(shape<2, 3, 4>);
  auto sum_b = input<"sum<0> over Batch", f64>(shape<Batch, 4>);
  auto max1 = param<"max<1>", f64>(shape<2, 5, 3>);
  auto max_b = input<"max<0> and max<-1>", f64>(shape<Batch, 4>);
  auto max_all = param<"max", f64>(shape<3, 4>);
  auto r1 = input<"r1", f64>(shape<2, 4>);
  auto r2 = input<"r2", f64>(shape<3>);
  auto r3 = input<"r3", f64>(shape<1, 4>);
  auto r4 = input<"r4", f64>(shape<2, 3>);
  auto r5 = input<"r5", f64>(shape<4>);
  auto r6 = input<"r6", f64>(shape<Batch>);
  auto loss = sum(sum<1>(sin(sum1)) * r1) + sum(square(sum<0, 2>(sum02)) * r2) +
              sum(square(sum<0>(sum_b, keepdim)) * r3) + sum(max<1>(max1) * r4) + sum(max<0>(max_b) * r5) +
              sum(max<-1>(max_b) * r6) + max(max_all) * c<2.5>;
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("sum<1>", uniform({2, 3, 4}, 41)).add("sum<0,2>", uniform({2, 3, 4}, 42))
                                     .add("sum<0> over Batch", uniform({n, 4}, 43)).add("max<1>", distinct({2, 5, 3}, 44))
                                     .add("max<0> and max<-1>", distinct({n, 4}, 45)).add("max", distinct({3, 4}, 46))
                                     .add("r1", uniform({2, 4}, 47)).add("r2", uniform({3}, 48)).add("r3", uniform({1, 4}, 49))
                                     .add("r4", uniform({2, 3}, 50)).add("r5", uniform({4}, 51)).add("r6", uniform({n}, 52)),
                              sum1, sum02, sum_b, max1, max_b, max_all);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: matmul", "[grad][fd][matmul]", test_backends) {
  auto x = input<"x [Batch,3]", f64>(shape<Batch, 3>);  // matrix x matrix, symbolic rows
  auto w = param<"w [3,2]", f64>(shape<3, 2>);
  auto a = param<"batched a", f64>(shape<2, 3, 4>);
  auto b = param<"batched b", f64>(shape<2, 4, 5>);
  auto ba = param<"broadcast a", f64>(shape<2, 1, 3, 4>);  // batch axes broadcast
  auto bb = param<"broadcast b", f64>(shape<5, 4, 2>);
  auto ta = param<"transposed a", f64>(shape<4, 3>);
  auto tb = param<"tb", f64>(shape<4, 2>);
  auto tw = param<"transposed w", f64>(shape<5, 2>);
  auto r1 = input<"r1", f64>(shape<Batch, 2>);
  auto r2 = input<"r2", f64>(shape<2, 3, 5>);
  auto r3 = input<"r3", f64>(shape<2, 5, 3, 2>);
  auto r4 = input<"r4", f64>(shape<3, 5>);
  auto loss = sum(matmul(x, w) * r1) + sum(matmul(a, b) * r2) + sum(matmul(ba, bb) * r3) +
              sum(matmul(matmul(transpose(ta), tb), transpose(tw)) * r4);
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("x [Batch,3]", uniform({n, 3}, 61)).add("w [3,2]", uniform({3, 2}, 62))
                                     .add("batched a", uniform({2, 3, 4}, 63)).add("batched b", uniform({2, 4, 5}, 64))
                                     .add("broadcast a", uniform({2, 1, 3, 4}, 65)).add("broadcast b", uniform({5, 4, 2}, 66))
                                     .add("transposed a", uniform({4, 3}, 67)).add("tb", uniform({4, 2}, 68))
                                     .add("transposed w", uniform({5, 2}, 69))
                                     .add("r1", uniform({n, 2}, 70)).add("r2", uniform({2, 3, 5}, 71))
                                     .add("r3", uniform({2, 5, 3, 2}, 72)).add("r4", uniform({3, 5}, 73)),
                              x, w, a, b, ba, bb, ta, tb, tw);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: movement ops", "[grad][fd][view]", test_backends) {
  auto pm = param<"permute", f64>(shape<2, 3, 4>);
  auto rs = param<"reshape", f64>(shape<2, 3, 4>);
  auto rs_b = input<"reshape over Batch", f64>(shape<Batch, 2, 3>);
  auto sl = param<"slice", f64>(shape<2, 5, 3>);
  auto sl_b = input<"slice over Batch", f64>(shape<Batch, 3>);
  auto pd = param<"pad", f64>(shape<2, 3>);
  auto pd_b = input<"pad over Batch", f64>(shape<Batch, 3>);
  auto ex = param<"expand", f64>(shape<3, 1>);
  auto r1 = input<"r1", f64>(shape<4, 2, 3>);
  auto r2 = input<"r2", f64>(shape<4, 6>);
  auto r3 = input<"r3", f64>(shape<3, Batch * 2>);
  auto r4 = input<"r4", f64>(shape<2, 2, 3>);
  auto r5 = input<"r5", f64>(shape<Batch - 2, 3>);
  auto r6 = input<"r6", f64>(shape<2, 6>);
  auto r7 = input<"r7", f64>(shape<Batch + 3, 3>);
  auto r8 = input<"r8", f64>(shape<2, 3, 4>);
  auto loss = sum(sin(permute<2, 0, 1>(pm)) * r1) + sum(sin(reshape(rs, shape<4, 6>)) * r2) +
              sum(transpose(reshape(square(rs_b), shape<Batch * 2, 3>)) * r3) + sum(square(slice<1, 1, 3>(sl)) * r4) +
              sum(square(slice<0, 1, -1>(sl_b)) * r5) + sum(square(pad<1, 2, 1>(pd)) * r6) +
              sum(square(pad<0, 1, 2, 1.5>(pd_b)) * r7) + sum(sin(expand(ex, shape<2, 3, 4>)) * r8);
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("permute", uniform({2, 3, 4}, 81)).add("reshape", uniform({2, 3, 4}, 82))
                                     .add("reshape over Batch", uniform({n, 2, 3}, 83)).add("slice", uniform({2, 5, 3}, 84))
                                     .add("slice over Batch", uniform({n, 3}, 85)).add("pad", uniform({2, 3}, 86))
                                     .add("pad over Batch", uniform({n, 3}, 87)).add("expand", uniform({3, 1}, 88))
                                     .add("r1", uniform({4, 2, 3}, 89)).add("r2", uniform({4, 6}, 90)).add("r3", uniform({3, 2 * n}, 91))
                                     .add("r4", uniform({2, 2, 3}, 92)).add("r5", uniform({n - 2, 3}, 93)).add("r6", uniform({2, 6}, 94))
                                     .add("r7", uniform({n + 3, 3}, 95)).add("r8", uniform({2, 3, 4}, 96)),
                              pm, rs, rs_b, sl, sl_b, pd, pd_b, ex);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: gather (the table's gradient)", "[grad][fd][gather]", test_backends) {
  auto table = param<"table", f64>(shape<6, 4>);
  auto ids = input<"ids", i32>(shape<Batch, 3>);
  auto cube = param<"rank-3 table", f64>(shape<5, 2, 2>);
  auto flat_ids = input<"flat_ids", i32>(shape<4>);
  auto r1 = input<"r1", f64>(shape<Batch, 3, 4>);
  auto r2 = input<"r2", f64>(shape<4, 2, 2>);
  auto loss = sum(sin(gather(table, ids)) * r1) + sum(square(gather(cube, flat_ids)) * r2);
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    xt::xarray<i32> iv = test::random_ints<i32>({n, 3}, 101 + unsigned(n), 0, 5);
    iv(0, 0) = iv(1, 2) = 4;  // a repeated id: its row gets the sum of both cotangents
    check_gradients<TestType>(loss,
                              feeds().add("table", uniform({6, 4}, 102)).add("ids", iv).add("rank-3 table", uniform({5, 2, 2}, 103))
                                     .add("flat_ids", xt::xarray<i32>{3, 0, 3, 1}).add("r1", uniform({n, 3, 4}, 104))
                                     .add("r2", uniform({4, 2, 2}, 105)),
                              table, cube);
  }
}
