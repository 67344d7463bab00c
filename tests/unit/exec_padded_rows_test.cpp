// Rows read through several pads (exec/loop_kernels.hpp, run_padded_row): a row is cut
// where a pad's test changes and each part runs with every pad decided, inside or outside.
// The rows here are longer than the short rows run unrolled (detail::short_row_limit), so
// that they take that path: concats of pieces of different lengths, pads on two axes, a
// pad with no element inside a row, symbolic extents, a strided window, a pad inside a
// pad (on the row's axis and under a pad on another), more concatenated pieces than have loops of their own, and the gradients that are
// sums of pads (a slice's, a fold's). Each is compared with a plain loop.
#include "test_support.hpp"

using namespace luminal;
using test::check_exact;

namespace {
constexpr Dim S{"S"};

void check_f32(const xt::xarray<float>& actual, const xt::xarray<double>& expected) {
  test::require_close(actual, expected, 1e-5, 1e-6);
}
}  // namespace

TEST_CASE("a pad's part of a row: the elements j where 0 <= b + a j < e", "[exec][pad]") {
  for (index_t a = -3; a <= 3; ++a)
    for (index_t b = -9; b <= 9; ++b)
      for (index_t e = 0; e <= 5; ++e)
        for (index_t n = 0; n <= 7; ++n) {
          index_t lo = n, hi = 0;
          for (index_t j = 0; j < n; ++j)
            if (0 <= b + a * j && b + a * j < e) {
              lo = j < lo ? j : lo;
              hi = j + 1;
            }
          const auto part = detail::pad_part(b, a, e, n);
          INFO("a " << a << " b " << b << " e " << e << " n " << n);
          if (hi == 0) REQUIRE(part.lo == part.hi);
          else REQUIRE((part.lo == lo && part.hi == hi));
        }
}

