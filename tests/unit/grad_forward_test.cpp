// Forward mode and second order against finite differences, in f64, on every backend:
// jvp() of every primitive op against the central difference of the output along the
// tangent, (f(x + h t) - f(x - h t)) / 2h; hvp(), hessian() and grad of grad against the
// central difference of the gradient; custom_vjp / custom_jvp use the user's rule, and the
// custom node fuses. The relative error max|analytic - numeric| / max|numeric| must be
// below 1e-6. Inputs stay away from kinks and inside domains, as in grad_fd_test.cpp.
// grad_forward_torch_test.cpp compares composites with torch.func.
#include <xtensor/xview.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
using arr = xt::xarray<double>;
using test::feeds;
using test::require_gradient_close;
using test::signed_away;
using test::uniform;

/// One leaf and its tangent (or vector), with their values.
struct direction {
  std::string leaf, tangent;
  arr value, along;
};

/// Binds every direction's leaf at value + s * along, and its tangent input.
template <class Prog>
void bind_at(Prog& prog, const std::vector<direction>& dirs, double s) {
  for (const auto& d : dirs) {
    prog.bind(d.leaf, arr(d.value + s * d.along));
    prog.bind(d.tangent, d.along);
  }
}

/// Output I of prog as doubles.
template <std::size_t I, class Prog>
arr output_of(const Prog& prog) {
  return xt::cast<double>(prog.template output<I>());
}

/// Requires jvp(output, leaves..., tangents...) to match the central difference of
/// `output` along the tangents. `in` binds the other inputs.
template <class B, expression Out, expression... LeavesThenTangents>
void check_jvp(Out out, const feeds& in, const std::vector<direction>& dirs, LeavesThenTangents... args) {
  auto prog = compile<B>(out, jvp(out, args...));
  in.bind(prog);
  bind_at(prog, dirs, 0.0);
  prog.run();
  const arr analytic = output_of<1>(prog);
  const double h = in.h;
  bind_at(prog, dirs, h);
  prog.run();
  const arr up = output_of<0>(prog);
  bind_at(prog, dirs, -h);
  prog.run();
  const arr down = output_of<0>(prog);
  require_gradient_close(analytic, arr((up - down) / (2 * h)), 1e-6, "the jvp");
}

/// Requires outputs N..2N-1 of prog (e.g. hvp) to match the central differences of
/// outputs 0..N-1 (the gradients) along the directions. `in` binds the other inputs.
template <std::size_t N, class Prog>
void check_along(Prog& prog, const feeds& in, const std::vector<direction>& dirs, const char* what) {
  in.bind(prog);
  bind_at(prog, dirs, 0.0);
  prog.run();
  std::vector<arr> analytic, up, down;
  auto read = [&](std::vector<arr>& to, std::size_t first) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (to.push_back(output_of<I>(prog)), ...); }(
        std::make_index_sequence<2 * N>{});
    to.erase(to.begin(), to.begin() + std::ptrdiff_t(first));
    to.resize(N);
  };
  read(analytic, N);
  bind_at(prog, dirs, in.h);
  prog.run();
  read(up, 0);
  bind_at(prog, dirs, -in.h);
  prog.run();
  read(down, 0);
  for (std::size_t k = 0; k < N; ++k) {
    INFO(what << ", output " << k);
    require_gradient_close(analytic[k], arr((up[k] - down[k]) / (2 * in.h)), 1e-6, what);
  }
}
}  // namespace

// ---------------------------------------------------------------------------------------
// jvp of every primitive. Each group is one output with one term per op, every op reading
// its own leaf; the tangent of every leaf is a random input.
// ---------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("jvp fd: unary maps", "[grad][jvp]", test_backends) {
  auto x = param<"x", f64>(shape<Batch, 4>);
  auto t = input<"t", f64>(shape<Batch, 4>);
  auto p = param<"p", f64>(shape<2, 3>);  // positive: log2, sqrt, recip
  auto tp = input<"tp", f64>(shape<2, 3>);
  auto out_x = exp2(x) + sin(x) * c<2> + cos(x) + erf(x) + erfc(x) * c<3> + log1p(x * c<0.5>) + expm1(x) + neg(x) * x;
  auto out_p = log2(p) + sqrt(p) + recip(p);
  auto floors = floor(x * c<3>) + round(x) + trunc(x) + ceil(x);  // piecewise constant: zero tangent
  for (std::size_t n : {2u, 5u}) {
    INFO("Batch = " << n);
    const std::vector<direction> dirs{{"x", "t", uniform({n, 4}, 1), uniform({n, 4}, 2)},
                                      {"p", "tp", uniform({2, 3}, 3, 0.5, 2.0), uniform({2, 3}, 4)}};
    check_jvp<TestType>(out_x, feeds(), {dirs[0]}, x, t);
    check_jvp<TestType>(out_p, feeds(), {dirs[1]}, p, tp);
  }
  // Rounding has no tangent: the jvp simplifies to a zero constant, not a kernel.
  using zero = decltype(jvp(floors, x, t));
  STATIC_REQUIRE(detail::constant_value<zero>::known && detail::constant_value<zero>::value == 0);
}

