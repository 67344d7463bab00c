// Gradients of whole graphs against central finite differences, in f64 (the checks of
// the primitive and elementwise ops are in grad_fd_test.cpp and grad_fd_structure_test.cpp,
// models and grad()'s API in grad_fd_model_test.cpp): the composite reductions (softmax,
// log_softmax, logsumexp, mean, variance), broadcasting (the broadcast operand's gradient
// is summed over the broadcast axes), gradients through non-contiguous views, fan-out and
// a deep chain, with symbolic extents bound at run time. Relative error
// max|analytic - numeric| / max|numeric| below 1e-6 throughout; every case runs on every
// backend.
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using arr = xt::xarray<double>;
using test::check_gradients;
using test::feeds;
using test::uniform;
const auto distinct = test::distinct_values;
const std::vector<std::size_t> batches{2, 5};

/// Layers of y -> tanh(y w) + y / 2: each layer reads y twice, so the spelled-out type of
/// layer k names layer 0 2^k times.
template <int Layers, class Y, class W>
auto residual_tanh_chain(Y y, W w) {
  if constexpr (Layers == 0) return y;
  else return residual_tanh_chain<Layers - 1>(tanh(matmul(y, w)) + y * c<0.5>, w);
}
}  // namespace

// ---------------------------------------------------------------------------------------
// Composite reductions: softmax, log_softmax, logsumexp, mean, variance. Each is a
// small graph of primitives (a max or sum reduction, broadcasts back, elementwise ops);
// each gets its own program.
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad fd: composite reductions", "[grad][fd][composite]", test_backends) {
  SECTION("softmax over the last axis, symbolic batch") {
    auto x = input<"x", f64>(shape<Batch, 5>);
    auto r = input<"r", f64>(shape<Batch, 5>);
    for (std::size_t n : batches) {
      INFO("Batch = " << n);
      check_gradients<TestType>(sum(softmax<1>(x) * r), feeds().add("x", uniform({n, 5}, 141, -2.0, 2.0)).add("r", uniform({n, 5}, 142)), x);
    }
  }
  SECTION("softmax over the first axis") {
    auto x = param<"x", f64>(shape<4, 3>);
    auto r = input<"r", f64>(shape<4, 3>);
    check_gradients<TestType>(sum(softmax<0>(x) * r), feeds().add("x", uniform({4, 3}, 143, -2.0, 2.0)).add("r", uniform({4, 3}, 144)), x);
  }
  SECTION("log_softmax") {
    auto x = param<"x", f64>(shape<2, 3, 4>);
    auto r = input<"r", f64>(shape<2, 3, 4>);
    check_gradients<TestType>(sum(log_softmax<-1>(x) * r),
                              feeds().add("x", uniform({2, 3, 4}, 145, -2.0, 2.0)).add("r", uniform({2, 3, 4}, 146)), x);
  }
  SECTION("logsumexp") {
    auto x = param<"x", f64>(shape<3, 5>);
    auto r = input<"r", f64>(shape<3>);
    check_gradients<TestType>(sum(logsumexp<1>(x) * r), feeds().add("x", uniform({3, 5}, 147, -2.0, 2.0)).add("r", uniform({3}, 148)), x);
  }
  SECTION("mean over an axis, over the symbolic axis and over everything") {
    auto x = input<"x", f64>(shape<Batch, 3, 4>);
    auto r = input<"r", f64>(shape<Batch, 4>);
    auto s = input<"s", f64>(shape<3, 4>);
    for (std::size_t n : batches) {
      INFO("Batch = " << n);
      // mean<0> divides by the bound extent of Batch.
      check_gradients<TestType>(sum(mean<1>(x) * r) + sum(square(mean<0>(x)) * s) + square(mean(x)),
                                feeds().add("x", uniform({n, 3, 4}, 149)).add("r", uniform({n, 4}, 150)).add("s", uniform({3, 4}, 151)), x);
    }
  }
  SECTION("variance") {
    auto x = input<"x", f64>(shape<Batch, 5>);
    auto r = input<"r", f64>(shape<Batch>);
    auto s = input<"s", f64>(shape<5>);
    for (std::size_t n : batches) {
      INFO("Batch = " << n);
      check_gradients<TestType>(sum(variance<1>(x) * r) + sum(variance<0>(x) * s),
                                feeds().add("x", uniform({n, 5}, 152)).add("r", uniform({n}, 153)).add("s", uniform({5}, 154)), x);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Graph structure: broadcasting, views, fan-out
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("grad fd: broadcasting sums the gradient over broadcast axes", "[grad][fd][broadcast]",
                        test_backends) {
  auto x = input<"x", f64>(shape<Batch, 1, 4>);
  auto y = param<"y", f64>(shape<3, 4>);
  auto s = param<"s", f64>(shape<>);
  auto col = param<"col", f64>(shape<3, 1>);
  auto r = input<"r", f64>(shape<Batch, 3, 4>);
  auto loss = sum(sin(x * y + y + col) * r) + sum(square(x + s));
  for (std::size_t n : {1, 2, 5}) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss,
                              feeds().add("x", uniform({n, 1, 4}, 161)).add("y", uniform({3, 4}, 162)).add("s", uniform({}, 163))
                                     .add("col", uniform({3, 1}, 164)).add("r", uniform({n, 3, 4}, 165)),
                              x, y, s, col);
  }
}

