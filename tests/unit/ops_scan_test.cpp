// scan (ops/scan.hpp): the carries and their gradients against the same recurrence unrolled
// into one graph, at a static length and at a symbolic one rebound between runs.
#include <cmath>
#include <random>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Steps{"Steps"};

/// h' = tanh(x + h w^T + b): an Elman RNN step, written for any leading axes.
struct elman_step {
  template <expression H, expression X, expression W, expression B>
  constexpr auto operator()(H h, X x, W w, B b) const {
    return tanh(x + matmul(h, transpose<-1, -2>(w)) + b);
  }
};

xt::xarray<float> random_array(std::vector<std::size_t> shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  xt::xarray<float> a = xt::xarray<float>::from_shape(shape);
  for (auto& v : a) v = u(rng);
  return a;
}

template <class Program>
void bind_rnn(Program& prog, std::size_t steps) {
  prog.bind("h0", random_array({2, 3}, 1));
  prog.bind("xs", random_array({steps, 2, 3}, 2));
  prog.bind("w", random_array({3, 3}, 3));
  prog.bind("b", random_array({3}, 4));
  if (prog.reads_input("weights")) prog.bind("weights", random_array({steps, 2, 3}, 5));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("scan: carries and gradients equal the unrolled recurrence's", "[ops][scan]", test_backends) {
  constexpr long long L = 4;
  auto h0 = input<"h0", f32>(shape<2, 3>);
  auto xs = input<"xs", f32>(shape<L, 2, 3>);
  auto w = param<"w", f32>(shape<3, 3>);
  auto b = param<"b", f32>(shape<3>);
  auto weights = input<"weights", f32>(shape<L, 2, 3>);

  auto hs = scan(elman_step{}, h0, xs, w, b);
  auto h1 = elman_step{}(h0, squeeze<0>(slice<0, 0, 1>(xs)), w, b);
  auto h2 = elman_step{}(h1, squeeze<0>(slice<0, 1, 2>(xs)), w, b);
  auto h3 = elman_step{}(h2, squeeze<0>(slice<0, 2, 3>(xs)), w, b);
  auto h4 = elman_step{}(h3, squeeze<0>(slice<0, 3, 4>(xs)), w, b);
  auto unrolled = stack<0>(h1, h2, h3, h4);

  auto loss = sum(hs * weights);
  auto reference = sum(unrolled * weights);
  auto [dh0, dxs, dw, db] = grad(loss, h0, xs, w, b);
  auto [rh0, rxs, rw, rb] = grad(reference, h0, xs, w, b);
  auto prog = compile<TestType>(hs, unrolled, dh0, rh0, dxs, rxs, dw, rw, db, rb);
  bind_rnn(prog, L);
  prog.run();
  CHECK(xt::allclose(prog.template output<0>(), prog.template output<1>(), 1e-5, 1e-6));
  CHECK(xt::allclose(prog.template output<2>(), prog.template output<3>(), 1e-5, 1e-6));
  CHECK(xt::allclose(prog.template output<4>(), prog.template output<5>(), 1e-5, 1e-6));
  CHECK(xt::allclose(prog.template output<6>(), prog.template output<7>(), 1e-5, 1e-6));
  CHECK(xt::allclose(prog.template output<8>(), prog.template output<9>(), 1e-5, 1e-6));

  // Forward mode along every input at once: the initial carry, the sequence and a weight.
  auto vh = input<"vh", f32>(shape<2, 3>);
  auto vx = input<"vx", f32>(shape<L, 2, 3>);
  auto vw = input<"vw", f32>(shape<3, 3>);
  auto tangents = compile<TestType>(jvp(hs, h0, xs, w, vh, vx, vw), jvp(unrolled, h0, xs, w, vh, vx, vw));
  bind_rnn(tangents, L);
  tangents.bind("vh", random_array({2, 3}, 6));
  tangents.bind("vx", random_array({L, 2, 3}, 7));
  tangents.bind("vw", random_array({3, 3}, 8));
  tangents.run();
  CHECK(xt::allclose(tangents.template output<0>(), tangents.template output<1>(), 1e-5, 1e-6));
}

TEMPLATE_LIST_TEST_CASE("scan: a symbolic length, rebound between runs", "[ops][scan]", test_backends) {
  auto h0 = input<"h0", f32>(shape<2, 3>);
  auto xs = input<"xs", f32>(shape<Steps, 2, 3>);
  auto w = param<"w", f32>(shape<3, 3>);
  auto b = param<"b", f32>(shape<3>);
  auto weights = input<"weights", f32>(shape<Steps, 2, 3>);
  auto hs = scan(elman_step{}, h0, xs, w, b);
  auto [dh0, dw] = grad(sum(hs * weights), h0, w);
  auto prog = compile<TestType>(hs, dh0, dw);

  for (std::size_t steps : {5u, 2u, 0u, 7u}) {
    bind_rnn(prog, steps);
    prog.run();
    // The same recurrence on the host, in double.
    auto hv = xt::xarray<double>(random_array({2, 3}, 1));
    const auto xv = random_array({steps, 2, 3}, 2), wv = random_array({3, 3}, 3), bv = random_array({3}, 4);
    const auto gv = random_array({steps, 2, 3}, 5);
    const auto got = prog.template output<0>();
    REQUIRE(got.shape(0) == steps);
    std::vector<xt::xarray<double>> before;  // the carry before each step
    for (std::size_t t = 0; t < steps; ++t) {
      before.push_back(hv);
      xt::xarray<double> next = xt::zeros<double>({2, 3});
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) {
          double a = xv(t, i, j) + bv(j);
          for (std::size_t k = 0; k < 3; ++k) a += hv(i, k) * wv(j, k);
          next(i, j) = std::tanh(a);
        }
      hv = next;
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) CHECK(std::abs(got(t, i, j) - hv(i, j)) < 1e-5);
    }
    // Backward: the carry's cotangent from the last step to the first.
    xt::xarray<double> gh = xt::zeros<double>({2, 3}), gw = xt::zeros<double>({3, 3});
    for (std::size_t t = steps; t-- > 0;) {
      xt::xarray<double> ga = xt::zeros<double>({2, 3}), prev = xt::zeros<double>({2, 3});
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) {
          const double h = got(t, i, j);
          ga(i, j) = (gh(i, j) + gv(t, i, j)) * (1 - h * h);
        }
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
          for (std::size_t k = 0; k < 3; ++k) {
            prev(i, k) += ga(i, j) * wv(j, k);
            gw(j, k) += ga(i, j) * before[t](i, k);
          }
      gh = prev;
    }
    CHECK(xt::allclose(prog.template output<1>(), gh, 1e-4, 1e-5));
    CHECK(xt::allclose(prog.template output<2>(), gw, 1e-4, 1e-5));
  }
}
