// Symbolic extents that decoding needs: element counts of products with offsets (a cache of
// Past+1 rows reshaped, squeezed and unsqueezed), concat along a symbolic axis (a key
// cache (Past, D) and a new row (1, D) give (Past+1, D)), and pad along one. The rules are
// checked on dims and on expression types at compile time, then programs run on every
// backend at several bound extents, and a gradient flows back through a symbolic concat.
#include "test_support.hpp"

using namespace luminal;
using test::check_exact;
using test::reshaped;

namespace {
constexpr Dim T{"T"};
constexpr Dim S{"S"};

template <class X>
constexpr auto dims_of = shape_t<X>::dims;

/// a (rows, 4) over b (rows, 4): the rows of one, then the other's.
xt::xarray<double> rows_then(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  return xt::xarray<double>(xt::concatenate(xt::xtuple(a, b), 0));
}
}  // namespace

// ---- the algebra, at compile time ---------------------------------------------------

TEST_CASE("symbolic: element counts compare as polynomials in the symbols", "[core][shape][symbolic]") {
  // An extent with an offset, with or without axes of 1 around it.
  STATIC_REQUIRE(same_element_count(Shape<T + 1, 4>::dims, Shape<1, T + 1, 4>::dims));
  STATIC_REQUIRE(same_element_count(Shape<1, T + 1, 4>::dims, Shape<T + 1, 4>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T + 1, 4>::dims, Shape<T + 1, 1, 4, 1>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T + 1, 4>::dims, Shape<4, T + 1>::dims));
  // Scales move between the static extents and the symbolic ones.
  STATIC_REQUIRE(same_element_count(Shape<2 * T, 3>::dims, Shape<6 * T>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T + 1, 4>::dims, Shape<4 * T + 4>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T + 1, 4>::dims, Shape<2, 2 * T + 2>::dims));
  STATIC_REQUIRE(same_element_count(Shape<2 * T + 2, 3>::dims, Shape<6, T + 1>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T - 1, 2>::dims, Shape<2 * T - 2>::dims));
  // Products of symbols in any order, with offsets beside them.
  STATIC_REQUIRE(same_element_count(Shape<T, S>::dims, Shape<S * T>::dims));
  STATIC_REQUIRE(same_element_count(Shape<S, T + 1, 2>::dims, Shape<T + 1, 2 * S>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T + 1, S + 2>::dims, Shape<S + 2, T + 1>::dims));
  STATIC_REQUIRE(same_element_count(Shape<T * S + 1, 2>::dims, Shape<2, S * T + 1>::dims));
  // Zero elements are zero elements.
  STATIC_REQUIRE(same_element_count(Shape<0, T + 1>::dims, Shape<S, 0>::dims));

  // Counts that differ at some value of the symbols are refused.
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, 4>::dims, Shape<T, 4>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, 4>::dims, Shape<T + 2, 4>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, 4>::dims, Shape<4 * T + 1>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<2 * T + 2>::dims, Shape<T + 2, 2>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, S>::dims, Shape<T, S + 1>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, 4>::dims, Shape<S + 1, 4>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1>::dims, Shape<T - 1>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<T + 1, T + 1>::dims, Shape<T + 1>::dims));
  // Equal as polynomials but factored otherwise ((T-1)(T+1) = T*T-1): refused, not guessed.
  STATIC_REQUIRE(!same_element_count(Shape<T - 1, T + 1>::dims, Shape<T * T - 1>::dims));
}

TEST_CASE("symbolic: a static factor scales an extent with an offset; sums that are one extent", "[core][shape][symbolic]") {
  STATIC_REQUIRE(4 * (T + 1) == 4 * T + 4);
  STATIC_REQUIRE((T + 1) * 4 == 4 * T + 4);
  STATIC_REQUIRE((T - 2) * Dim{3} == 3 * T - 6);
  STATIC_REQUIRE(0 * (T + 1) == Dim{0});
  constexpr auto sum = [](Dim a, Dim b) {
    Dim s{-1};
    return add_extents(a, b, s) ? s : Dim{-1};
  };
  STATIC_REQUIRE(sum(T, Dim{1}) == T + 1);
  STATIC_REQUIRE(sum(Dim{1}, T) == T + 1);
  STATIC_REQUIRE(sum(T + 1, T + 2) == 2 * T + 3);
  STATIC_REQUIRE(sum(Dim{2}, Dim{3}) == Dim{5});
  STATIC_REQUIRE(sum(T * S, 2 * S * T) == 3 * S * T);
  STATIC_REQUIRE(sum(T + 1, negated(T)) == Dim{1});
  STATIC_REQUIRE(sum(2 * T, negated(T)) == T);
  Dim unused{0};
  STATIC_REQUIRE(!add_extents(T, S, unused));
  STATIC_REQUIRE(!add_extents(T, T * S, unused));
}