TEMPLATE_LIST_TEST_CASE("jvp fd: binary maps, where and pow", "[grad][jvp]", test_backends) {
  auto a = param<"a", f64>(shape<3, 4>);
  auto b = param<"b", f64>(shape<3, 4>);
  auto ta = input<"ta", f64>(shape<3, 4>);
  auto tb = input<"tb", f64>(shape<3, 4>);
  auto s = input<"s", f64>(shape<3, 4>);
  // a in (0.5, 2): pow's base; b apart from a: max and min without ties; a/b not near an
  // integer: fmod without jumps.
  auto out = a * b + max(a, b) + min(a, b) * c<2> + relu(b) + where(less_than(s, c<0.0>), sin(a), b * b) +
             mod(a, b + c<3>) + pow(a, b) + pow(a, c<3>) + pow(b, c<2>) + clamp<-0.5, 0.5>(b);
  arr av = uniform({3, 4}, 10, 0.5, 2.0);
  arr bv = av + signed_away({3, 4}, 11, 0.05, 0.5);
  for (auto& e : bv)
    if (std::abs(std::abs(e) - 0.5) < 0.02) e += 0.05;  // away from clamp's bounds
  check_jvp<TestType>(out, feeds().add("s", uniform({3, 4}, 12)),
                      {{"a", "ta", av, uniform({3, 4}, 13)}, {"b", "tb", bv, uniform({3, 4}, 14)}}, a, b, ta, tb);
}

TEMPLATE_LIST_TEST_CASE("jvp fd: cast between f64 and f32", "[grad][jvp][cast]", test_backends) {
  // As grad_fd_test.cpp's cast case: dyadic values with few bits and a quadratic output,
  // so every f32 intermediate is exact and a step of 2^-6 gives the exact difference.
  auto a = param<"a", f64>(shape<2, 3>);
  auto ta = input<"ta", f64>(shape<2, 3>);
  auto out = cast<f64>(square(cast<f32>(a)));
  auto dyadic = [](std::vector<std::size_t> shape, unsigned seed, int bits) {
    return arr(xt::round(uniform(shape, seed) * double(1 << bits)) / double(1 << bits));
  };
  check_jvp<TestType>(out, feeds().step(1.0 / 64), {{"a", "ta", dyadic({2, 3}, 20, 6), dyadic({2, 3}, 21, 4)}}, a, ta);
}

TEMPLATE_LIST_TEST_CASE("jvp fd: reductions and matmul", "[grad][jvp]", test_backends) {
  auto x = param<"x", f64>(shape<2, 3, 4>);
  auto tx = input<"tx", f64>(shape<2, 3, 4>);
  auto w = param<"w", f64>(shape<4, 5>);
  auto tw = input<"tw", f64>(shape<4, 5>);
  auto out = sum<1>(x) + max<1>(x) * c<2> + max<0, 1>(x) + sum<0, 1>(x) * c<0.5>;
  auto product = matmul(x, w) + matmul(x, w * w);  // batched by a broadcast matrix
  const std::vector<direction> dirs{{"x", "tx", test::distinct_values({2, 3, 4}, 30), uniform({2, 3, 4}, 31)},
                                    {"w", "tw", uniform({4, 5}, 32), uniform({4, 5}, 33)}};
  check_jvp<TestType>(out, feeds(), {dirs[0]}, x, tx);
  check_jvp<TestType>(product, feeds(), dirs, x, w, tx, tw);
}