TEMPLATE_LIST_TEST_CASE("rows through several pads: each part of a row with its pads decided",
                        "[exec][pad][concat]", test_backends) {
  auto a = input<"a", f32>(shape<3, 17>);
  auto b = input<"b", f32>(shape<3, 5>);
  auto c = input<"c", f32>(shape<3, 1>);
  auto d = input<"d", f32>(shape<3, 30>);
  auto s = input<"s", f32>(shape<2, S>);
  auto t = input<"t", f32>(shape<2, 19>);
  // 0 four pieces of odd lengths, each computed (53 per row)
  // 1 the same with a term outside the pads: no part is only padding
  // 2 a pad on two axes: rows 0 and 4 wholly outside the outer one, and the value 4 there
  // 3 the gradient of a slice beside another term: the pad outside on both ends
  // 4 a pad with no element inside the rows: its interval starts past their end
  // 5 a concat along a symbolic axis (a PadExtents) and a map of it
  // 6 strided reads through a pad: windows of 3, stride 2, read along the window axis
  // 7 a pad inside a concatenated piece: pads below pads
  // 8 a pad on the rows' axis under a pad on another, through a slice (a scan's carry
  //   cotangent): past the inner pad the outer's value, with no test per element
  // 9 the same with an inner pad value of its own, which must not be taken for the outer's
  auto prog = compile<TestType>(
      concat<1>(exp(a), b * 2.0_c, c + 1.0_c, relu(d)),
      concat<1>(a, b, c, d) * 0.5_c + concat<1>(d, c, b, a),
      pad<0, 1, 1, 4.0>(pad<1, 6, 3>(a) + pad<1, 0, 21>(b * b) * 3.0_c),
      pad<1, 2, 11>(slice<1, 0, 17>(d)) - d,
      slice<1, 0, 20>(pad<1, 25, 0>(a)) + slice<1, 1, 21>(d),
      concat<1>(s, t) * 2.0_c,
      permute<0, 2, 1>(unfold<1, 3, 2>(pad<1, 2, 4>(d))),
      concat<1>(pad<1, 3, 4>(b), a, pad<1, 1, 1, -1.0>(c)),
      pad<0, 1, 2>(slice<1, 1, 50>(pad<1, 0, 40>(a))),
      pad<0, 1, 0>(pad<1, 2, 30, -1.0>(a)));
  auto av = test::random_array<float>({3, 17}, 401), bv = test::random_array<float>({3, 5}, 402);
  auto cv = test::random_array<float>({3, 1}, 403), dv = test::random_array<float>({3, 30}, 404);
  auto tv = test::random_array<float>({2, 19}, 405);
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.bind("c", cv);
  prog.bind("d", dv);
  prog.bind("t", tv);
  auto A = [&](std::size_t r, long k) { return k >= 0 && k < 17 ? double(av(r, std::size_t(k))) : 0.0; };
  auto B = [&](std::size_t r, long k) { return k >= 0 && k < 5 ? double(bv(r, std::size_t(k))) : 0.0; };
  auto D = [&](std::size_t r, long k) { return k >= 0 && k < 30 ? double(dv(r, std::size_t(k))) : 0.0; };
  // The pieces a, b, c, d side by side, each through its function.
  auto joined = [&](std::size_t r, std::size_t k, auto fa, auto fb, auto fc, auto fd) {
    if (k < 17) return fa(double(av(r, k)));
    if (k < 22) return fb(double(bv(r, k - 17)));
    if (k < 23) return fc(double(cv(r, 0)));
    return fd(double(dv(r, k - 23)));
  };
  auto same = [](double v) { return v; };
  for (std::size_t n : {23u, 1u, 40u}) {
    INFO("S = " << n);
    auto sv = test::random_array<float>({2, n}, 406 + unsigned(n));
    prog.bind("s", sv);
    prog.run();
    xt::xarray<double> e0 = xt::zeros<double>({3, 53}), e1 = xt::zeros<double>({3, 53});
    xt::xarray<double> e2 = xt::zeros<double>({5, 26}), e3 = xt::zeros<double>({3, 30});
    xt::xarray<double> e4 = xt::zeros<double>({3, 20});
    xt::xarray<double> e5 = xt::zeros<double>({std::size_t(2), n + 19}), e6 = xt::zeros<double>({3, 3, 17});
    xt::xarray<double> e7 = xt::zeros<double>({3, 32});
    xt::xarray<double> e8 = xt::zeros<double>({6, 49}), e9 = xt::zeros<double>({4, 49});
    for (std::size_t r = 0; r < 3; ++r) {
      for (std::size_t k = 0; k < 53; ++k) {
        e0(r, k) = joined(r, k, [](double v) { return double(std::exp(float(v))); }, [](double v) { return 2 * v; },
                          [](double v) { return v + 1; }, [](double v) { return v > 0 ? v : 0.0; });
        // concat(d, c, b, a): d in [0, 30), c at 30, b in [31, 36), a in [36, 53).
        const double flipped = k < 30 ? D(r, long(k)) : k == 30 ? double(cv(r, 0)) : k < 36 ? B(r, long(k) - 31)
                                                                                          : A(r, long(k) - 36);
        e1(r, k) = 0.5 * joined(r, k, same, same, same, same) + flipped;
      }
      for (std::size_t k = 0; k < 26; ++k) e2(r + 1, k) = A(r, long(k) - 6) + 3 * B(r, long(k)) * B(r, long(k));
      for (std::size_t k = 0; k < 30; ++k) e3(r, k) = (k >= 2 && k < 19 ? D(r, long(k) - 2) : 0.0) - D(r, long(k));
      for (std::size_t k = 0; k < 20; ++k) e4(r, k) = D(r, long(k) + 1);
      for (std::size_t w = 0; w < 3; ++w)
        for (std::size_t i = 0; i < 17; ++i) e6(r, w, i) = D(r, long(2 * i + w) - 2);
      for (std::size_t k = 0; k < 32; ++k)
        e7(r, k) = k < 12 ? B(r, long(k) - 3) : k < 29 ? A(r, long(k) - 12) : k == 30 ? double(cv(r, 0)) : -1.0;
      for (std::size_t k = 0; k < 49; ++k) {
        e8(r + 1, k) = A(r, long(k) + 1);
        e9(r + 1, k) = k >= 2 && k < 19 ? A(r, long(k) - 2) : -1.0;
      }
    }
    for (std::size_t k = 0; k < 26; ++k) e2(0, k) = e2(4, k) = 4.0;
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t k = 0; k < n + 19; ++k) e5(r, k) = 2.0 * (k < n ? double(sv(r, k)) : double(tv(r, k - n)));
    check_f32(prog.template output<0>(), e0);
    check_f32(prog.template output<1>(), e1);
    check_f32(prog.template output<2>(), e2);
    check_f32(prog.template output<3>(), e3);
    check_exact(prog.template output<4>(), e4);
    check_exact(prog.template output<5>(), e5);
    check_exact(prog.template output<6>(), e6);
    check_exact(prog.template output<7>(), e7);
    check_exact(prog.template output<8>(), e8);
    check_exact(prog.template output<9>(), e9);
  }
}

