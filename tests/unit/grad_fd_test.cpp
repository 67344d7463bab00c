// Gradients of every op against central finite differences, in f64. For every primitive
// op and every composite, a scalar loss sum(op(x) * r) with a fixed random cotangent r is
// differentiated with grad() and compared with (L(x + h e_i) - L(x - h e_i)) / 2h for every
// element (test::check_gradients); the relative error max|analytic - numeric| /
// max|numeric| must be below 1e-6. Inputs stay away from kinks (relu, abs, max, min,
// clamp, fmod) and inside domains (log, sqrt, pow). Shapes vary, several carry a symbolic
// extent bound at run time to two values, and every case runs on every backend.
// Reductions, matmul, movement ops and gather are in grad_fd_structure_test.cpp; composite
// reductions and graph structure (broadcasting, views, fan-out) in grad_fd_graph_test.cpp;
// models and the API around grad() in grad_fd_model_test.cpp.
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using arr = xt::xarray<double>;
using shape_list = std::vector<std::size_t>;
using test::apart_from;
using test::check_gradients;
using test::feeds;
using test::signed_away;
using test::uniform;
const auto distinct = test::distinct_values;
const std::vector<std::size_t> batches{2, 5};
}  // namespace

// ---------------------------------------------------------------------------------------
// Primitive ops. Each group is one loss, a sum of one term per op; each op reads its own
// leaf, named after the op, so a wrong rule shows up as the gradient of that leaf. (One
// program per group, not per op, keeps the compile time of this file down.)
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad fd: primitive unary ops", "[grad][fd]", test_backends) {
  auto e2 = input<"exp2", f64>(shape<Batch, 4>);
  auto l2 = param<"log2", f64>(shape<2, 3, 4>);
  auto sn = param<"sin", f64>(shape<7>);
  auto sq = input<"sqrt", f64>(shape<Batch, 4>);
  auto rc = param<"recip", f64>(shape<2, 3>);
  auto ng = param<"neg", f64>(shape<3, 4>);
  auto r1 = input<"r1", f64>(shape<Batch, 4>);
  auto r2 = input<"r2", f64>(shape<2, 3, 4>);
  auto r3 = input<"r3", f64>(shape<7>);
  auto r5 = input<"r5", f64>(shape<2, 3>);
  auto r6 = input<"r6", f64>(shape<3, 4>);
  auto loss = sum(exp2(e2) * r1) + sum(log2(l2) * r2) + sum(sin(sn) * r3) + sum(sqrt(sq) * r1) +
              sum(recip(rc) * r5) + sum(neg(ng) * sin(r6));
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("exp2", uniform({n, 4}, 1)).add("log2", uniform({2, 3, 4}, 2, 0.5, 2.0))
                                     .add("sin", uniform({7}, 3, -3.0, 3.0)).add("sqrt", uniform({n, 4}, 4, 0.5, 2.0))
                                     .add("recip", signed_away({2, 3}, 5, 0.5, 2.0)).add("neg", uniform({3, 4}, 6))
                                     .add("r1", uniform({n, 4}, 7)).add("r2", uniform({2, 3, 4}, 8)).add("r3", uniform({7}, 9))
                                     .add("r5", uniform({2, 3}, 10)).add("r6", uniform({3, 4}, 11)),
                              e2, l2, sn, sq, rc, ng);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: primitive binary ops and where", "[grad][fd]", test_backends) {
  auto add_x = param<"add.x", f64>(shape<2, 3>);
  auto add_y = param<"add.y", f64>(shape<2, 3>);
  auto mul_x = input<"mul.x", f64>(shape<Batch, 3>);
  auto mul_y = input<"mul.y", f64>(shape<Batch, 3>);
  auto max_x = param<"max.x", f64>(shape<3, 4>);
  auto max_y = param<"max.y", f64>(shape<3, 4>);
  auto where_a = param<"where.a", f64>(shape<5>);
  auto where_b = param<"where.b", f64>(shape<5>);
  auto mod_a = param<"mod.a", f64>(shape<2, 4>);
  auto mod_b = param<"mod.b", f64>(shape<2, 4>);
  auto r1 = input<"r1", f64>(shape<2, 3>);
  auto r2 = input<"r2", f64>(shape<Batch, 3>);
  auto r3 = input<"r3", f64>(shape<3, 4>);
  auto r4 = input<"r4", f64>(shape<5>);
  auto s = input<"s", f64>(shape<5>);
  auto r5 = input<"r5", f64>(shape<2, 4>);
  auto loss = sum(sin(add_x + add_y) * r1) + sum(mul_x * mul_y * r2) + sum(max(max_x, max_y) * r3) +
              sum(where(less_than(s, c<0.0>), sin(where_a), where_b * where_b) * r4) + sum(mod(mod_a, mod_b) * r5);
  arr max_xv = uniform({3, 4}, 23);
  // fmod jumps where a / b crosses an integer: keep a / b at least 0.05 away from one.
  arr mod_av = signed_away({2, 4}, 24, 0.1, 3.0), mod_bv = signed_away({2, 4}, 25, 0.7, 1.3);
  for (std::size_t i = 0; i < mod_av.size(); ++i) {
    double q = mod_av.data()[i] / mod_bv.data()[i];
    if (std::abs(q - std::round(q)) < 0.05) mod_av.data()[i] += 0.1 * mod_bv.data()[i];
  }
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("add.x", uniform({2, 3}, 21)).add("add.y", uniform({2, 3}, 22))
                                     .add("mul.x", uniform({n, 3}, 26)).add("mul.y", uniform({n, 3}, 27))
                                     .add("max.x", max_xv).add("max.y", apart_from(max_xv, 28))
                                     .add("where.a", uniform({5}, 29)).add("where.b", uniform({5}, 30))
                                     .add("mod.a", mod_av).add("mod.b", mod_bv)
                                     .add("r1", uniform({2, 3}, 31)).add("r2", uniform({n, 3}, 32)).add("r3", uniform({3, 4}, 33))
                                     .add("r4", uniform({5}, 34)).add("s", xt::xarray<double>{-1, 1, -1, -1, 1}).add("r5", uniform({2, 4}, 35)),
                              add_x, add_y, mul_x, mul_y, max_x, max_y, where_a, where_b, mod_a, mod_b);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: cast between f32 and f64", "[grad][fd][cast]", test_backends) {
  // f32 arithmetic would drown a 1e-6 step, so the values are dyadic with few bits and
  // the losses quadratic: every intermediate is exact in f32, and a central difference
  // of a quadratic is exact for any step, here 2^-6.
  auto a = param<"a", f64>(shape<2, 3>);  // f64 -> f32 -> f64
  auto b = param<"b", f32>(shape<3, 2>);  // f32 -> f64
  auto ra = input<"ra", f32>(shape<2, 3>);
  auto rb = input<"rb", f64>(shape<3, 2>);
  auto loss = sum(cast<f64>(square(cast<f32>(a)) * ra)) + sum(square(cast<f64>(b)) * rb);
  auto dyadic = [](shape_list shape, unsigned seed, int bits) {
    arr v = uniform(shape, seed);
    return xt::xarray<double>(xt::round(v * double(1 << bits)) / double(1 << bits));
  };
  xt::xarray<f32> rav = xt::cast<f32>(dyadic({2, 3}, 32, 4));
  xt::xarray<f32> bv = xt::cast<f32>(dyadic({3, 2}, 31, 6));
  check_gradients<TestType>(loss,
                            feeds().add("a", dyadic({2, 3}, 30, 6)).add("b", bv).add("ra", rav)
                                   .add("rb", uniform({3, 2}, 33)).step(1.0 / 64),
                            a, b);
}