TEMPLATE_LIST_TEST_CASE("jvp fd: views and gather", "[grad][jvp]", test_backends) {
  auto x = param<"x", f64>(shape<Batch, 6>);
  auto tx = input<"tx", f64>(shape<Batch, 6>);
  auto table = param<"table", f64>(shape<5, 3>);
  auto tt = input<"tt", f64>(shape<5, 3>);
  auto ids = input<"ids", i32>(shape<4>);
  auto moved = reshape(transpose(reshape(x, shape<Batch, 2, 3>)), shape<Batch, 6>) + slice<1, 1, 7>(pad<1, 1, 0, 2.0>(x));
  auto windows = sum<-1>(unfold<1, 3, 2>(x)) + expand(sum<1>(x, keepdim), shape<Batch, 2>);
  auto joined = concat<1>(x, sin(x)) + concat<1>(sin(x), x);
  auto rows = gather(table, ids) * c<2>;
  for (std::size_t n : {2u, 3u}) {
    INFO("Batch = " << n);
    const direction dx{"x", "tx", uniform({n, 6}, 40), uniform({n, 6}, 41)};
    check_jvp<TestType>(moved, feeds(), {dx}, x, tx);
    check_jvp<TestType>(windows, feeds(), {dx}, x, tx);
    check_jvp<TestType>(joined, feeds(), {dx}, x, tx);
  }
  check_jvp<TestType>(rows, feeds().add("ids", xt::xarray<i32>{4, 0, 2, 4}),
                      {{"table", "tt", uniform({5, 3}, 42), uniform({5, 3}, 43)}}, table, tt);
}

#ifndef __CUDACC__  // host only; nvcc misspells the decltypes of these programs (test_support.hpp)
TEST_CASE("jvp: several outputs, several leaves, and an output that does not vary", "[grad][jvp]") {
  auto x = param<"x", f64>(shape<3>);
  auto y = param<"y", f64>(shape<3>);
  auto tx = input<"tx", f64>(shape<3>);
  auto ty = input<"ty", f64>(shape<3>);
  auto k = input<"k", f64>(shape<3>);  // the tangent of k * k is a zero constant
  auto [dxy, dx, dk] = jvp(std::tuple{x * y, sin(x), k * k}, x, y, tx, ty);
  auto prog = compile(dxy, dx, dk);
  prog.bind("x", arr{1, 2, 3});
  prog.bind("y", arr{-1, 0.5, 2});
  prog.bind("tx", arr{0.5, 1, -1});
  prog.bind("ty", arr{2, 0, 1});
  prog.run();
  REQUIRE(bool(output_of<0>(prog) == arr{0.5 * -1 + 1 * 2, 1 * 0.5 + 0, -1 * 2 + 3 * 1}));
  require_gradient_close(output_of<1>(prog), arr(xt::cos(arr{1, 2, 3}) * arr{0.5, 1, -1}), 1e-12, "sin");
  REQUIRE(bool(output_of<2>(prog) == arr{0, 0, 0}));
}
#endif

// ---------------------------------------------------------------------------------------
// Second order: hvp (forward over reverse), grad of grad (reverse over reverse), hessian.
// ---------------------------------------------------------------------------------------