TEMPLATE_LIST_TEST_CASE("more concatenated pieces than have loops of their own, and sums of pads as gradients",
                        "[exec][pad][grad]", test_backends) {
  auto x = input<"x", f32>(shape<2, 20>);
  auto w = input<"w", f32>(shape<2, 7>);
  auto g = input<"g", f32>(shape<4, 9, 3>);  // windows of 3 on a length-19 axis, stride 2
  auto h = input<"h", f32>(shape<2, 18, 3>);  // windows of 3 on a length-20 axis, stride 1
  // 0 ten pieces: 10 top pads, more than detail::max_decided_pads
  // 1 the gradient of slices of x: a sum of pads of w
  // 2 fold (col2im): shifted, strided windows added back, rows of 19
  // 3 three pads on another axis than the row's: in each row one pad outside, or only one
  //   inside
  // 4 fold with stride 1: three shifted windows along the row
  auto ten = concat<1>(slice<1, 0, 2>(x), slice<1, 2, 3>(x) * 2.0_c, slice<1, 3, 6>(x), slice<1, 6, 7>(x) + 1.0_c,
                       slice<1, 7, 9>(x), slice<1, 9, 12>(x), slice<1, 12, 13>(x) * 3.0_c, slice<1, 13, 16>(x),
                       slice<1, 16, 19>(x), slice<1, 19, 20>(x) - 2.0_c);
  auto loss = sum(slice<1, 1, 8>(x) * w) + sum(slice<1, 10, 17>(x) * w * w);
  auto dx = grad(loss, x);
  auto prog = compile<TestType>(ten, dx, fold<1, 19, 2>(g),
                                pad<0, 2, 0>(x) + pad<0, 1, 1>(x) * 2.0_c + pad<0, 0, 2>(exp(x)), fold<1, 20>(h));
  auto xv = test::random_array<float>({2, 20}, 411), wv = test::random_array<float>({2, 7}, 412);
  auto gv = test::random_array<float>({4, 9, 3}, 413), hv = test::random_array<float>({2, 18, 3}, 414);
  prog.bind("x", xv);
  prog.bind("w", wv);
  prog.bind("g", gv);
  prog.bind("h", hv);
  prog.run();
  xt::xarray<double> e0 = xt::zeros<double>({2, 20}), e1 = xt::zeros<double>({2, 20}), e2 = xt::zeros<double>({4, 19});
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < 20; ++k) {
      const double v = xv(r, k);
      e0(r, k) = k == 2 ? 2 * v : k == 6 ? v + 1 : k == 12 ? 3 * v : k == 19 ? v - 2 : v;
      if (k >= 1 && k < 8) e1(r, k) += wv(r, k - 1);
      if (k >= 10 && k < 17) e1(r, k) += double(wv(r, k - 10)) * wv(r, k - 10);
    }
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 9; ++i)
      for (std::size_t k = 0; k < 3; ++k) e2(r, 2 * i + k) += gv(r, i, k);
  check_f32(prog.template output<0>(), e0);
  check_f32(prog.template output<1>(), e1);
  xt::xarray<double> e3 = xt::zeros<double>({4, 20}), e4 = xt::zeros<double>({2, 20});
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t k = 0; k < 20; ++k) {
      if (r >= 2) e3(r, k) += xv(r - 2, k);
      if (r >= 1 && r < 3) e3(r, k) += 2.0 * xv(r - 1, k);
      if (r < 2) e3(r, k) += std::exp(double(xv(r, k)));
    }
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < 18; ++i)
      for (std::size_t k = 0; k < 3; ++k) e4(r, i + k) += hv(r, i, k);
  check_f32(prog.template output<2>(), e2);
  check_f32(prog.template output<3>(), e3);
  check_f32(prog.template output<4>(), e4);
}