// ---------------------------------------------------------------------------------------
// Composite elementwise ops: their gradients come from the primitives they are made of.
// Composites build larger graphs, so each gets its own small program (one large program
// costs more to compile than several small ones). Composite reductions (softmax, mean,
// variance...) are in grad_fd_graph_test.cpp.
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad fd: composite elementwise ops", "[grad][fd][composite]", test_backends) {
  auto x = param<"x", f64>(shape<3, 4>);
  auto y = param<"y", f64>(shape<3, 4>);
  auto r = input<"r", f64>(shape<3, 4>);
  const arr rv = uniform({3, 4}, 120);
  const arr wide = uniform({3, 4}, 121, -2.0, 2.0);
  const arr away = signed_away({3, 4}, 122, 0.01, 2.0);  // |x| >= 0.01: no kink at 0
  const arr positive = uniform({3, 4}, 123, 0.5, 2.0);
  auto unary = [&](auto loss, const arr& xv) { check_gradients<TestType>(loss, feeds().add("x", xv).add("r", rv), x); };
  auto binary = [&](auto loss, const arr& xv, const arr& yv) {
    check_gradients<TestType>(loss, feeds().add("x", xv).add("y", yv).add("r", rv), x, y);
  };
  SECTION("sub") { binary(sum(square(x - y) * r), wide, uniform({3, 4}, 124)); }
  SECTION("div") { binary(sum(x / y * r), wide, signed_away({3, 4}, 125, 0.5, 2.0)); }
  SECTION("pow") { binary(sum(pow(x, y) * r), positive, wide); }
  SECTION("min (no ties)") { binary(sum(min(x, y) * r), wide, apart_from(wide, 126)); }
  SECTION("exp") { unary(sum(exp(x) * r), wide); }
  SECTION("log") { unary(sum(log(x) * r), positive); }
  SECTION("abs") { unary(sum(abs(x) * r), away); }
  SECTION("relu") { unary(sum(relu(x) * r), away); }
  SECTION("leaky_relu") { unary(sum(leaky_relu<0.1>(x) * r), away); }
  SECTION("gelu") { unary(sum(gelu(x) * r), wide); }
  SECTION("sigmoid") { unary(sum(sigmoid(x) * r), wide); }
  SECTION("tanh") { unary(sum(tanh(x) * r), wide); }
  SECTION("softplus") { unary(sum(softplus(x) * r), away); }
  SECTION("square") { unary(sum(square(x) * r), wide); }
  SECTION("clamp (away from both bounds)") {
    arr v = away;
    for (auto& e : v)
      if (std::abs(std::abs(e) - 0.5) < 0.01) e *= 1.1;  // none within 0.01 of +-0.5
    unary(sum(clamp<-0.5, 0.5>(x) * r), v);
  }
}