namespace {
/// A two-layer tanh network's squared error: smooth, with every kind of second term.
template <class X, class W1, class B1, class W2>
auto tanh_mlp_loss(X x, W1 w1, B1 b1, W2 w2) {
  auto y = matmul(tanh(matmul(x, w1) + b1), w2);
  return mean(square(y - c<0.5>)) + sum(exp(b1) * c<0.1>);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("hvp fd: forward over reverse, and grad of grad", "[grad][hvp]", test_backends) {
  auto x = input<"x", f64>(shape<Batch, 3>);
  auto w1 = param<"w1", f64>(shape<3, 4>);
  auto b1 = param<"b1", f64>(shape<4>);
  auto w2 = param<"w2", f64>(shape<4, 2>);
  auto v1 = input<"v1", f64>(shape<3, 4>);
  auto vb = input<"vb", f64>(shape<4>);
  auto loss = tanh_mlp_loss(x, w1, b1, w2);
  auto [g1, gb] = grad(loss, w1, b1);
  auto [h1, hb] = hvp(loss, w1, b1, v1, vb);
  // Reverse over reverse: the gradient of <grad, v> is H v as well.
  auto [r1, rb] = grad(sum(g1 * v1) + sum(gb * vb), w1, b1);
  for (std::size_t n : {3u, 5u}) {
    INFO("Batch = " << n);
    const std::vector<direction> dirs{{"w1", "v1", uniform({3, 4}, 50), uniform({3, 4}, 51)},
                                      {"b1", "vb", uniform({4}, 52), uniform({4}, 53)}};
    const feeds in = feeds().add("x", uniform({n, 3}, 54)).add("w2", uniform({4, 2}, 55)).step(1e-5);
    auto hvp_prog = compile<TestType>(g1, gb, h1, hb);
    check_along<2>(hvp_prog, in, dirs, "hvp");
    auto rr_prog = compile<TestType>(g1, gb, r1, rb);
    check_along<2>(rr_prog, in, dirs, "grad of grad");
  }
}

TEMPLATE_LIST_TEST_CASE("hessian fd: rows against differences of the gradient", "[grad][hessian]", test_backends) {
  auto w = param<"w", f64>(shape<2, 3>);
  auto x = input<"x", f64>(shape<4, 2>);
  auto loss = sum(softplus(matmul(x, w))) + sum(square(w) * w) * c<0.25>;
  auto h = hessian(loss, w);
  STATIC_REQUIRE(std::is_same_v<shape_t<decltype(h)>, Shape<6, 6>>);
  auto prog = compile<TestType>(reshape(grad(loss, w), shape<6>), h);
  const arr wv = uniform({2, 3}, 60), xv = uniform({4, 2}, 61);
  prog.bind("x", xv);
  prog.bind("w", wv);
  prog.run();
  const arr hv = output_of<1>(prog);
  require_gradient_close(hv, arr(xt::transpose(hv)), 1e-12, "symmetry");
  const double step = 1e-5;
  for (std::size_t i = 0; i < 6; ++i) {
    arr up = wv, down = wv;
    up.data()[i] += step;
    down.data()[i] -= step;
    prog.bind("w", up);
    prog.run();
    const arr gu = output_of<0>(prog);
    prog.bind("w", down);
    prog.run();
    const arr gd = output_of<0>(prog);
    INFO("row " << i);
    require_gradient_close(arr(xt::view(hv, i, xt::all())), arr((gu - gd) / (2 * step)), 1e-6, "hessian row");
  }
}

#ifndef __CUDACC__  // host only; nvcc misspells the decltypes of these programs (test_support.hpp)
TEST_CASE("second order: type-level simplification keeps the graphs small", "[grad][hvp]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto w1 = param<"w1", f32>(shape<8, 16>);
  auto b1 = param<"b1", f32>(shape<16>);
  auto w2 = param<"w2", f32>(shape<16, 2>);
  auto v = input<"v", f32>(shape<8, 16>);
  auto loss = tanh_mlp_loss(x, w1, b1, w2);
  auto g = grad(loss, w1);
  auto hv = hvp(loss, w1, v);
  auto rr = grad(sum(g * v), w1);
  constexpr std::size_t forward = boost::mp11::mp_size<topo_nodes<decltype(loss)>>::value;
  constexpr std::size_t first = boost::mp11::mp_size<topo_nodes<decltype(loss), decltype(g)>>::value;
  constexpr std::size_t forward_over_reverse = boost::mp11::mp_size<topo_nodes<decltype(loss), decltype(g), decltype(hv)>>::value;
  constexpr std::size_t reverse_over_reverse = boost::mp11::mp_size<topo_nodes<decltype(loss), decltype(g), decltype(rr)>>::value;
  constexpr int kernels_first = decltype(compile(g))::kernel_count();
  constexpr int kernels_second = decltype(compile(g, hv))::kernel_count();
  WARN("nodes: loss " << forward << ", with its gradient " << first << ", with hvp " << forward_over_reverse
                      << ", with grad of grad " << reverse_over_reverse << "; kernels " << kernels_first << " and " << kernels_second);
  INFO("nodes: loss " << forward << ", with its gradient " << first << ", with hvp " << forward_over_reverse
                      << ", with grad of grad " << reverse_over_reverse);
  // A second-order pass adds at most about twice the first-order graph (one tangent or
  // cotangent node per node of the gradient graph, plus the products of the rules).
  STATIC_REQUIRE(forward_over_reverse <= 3 * first);
  STATIC_REQUIRE(reverse_over_reverse <= 3 * first);
  // Kernels: the tangents fuse into the gradient's kernels rather than each getting one.
  // The tangents add their own GEMMs (one per product rule) and fuse their elementwise
  // work into shared loops (describe() shows "one loop with kernels ...").
  CHECK(kernels_second <= 3 * kernels_first);
}
#endif

// ---------------------------------------------------------------------------------------
// custom_vjp and custom_jvp
// ---------------------------------------------------------------------------------------

namespace {
struct straight_through {  // round forward, identity backward: the true derivative is 0
  static constexpr auto forward(auto x) { return round(x); }
  static constexpr auto vjp(auto g, auto, auto) { return g; }
};
struct clip_gradient {  // identity forward, the cotangent clipped to [-1, 1]
  static constexpr auto forward(auto x) { return x; }
  static constexpr auto vjp(auto g, auto, auto) { return clamp<-1.0, 1.0>(g); }
};
struct scaled_product {  // x * y forward; cotangents 3 g y and 5 g (not g y and g x)
  static constexpr auto forward(auto x, auto y) { return x * y; }
  static constexpr auto vjp(auto g, auto, auto, auto y) { return std::tuple{g * y * c<3>, g * c<5>}; }
};
struct doubled_sine {  // sin forward; its own jvp is twice the true one
  static constexpr auto forward(auto x) { return sin(x); }
  static constexpr auto jvp(auto, auto x, auto t) { return t * cos(x) * c<2>; }
};
}  // namespace

TEMPLATE_LIST_TEST_CASE("custom_vjp: the reverse pass uses the rule", "[grad][custom]", test_backends) {
  auto x = param<"x", f64>(shape<Batch, 3>);
  auto y = param<"y", f64>(shape<Batch, 3>);
  auto r = input<"r", f64>(shape<Batch, 3>);
  auto rounded = grad(sum(custom_vjp<straight_through>(x * x) * r), x);
  auto dclip = grad(sum(custom_vjp<clip_gradient>(x) * r), x);
  auto [dx, dy] = grad(sum(custom_vjp<scaled_product>(x, y) * r), x, y);
  auto value = custom_vjp<scaled_product>(x, y);
  auto prog = compile<TestType>(rounded, dclip, dx, dy, value);
  const arr xv{{0.4, -1.2, 2.0}, {0.1, 0.7, -0.3}}, yv{{1, 2, 3}, {-1, -2, -3}}, rv{{3, -0.5, 1}, {-2, 0.25, 4}};
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.bind("r", rv);
  prog.run();
  require_gradient_close(output_of<0>(prog), arr(rv * 2 * xv), 1e-12, "straight-through");
  require_gradient_close(output_of<1>(prog), arr(xt::clip(rv, -1.0, 1.0)), 1e-12, "clipped");
  require_gradient_close(output_of<2>(prog), arr(rv * yv * 3), 1e-12, "x of the product");
  require_gradient_close(output_of<3>(prog), arr(rv * 5), 1e-12, "y of the product");
  require_gradient_close(output_of<4>(prog), arr(xv * yv), 1e-12, "the product's value");
}

TEST_CASE("custom_vjp: the custom node fuses and adds no kernel", "[grad][custom]") {
  auto x = param<"x", f32>(shape<Batch, 8>);
  auto w = param<"w", f32>(shape<8, 8>);
  auto plain = sum(tanh(matmul(x, w)) * c<2>);
  auto custom = sum(custom_vjp<clip_gradient>(tanh(matmul(x, w))) * c<2>);
  STATIC_REQUIRE(decltype(compile(custom))::kernel_count() == decltype(compile(plain))::kernel_count());
  STATIC_REQUIRE(decltype(compile(grad(custom, w)))::kernel_count() <=
                 decltype(compile(grad(plain, w)))::kernel_count() + 1);
}

TEMPLATE_LIST_TEST_CASE("custom_jvp: forward mode uses the rule, reverse mode the forward", "[grad][custom]",
                        test_backends) {
  auto x = param<"x", f64>(shape<4>);
  auto t = input<"t", f64>(shape<4>);
  auto y = custom_jvp<doubled_sine>(x);
  auto prog = compile<TestType>(y, jvp(y, x, t), grad(sum(y), x), jvp(custom_vjp<straight_through>(x * x), x, t));
  const arr xv{0.3, -1.0, 2.0, 0.0}, tv{1, -2, 0.5, 3};
  prog.bind("x", xv);
  prog.bind("t", tv);
  prog.run();
  require_gradient_close(output_of<0>(prog), arr(xt::sin(xv)), 1e-12, "value");
  require_gradient_close(output_of<1>(prog), arr(tv * xt::cos(xv) * 2), 1e-12, "custom jvp");
  require_gradient_close(output_of<2>(prog), arr(xt::cos(xv)), 1e-12, "reverse through forward");
  // A custom_vjp has no jvp rule: forward mode differentiates its forward (round: 0).
  REQUIRE(xt::amax(xt::abs(output_of<3>(prog)))() == 0.0);
}