TEST_CASE("symbolic: reshape, squeeze, unsqueeze, pad and concat along symbolic axes type-check", "[core][shape][symbolic]") {
  auto a = input<"a", f32>(shape<T, 4>);
  auto row = input<"row", f32>(shape<1, 4>);
  auto padded = pad<0, 0, 1>(a);
  STATIC_REQUIRE(dims_of<decltype(padded)> == dims_t<2>{T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(pad<0, 2, 3>(a))> == dims_t<2>{T + 5, 4});
  STATIC_REQUIRE(dims_of<decltype(pad<-1, 1, 1>(input<"b", f32>(shape<4, T>)))> == dims_t<2>{4, T + 2});

  auto lifted = unsqueeze<0>(padded);
  STATIC_REQUIRE(dims_of<decltype(lifted)> == dims_t<3>{1, T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(unsqueeze<-1>(padded))> == dims_t<3>{T + 1, 4, 1});
  STATIC_REQUIRE(dims_of<decltype(squeeze(lifted))> == dims_t<2>{T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(squeeze<0>(lifted))> == dims_t<2>{T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(reshape(padded, shape<4 * (T + 1)>))> == dims_t<1>{4 * T + 4});
  STATIC_REQUIRE(dims_of<decltype(reshape(padded, shape<2, 2 * T + 2>))> == dims_t<2>{2, 2 * T + 2});

  STATIC_REQUIRE(dims_of<decltype(concat<0>(a, row))> == dims_t<2>{T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(concat<0>(row, a))> == dims_t<2>{T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(concat<0>(a, a))> == dims_t<2>{2 * T, 4});
  STATIC_REQUIRE(dims_of<decltype(concat<0>(row, a, row, row))> == dims_t<2>{T + 3, 4});
  STATIC_REQUIRE(dims_of<decltype(concat<-2>(padded, a))> == dims_t<2>{2 * T + 1, 4});
  STATIC_REQUIRE(dims_of<decltype(concat<1>(input<"b", f32>(shape<2, T>), input<"c", f32>(shape<2, 3>)))> ==
                 dims_t<2>{2, T + 3});
  // Static extents join as before: one pad per operand, at a static offset.
  STATIC_REQUIRE(dims_of<decltype(concat<0>(row, row, row))> == dims_t<2>{3, 4});
  STATIC_REQUIRE(dims_of<decltype(stack<0>(a, a))> == dims_t<3>{2, T, 4});
}

// ---- programs, at run time ----------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("symbolic: a padded cache reshaped, squeezed and unsqueezed runs at each bound extent",
                        "[core][shape][symbolic]", test_backends) {
  auto a = input<"a", f32>(shape<T, 4>);
  auto padded = pad<0, 0, 1>(a);
  auto lifted = unsqueeze<0>(padded);
  auto prog = compile<TestType>(lifted, squeeze(lifted) * 2.0_c, reshape(padded, shape<4 * (T + 1)>),
                                reshape(padded, shape<2, 2 * T + 2>), reshape(transpose(padded), shape<T + 1, 4>),
                                pad<0, 2, 1, 5.0>(a));
  for (std::size_t t : {3u, 1u, 6u}) {
    INFO("T = " << t);
    auto av = test::random_array<float>({t, 4}, 400 + unsigned(t));
    prog.bind("a", av);
    prog.run();
    xt::xarray<double> ad = test::to_double(av);
    xt::xarray<double> with_zero_row = rows_then(ad, xt::zeros<double>({std::size_t(1), std::size_t(4)}));
    auto out0 = prog.template output<0>();
    REQUIRE(out0.shape() == std::vector<std::size_t>{1, t + 1, 4});
    check_exact(out0, reshaped(with_zero_row, {1, t + 1, 4}));
    check_exact(prog.template output<1>(), xt::xarray<double>(with_zero_row * 2.0));
    check_exact(prog.template output<2>(), reshaped(with_zero_row, {4 * (t + 1)}));
    check_exact(prog.template output<3>(), reshaped(with_zero_row, {2, 2 * (t + 1)}));
    check_exact(prog.template output<4>(), reshaped(xt::transpose(with_zero_row), {t + 1, 4}));
    xt::xarray<double> fives = xt::ones<double>({std::size_t(1), std::size_t(4)}) * 5.0;
    check_exact(prog.template output<5>(), rows_then(rows_then(rows_then(fives, fives), ad), fives));
  }
}

TEMPLATE_LIST_TEST_CASE("symbolic: concat along a symbolic axis reads each operand at its run-time offset",
                        "[core][shape][symbolic]", test_backends) {
  auto cache = input<"cache", f32>(shape<T, 4>);
  auto row = input<"row", f32>(shape<1, 4>);
  auto cols = input<"cols", f32>(shape<2, T>);
  auto fixed = input<"fixed", f32>(shape<2, 3>);
  auto prog = compile<TestType>(concat<0>(cache, row), concat<0>(row, cache), concat<0>(cache, cache) * 2.0_c,
                                concat<0>(row, cache, row, row), concat<1>(cols, fixed), concat<1>(fixed, cols),
                                sum<0>(concat<0>(cache, row)));
  auto rowv = test::random_array<float>({1, 4}, 410);
  auto fixedv = test::random_array<float>({2, 3}, 411);
  prog.bind("row", rowv);
  prog.bind("fixed", fixedv);
  for (std::size_t t : {5u, 2u, 1u}) {
    INFO("T = " << t);
    auto cachev = test::random_array<float>({t, 4}, 420 + unsigned(t));
    auto colsv = test::random_array<float>({2, t}, 430 + unsigned(t));
    prog.bind("cache", cachev);
    prog.bind("cols", colsv);
    prog.run();
    xt::xarray<double> cd = test::to_double(cachev), rd = test::to_double(rowv), kd = test::to_double(colsv),
                       fd = test::to_double(fixedv);
    auto out0 = prog.template output<0>();
    REQUIRE(out0.shape() == std::vector<std::size_t>{t + 1, 4});
    check_exact(out0, rows_then(cd, rd));
    check_exact(prog.template output<1>(), rows_then(rd, cd));
    check_exact(prog.template output<2>(), xt::xarray<double>(rows_then(cd, cd) * 2.0));
    check_exact(prog.template output<3>(), rows_then(rows_then(rows_then(rd, cd), rd), rd));
    check_exact(prog.template output<4>(), xt::xarray<double>(xt::concatenate(xt::xtuple(kd, fd), 1)));
    check_exact(prog.template output<5>(), xt::xarray<double>(xt::concatenate(xt::xtuple(fd, kd), 1)));
    test::require_close(prog.template output<6>(), xt::xarray<double>(xt::sum(rows_then(cd, rd), {0})), 1e-5, 1e-6);
  }
}

TEMPLATE_LIST_TEST_CASE("symbolic: gradients and tangents of a symbolic concat reach each operand", "[core][shape][symbolic]",
                        test_backends) {
  auto cache = param<"cache", f64>(shape<T, 3>);
  auto row = param<"row", f64>(shape<1, 3>);
  auto joined = concat<0>(cache, row, cache);
  auto loss = sum(sin(joined) * joined);
  auto [dcache, drow] = grad(loss, cache, row);
  auto tcache = input<"tcache", f64>(shape<T, 3>);
  auto trow = input<"trow", f64>(shape<1, 3>);
  auto tangent = jvp(joined, cache, row, tcache, trow);  // forward mode: the joined tangents
  auto prog = compile<TestType>(dcache, drow, tangent);
  for (std::size_t t : {4u, 2u}) {
    INFO("T = " << t);
    auto cv = test::random_array<double>({t, 3}, 440 + unsigned(t));
    auto rv = test::random_array<double>({1, 3}, 450 + unsigned(t));
    prog.bind("cache", cv);
    prog.bind("row", rv);
    auto tcv = test::random_array<double>({t, 3}, 460 + unsigned(t));
    auto trv = test::random_array<double>({1, 3}, 470 + unsigned(t));
    prog.bind("tcache", tcv);
    prog.bind("trow", trv);
    prog.run();
    // d/dx of sin(x) * x is sin(x) + x cos(x); the cache appears twice.
    auto dx = [](const xt::xarray<double>& x) { return xt::xarray<double>(xt::sin(x) + x * xt::cos(x)); };
    test::require_close(prog.template output<0>(), xt::xarray<double>(2.0 * dx(cv)), 1e-12, 1e-12);
    test::require_close(prog.template output<1>(), dx(rv), 1e-12, 1e-12);
    check_exact(prog.template output<2>(), rows_then(rows_then(tcv, trv), tcv));
  }
}
