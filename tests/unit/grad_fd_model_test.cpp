// Gradients of models and of grad()'s API against central finite differences, in f64:
// a 2-layer MLP with softmax cross-entropy and layer norm, with symbolic extents bound at
// run time; then stop_gradient, a leaf the loss does not depend on, value_and_grad and
// vjp_of. Relative error max|analytic - numeric| / max|numeric| below 1e-6 throughout;
// every case runs on every backend. (Split from grad_fd_graph_test.cpp, whose graphs and
// these together needed 2.5 GB of compiler memory.)
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using arr = xt::xarray<double>;
using test::check_gradients;
using test::feeds;
using test::uniform;
const std::vector<std::size_t> batches{2, 5};
}  // namespace

// ---------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad fd: 2-layer MLP with softmax cross-entropy", "[grad][fd][model]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 4>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto w1 = param<"w1", f64>(shape<4, 6>);
  auto b1 = param<"b1", f64>(shape<6>);
  auto w2 = param<"w2", f64>(shape<6, 3>);
  auto b2 = param<"b2", f64>(shape<3>);
  auto hidden = tanh(matmul(x, w1) + b1);
  auto logits = matmul(hidden, w2) + b2;
  auto onehot = cast<f64>(equal(reshape(labels, shape<Batch, 1>), iota<1, i32>(shape<Batch, 3>)));
  auto loss = neg(mean(sum<1>(onehot * log_softmax<1>(logits))));
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("x", uniform({n, 4}, 201)).add("labels", test::random_ints<i32>({n}, 202, 0, 2))
                                     .add("w1", uniform({4, 6}, 203)).add("b1", uniform({6}, 204, -0.1, 0.1))
                                     .add("w2", uniform({6, 3}, 205)).add("b2", uniform({3}, 206, -0.1, 0.1)),
                              w1, b1, w2, b2, x);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: layer norm from mean and variance", "[grad][fd][model]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 6>);
  auto gamma = param<"gamma", f64>(shape<6>);
  auto beta = param<"beta", f64>(shape<6>);
  auto r = input<"r", f64>(shape<Batch, 6>);
  auto normalized = (x - mean<1>(x, keepdim)) / sqrt(variance<1>(x, keepdim) + c<1e-5>);
  auto loss = sum((normalized * gamma + beta) * r);
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("x", uniform({n, 6}, 211)).add("gamma", uniform({6}, 212, 0.5, 1.5))
                                     .add("beta", uniform({6}, 213)).add("r", uniform({n, 6}, 214)),
                              x, gamma, beta);
  }
}

// ---------------------------------------------------------------------------------------
// Zero gradients, value_and_grad, vjp_of
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad: stop_gradient blocks the gradient", "[grad][stop_gradient]", test_backends) {
  auto x = param<"x", f64>(shape<3, 4>);
  auto r = input<"r", f64>(shape<3, 4>);
  arr xv = uniform({3, 4}, 221), rv = uniform({3, 4}, 222);
  // Only through stop_gradient: exactly zero.
  auto blocked = sum(stop_gradient(exp(x)) * r);
  // Partly: d/dx [stop(x) * sin(x) * r] = x cos(x) r, not sin(x) r + x cos(x) r.
  auto partial = sum(stop_gradient(x) * sin(x) * r);
  auto prog = compile<TestType>(blocked, grad(blocked, x), partial, grad(partial, x));
  prog.bind("x", xv);
  prog.bind("r", rv);
  prog.run();
  test::require_close(prog.template output<1>(), xt::zeros<double>({3, 4}), 0, 0);
  test::require_close(prog.template output<3>(), xv * xt::cos(xv) * rv, 1e-12, 1e-14);
  // The forward value is unchanged.
  REQUIRE(double(prog.template output<0>()()) == Approx(xt::sum(xt::exp(xv) * rv)()).epsilon(1e-12));
}

TEMPLATE_LIST_TEST_CASE("grad: a leaf the loss does not depend on gets zeros", "[grad][fd]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 3>);
  auto w = param<"w", f64>(shape<3, 2>);
  auto ids = input<"ids", i32>(shape<Batch>);
  auto r = input<"r", f64>(shape<Batch, 3>);
  // The loss reads ids only through a comparison, and w not at all.
  auto loss = sum(exp(x) * r * cast<f64>(less_than(reshape(ids, shape<Batch, 1>), c<2>)));
  auto [dx, dw] = grad(loss, x, w);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(dw)>, Shape<3, 2>>);
  auto prog = compile<TestType>(loss, dx, dw);
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    arr xv = uniform({n, 3}, 231);
    feeds().add("x", xv).add("r", uniform({n, 3}, 232)).add("ids", test::random_ints<i32>({n}, 233, 0, 3)).bind(prog);
    prog.run();
    test::require_close(prog.template output<2>(), xt::zeros<double>({3, 2}), 0, 0);
    auto analytic = prog.template output<1>();
    test::require_gradient_close(analytic, test::numeric_gradient(prog, "x", xv), 1e-6, "x");
  }
}

TEMPLATE_LIST_TEST_CASE("grad: value_and_grad gives the forward loss and grad's gradients", "[grad]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 3>);
  auto w = param<"w", f64>(shape<3, 2>);
  auto b = param<"b", f64>(shape<2>);
  auto loss = mean(square(tanh(matmul(x, w) + b)));
  auto [value, dw, db] = value_and_grad(loss, w, b);
  STATIC_REQUIRE(std::is_same_v<decltype(value), decltype(loss)>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::tuple{dw, db}), decltype(grad(loss, w, b))>);
  auto forward = compile<TestType>(loss);
  auto both = compile<TestType>(value, dw, db);
  arr xv = uniform({4, 3}, 241), wv = uniform({3, 2}, 242), bv = uniform({2}, 243);
  forward.bind("x", xv);
  forward.bind("w", wv);
  forward.bind("b", bv);
  both.bind("x", xv);
  both.bind("w", wv);
  both.bind("b", bv);
  forward.run();
  both.run();
  REQUIRE(test::scalar_output(both) == test::scalar_output(forward));
  check_gradients<TestType>(loss, feeds().add("x", xv).add("w", wv).add("b", bv), w, b);
}

TEMPLATE_LIST_TEST_CASE("grad: vjp_of equals grad of sum(output * cotangent)", "[grad][vjp]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 3>);
  auto w = param<"w", f64>(shape<3, 2>);
  auto ct = input<"ct", f64>(shape<Batch, 2>);
  auto y = sigmoid(matmul(x, w)) * sum<1>(x, keepdim);
  auto [vw, vx] = vjp_of(y, ct, w, x);
  auto loss = sum(y * ct);
  auto [gw, gx] = grad(loss, w, x);
  auto vjp_prog = compile<TestType>(vw, vx);
  auto grad_prog = compile<TestType>(loss, gw, gx);  // the program check_gradients builds
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    feeds in = feeds().add("x", uniform({n, 3}, 251)).add("w", uniform({3, 2}, 252)).add("ct", uniform({n, 2}, 253));
    in.bind(vjp_prog);
    in.bind(grad_prog);
    vjp_prog.run();
    grad_prog.run();
    test::require_close(vjp_prog.template output<0>(), grad_prog.template output<1>(), 1e-12, 1e-14);
    test::require_close(vjp_prog.template output<1>(), grad_prog.template output<2>(), 1e-12, 1e-14);
    check_gradients<TestType>(loss, in, w, x);
  }
}