TEMPLATE_LIST_TEST_CASE("grad fd: gradients through non-contiguous views", "[grad][fd][view]", test_backends) {
  auto x = param<"x", f64>(shape<3, 4>);
  auto z = param<"z", f64>(shape<2, 3, 4>);
  auto v = param<"v", f64>(shape<3, 1>);
  auto r1 = input<"r1", f64>(shape<4, 3>);
  auto r2 = input<"r2", f64>(shape<4, 2, 3>);
  auto r3 = input<"r3", f64>(shape<2, 3>);
  auto r4 = input<"r4", f64>(shape<3, 7>);
  // transpose, permute, slice of a transpose, pad of a slice, expand; and a matmul
  // reading a permuted view of z.
  auto loss = sum(exp(transpose(x)) * r1) + sum(sin(permute<2, 0, 1>(z)) * r2) +
              sum(square(slice<0, 1, 3>(transpose(x))) * r3) + sum(square(pad<1, 2, 3, 0.5>(slice<1, 1, 3>(x))) * r4) +
              sum(sin(expand(v, shape<2, 3, 4>) * z)) + sum(matmul(permute<1, 0, 2>(z), transpose(x)) * reshape(v, shape<3, 1, 1>));
  check_gradients<TestType>(loss,
                            feeds().add("x", uniform({3, 4}, 171)).add("z", uniform({2, 3, 4}, 172)).add("v", uniform({3, 1}, 173))
                                   .add("r1", uniform({4, 3}, 174)).add("r2", uniform({4, 2, 3}, 175)).add("r3", uniform({2, 3}, 176))
                                   .add("r4", uniform({3, 7}, 177)),
                            x, z, v);
}

TEMPLATE_LIST_TEST_CASE("grad fd: fan-out sums the contributions of every use", "[grad][fd][fanout]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 3>);
  auto z = input<"z", f64>(shape<Batch, 3>);
  auto r = input<"r", f64>(shape<Batch, 3>);
  // x used three times; and an intermediate read by several consumers, through views
  // and reductions.
  auto h = tanh(z);
  auto loss = sum(x * exp(x) + sin(x)) + sum(h * h * r) + sum(max<1>(h) * sum<1>(h)) + sum(transpose(h) * transpose(r));
  for (std::size_t n : batches) {
    INFO("Batch = " << n);
    check_gradients<TestType>(loss, feeds().add("x", uniform({n, 3}, 181)).add("z", distinct({n, 3}, 182)).add("r", uniform({n, 3}, 183)),
                              x, z);
  }
}

// A gradient graph as deep as a small transformer's: 12 layers that each reuse their
// input. nvcc once stopped here (its instantiation-depth limit, after time exponential in
// depth), so that this compiles in luminal_cuda_tests is part of the check.
TEMPLATE_LIST_TEST_CASE("grad fd: a 12-layer chain that reuses every layer's input", "[grad][fd][deep]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 4>);
  auto w = param<"w", f64>(shape<4, 4>);
  auto loss = sum(residual_tanh_chain<12>(x, w));
  check_gradients<TestType>(loss, feeds().add("x", uniform({3, 4}, 184)).add("w", uniform({4, 4}, 185, -0.5, 0.5)), x, w);
}
