// Movement ops (views: permute, transpose, reshape, slice, pad, expand), iota and gather
// against independently computed references (xtensor views and plain loops), and views
// feeding computation: non-contiguous reads on one or both sides of a binary op, views of
// views, reductions of views, and views on symbolic axes rebound between runs. Every case
// runs on every backend.
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "test_support.hpp"

using namespace luminal;
using test::check_exact;
using test::reshaped;

namespace {
constexpr Dim Batch{"Batch"};

template <class A, class E>
void check_f32(const A& actual, const E& expected) {
  test::require_close(actual, expected, 1e-5, 1e-6);
}

/// x padded along `axis` with `before` and `after` elements of `value`.
xt::xarray<double> padded(const xt::xarray<double>& x, std::size_t axis, std::size_t before, std::size_t after,
                          double value) {
  std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  std::size_t n = shape[axis];
  shape[axis] += before + after;
  std::size_t inner = 1, outer = 1;
  for (std::size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  for (std::size_t k = 0; k < axis; ++k) outer *= shape[k];
  xt::xarray<double> out = xt::xarray<double>::from_shape(shape);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t a = 0; a < shape[axis]; ++a)
      for (std::size_t i = 0; i < inner; ++i) {
        bool inside = a >= before && a < before + n;
        out.data()[(o * shape[axis] + a) * inner + i] =
            inside ? x.data()[(o * n + (a - before)) * inner + i] : value;
      }
  return out;
}
}  // namespace

// ---- single views -----------------------------------------------------------------

namespace {
template <class B, class T>
void permutes() {
  auto x = input<"x", T>(shape<2, 3, 4>);
  auto m = input<"m", T>(shape<3, 5>);
  auto prog = compile<B>(permute<2, 0, 1>(x), permute<1, 2, 0>(x), permute<0, 2, 1>(x), transpose(x),
                         transpose<0, 2>(x), permute<0, 1, 2>(x), transpose(m), transpose<-1, 0>(m));
  auto xv = test::random_ints<T>({2, 3, 4}, 201, -50, 50);
  auto mv = test::random_ints<T>({3, 5}, 202, -50, 50);
  prog.bind("x", xv);
  prog.bind("m", mv);
  prog.run();
  auto xd = test::to_double(xv), md = test::to_double(mv);
  auto out0 = prog.template output<0>();
  REQUIRE(out0.shape() == std::vector<std::size_t>{4, 2, 3});
  check_exact(out0, xt::xarray<double>(xt::transpose(xd, {2, 0, 1})));
  check_exact(prog.template output<1>(), xt::xarray<double>(xt::transpose(xd, {1, 2, 0})));
  check_exact(prog.template output<2>(), xt::xarray<double>(xt::transpose(xd, {0, 2, 1})));
  check_exact(prog.template output<3>(), xt::xarray<double>(xt::transpose(xd, {0, 2, 1})));
  check_exact(prog.template output<4>(), xt::xarray<double>(xt::transpose(xd, {2, 1, 0})));
  check_exact(prog.template output<5>(), xd);
  check_exact(prog.template output<6>(), xt::xarray<double>(xt::transpose(md)));
  check_exact(prog.template output<7>(), xt::xarray<double>(xt::transpose(md)));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("permute and transpose reorder axes", "[ops][view]", test_backends) {
  SECTION("f32") { permutes<TestType, f32>(); }
  SECTION("i32") { permutes<TestType, i32>(); }
}

TEMPLATE_LIST_TEST_CASE("reshape keeps row-major order", "[ops][view]", test_backends) {
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto s = input<"s", f32>(shape<Batch, 3, 4>);
  auto prog = compile<TestType>(reshape(x, shape<6, 4>), reshape(x, shape<4, 6>), reshape(x, shape<24>),
                                reshape(x, shape<2, 12>), reshape(x, shape<3, 2, 1, 4>), reshape(s, shape<Batch * 3, 4>),
                                reshape(s, shape<Batch, 12>), reshape(reshape(s, shape<Batch * 12>), shape<Batch, 4, 3>));
  auto xv = test::random_array<float>({2, 3, 4}, 211);
  prog.bind("x", xv);
  auto xd = test::to_double(xv);
  for (std::size_t batch : {1u, 5u}) {
    INFO("Batch = " << batch);
    auto sv = test::random_array<float>({batch, 3, 4}, 212 + unsigned(batch));
    prog.bind("s", sv);
    prog.run();
    auto sd = test::to_double(sv);
    check_exact(prog.template output<0>(), reshaped(xd, {6, 4}));
    check_exact(prog.template output<1>(), reshaped(xd, {4, 6}));
    check_exact(prog.template output<2>(), reshaped(xd, {24}));
    check_exact(prog.template output<3>(), reshaped(xd, {2, 12}));
    check_exact(prog.template output<4>(), reshaped(xd, {3, 2, 1, 4}));
    check_exact(prog.template output<5>(), reshaped(sd, {batch * 3, 4}));
    check_exact(prog.template output<6>(), reshaped(sd, {batch, 12}));
    check_exact(prog.template output<7>(), reshaped(sd, {batch, 4, 3}));
  }
}

TEST_CASE("reshape splits into groups of axes with equal extent products", "[ops][view]") {
  constexpr auto split = detail::group_reshape(Shape<Batch, 6, 4>::dims, Shape<Batch, 24>::dims);
  STATIC_REQUIRE(split.in == std::array<int, 3>{0, 1, 1});
  STATIC_REQUIRE(split.out == std::array<int, 2>{0, 1});
  constexpr auto ones = detail::group_reshape(Shape<1, 6, 1, 4>::dims, Shape<6, 4, 1>::dims);
  STATIC_REQUIRE(ones.in == std::array<int, 4>{-1, 0, -1, 1});
  STATIC_REQUIRE(ones.out == std::array<int, 3>{0, 1, -1});
  // (2, 3) -> (3, 2) has no smaller groups: one group, a flat index and its unravel.
  constexpr auto whole = detail::group_reshape(Shape<2, 3>::dims, Shape<3, 2>::dims);
  STATIC_REQUIRE(whole.in == std::array<int, 2>{0, 0});
  STATIC_REQUIRE(whole.out == std::array<int, 2>{0, 0});
}

TEMPLATE_LIST_TEST_CASE("reshape of non-contiguous views merges and splits their axes", "[ops][view]", test_backends) {
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto b = input<"b", f32>(shape<4>);
  auto swapped = permute<1, 0, 2>(x);                      // (3, 2, 4), not contiguous
  auto prog = compile<TestType>(reshape(swapped, shape<6, 4>),     // merge (3, 2)
                                reshape(swapped, shape<12, 2>),    // one group of everything
                                reshape(swapped, shape<3, 2, 2, 2>) + 1.0_c,  // split the last axis
                                reshape(expand(b, shape<3, 4>), shape<12>),    // merge a broadcast
                                sum<1>(reshape(swapped, shape<3, 8>)));        // a reduction over a merge
  auto xv = test::random_array<float>({2, 3, 4}, 215);
  auto bv = test::random_array<float>({4}, 216);
  prog.bind("x", xv);
  prog.bind("b", bv);
  prog.run();
  xt::xarray<double> sw = xt::transpose(test::to_double(xv), {1, 0, 2});
  check_exact(prog.template output<0>(), reshaped(sw, {6, 4}));
  check_exact(prog.template output<1>(), reshaped(sw, {12, 2}));
  check_f32(prog.template output<2>(), xt::xarray<double>(reshaped(sw, {3, 2, 2, 2}) + 1.0));
  xt::xarray<double> tiled = xt::broadcast(test::to_double(bv), {3, 4});
  check_exact(prog.template output<3>(), reshaped(tiled, {12}));
  check_f32(prog.template output<4>(), xt::xarray<double>(xt::sum(reshaped(sw, {3, 8}), {1})));
}

TEMPLATE_LIST_TEST_CASE("slice keeps a range of one axis", "[ops][view]", test_backends) {
  using xt::all;
  using xt::range;
  auto x = input<"x", f32>(shape<4, 5, 6>);
  auto prog = compile<TestType>(slice<0, 1, 3>(x), slice<1, 0, 5>(x), slice<2, 2, 0>(x), slice<2, 0, -2>(x),
                                slice<-1, 1, -1>(x), slice<1, 4, 5>(x), slice<0, 2, 2>(x));
  auto xv = test::random_array<float>({4, 5, 6}, 221);
  prog.bind("x", xv);
  prog.run();
  xt::xarray<double> xd = test::to_double(xv);
  check_exact(prog.template output<0>(), xt::xarray<double>(xt::view(xd, range(1, 3), all(), all())));
  check_exact(prog.template output<1>(), xd);
  check_exact(prog.template output<2>(), xt::xarray<double>(xt::view(xd, all(), all(), range(2, 6))));  // to the end
  check_exact(prog.template output<3>(), xt::xarray<double>(xt::view(xd, all(), all(), range(0, 4))));  // End < 0
  check_exact(prog.template output<4>(), xt::xarray<double>(xt::view(xd, all(), all(), range(1, 5))));  // Axis < 0
  check_exact(prog.template output<5>(), xt::xarray<double>(xt::view(xd, all(), range(4, 5), all())));
  auto empty = prog.template output<6>();  // an empty range is allowed
  REQUIRE(empty.shape() == std::vector<std::size_t>{0, 5, 6});
}

TEMPLATE_LIST_TEST_CASE("pad adds zeros or a given value around one axis", "[ops][view]", test_backends) {
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto n = input<"n", i32>(shape<3>);
  auto prog = compile<TestType>(pad<0, 1, 2>(x), pad<1, 0, 3, -1.5>(x), pad<-1, 2, 0, 7.0>(x), pad<2, 1, 1>(x),
                                pad<0, 2, 1, 9.0>(n), pad<1, 0, 0>(x));
  auto xv = test::random_array<float>({2, 3, 4}, 231);
  xt::xarray<int> nv{4, -5, 6};
  prog.bind("x", xv);
  prog.bind("n", nv);
  prog.run();
  auto xd = test::to_double(xv);
  auto out0 = prog.template output<0>();
  REQUIRE(out0.shape() == std::vector<std::size_t>{5, 3, 4});
  check_exact(out0, padded(xd, 0, 1, 2, 0.0));
  check_exact(prog.template output<1>(), padded(xd, 1, 0, 3, -1.5));
  check_exact(prog.template output<2>(), padded(xd, 2, 2, 0, 7.0));
  check_exact(prog.template output<3>(), padded(xd, 2, 1, 1, 0.0));
  check_exact(prog.template output<4>(), xt::xarray<double>{9, 9, 4, -5, 6, 9});
  check_exact(prog.template output<5>(), xd);
}

TEMPLATE_LIST_TEST_CASE("expand broadcasts extents of size 1 and adds leading axes", "[ops][view]", test_backends) {
  auto row = input<"row", f32>(shape<3>);
  auto col = input<"col", f32>(shape<4, 1>);
  auto mid = input<"mid", f32>(shape<2, 1, 3>);
  auto s = input<"s", f32>(shape<>);
  auto flags = input<"flags", boolean>(shape<1, 3>);
  auto prog = compile<TestType>(expand(row, shape<4, 3>), expand(col, shape<4, 3>), expand(row, shape<2, 4, 3>),
                                expand(mid, shape<2, 5, 3>), expand(s, shape<2, 3>), expand(flags, shape<2, 3>),
                                expand(col, shape<4, 1>));
  auto rowv = test::random_array<float>({3}, 241);
  auto colv = test::random_array<float>({4, 1}, 242);
  auto midv = test::random_array<float>({2, 1, 3}, 243);
  xt::xarray<float> sv = 2.5f;
  xt::xarray<bool> fv = xt::xarray<bool>::from_shape({1, 3});
  fv(0, 0) = true;
  fv(0, 1) = false;
  fv(0, 2) = true;
  prog.bind("row", rowv);
  prog.bind("col", colv);
  prog.bind("mid", midv);
  prog.bind("s", sv);
  prog.bind("flags", fv);
  prog.run();
  // xt::broadcast is xtensor's own expand.
  auto bc = [](const auto& a, std::vector<std::size_t> shape) {
    return xt::xarray<double>(xt::broadcast(test::to_double(a), shape));
  };
  check_exact(prog.template output<0>(), bc(rowv, {4, 3}));
  check_exact(prog.template output<1>(), bc(colv, {4, 3}));
  check_exact(prog.template output<2>(), bc(rowv, {2, 4, 3}));
  check_exact(prog.template output<3>(), bc(midv, {2, 5, 3}));
  check_exact(prog.template output<4>(), bc(sv, {2, 3}));
  xt::xarray<bool> expanded_flags = prog.template output<5>();
  check_exact(expanded_flags, bc(fv, {2, 3}));
  check_exact(prog.template output<6>(), test::to_double(colv));
  STATIC_REQUIRE(std::is_same_v<decltype(expand(col, shape<4, 1>)), decltype(col)>);
}

TEMPLATE_LIST_TEST_CASE("iota holds the index along one axis", "[ops][view]", test_backends) {
  SECTION("static shapes, no inputs at all") {
    auto prog = compile<TestType>(iota<0, i32>(shape<3, 4>), iota<1, f32>(shape<3, 4>), iota<-1, f64>(shape<2, 3, 4>),
                                  iota<1>(shape<2, 3, 4>), iota<0>(shape<5>));
    prog.run();
    xt::xarray<double> e0 = xt::zeros<double>({3, 4}), e1 = e0;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j) {
        e0(i, j) = double(i);
        e1(i, j) = double(j);
      }
    xt::xarray<double> e2 = xt::zeros<double>({2, 3, 4}), e3 = e2;
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 4; ++k) {
          e2(i, j, k) = double(k);
          e3(i, j, k) = double(j);
        }
    xt::xarray<int> rows = prog.template output<0>();
    check_exact(rows, e0);
    xt::xarray<float> cols = prog.template output<1>();
    check_exact(cols, e1);
    xt::xarray<double> last = prog.template output<2>();
    check_exact(last, e2);
    xt::xarray<int> middle = prog.template output<3>();
    check_exact(middle, e3);
    check_exact(prog.template output<4>(), xt::xarray<double>{0, 1, 2, 3, 4});
  }
  SECTION("on a symbolic axis, feeding computation") {
    auto x = input<"x", f32>(shape<Batch, 3>);
    auto prog = compile<TestType>(x * cast<f32>(iota<0>(shape<Batch, 3>)), iota<1, f32>(shape<Batch, 3>) + x);
    for (std::size_t batch : {2u, 6u}) {
      auto xv = test::random_array<float>({batch, 3}, 251 + unsigned(batch));
      prog.bind("x", xv);
      prog.run();
      xt::xarray<double> e0 = test::to_double(xv), e1 = e0;
      for (std::size_t i = 0; i < batch; ++i)
        for (std::size_t j = 0; j < 3; ++j) {
          e0(i, j) = double(xv(i, j)) * double(i);
          e1(i, j) = double(xv(i, j)) + double(j);
        }
      check_f32(prog.template output<0>(), e0);
      check_f32(prog.template output<1>(), e1);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("gather picks rows of a table (embedding lookup)", "[ops][gather]", test_backends) {
  auto table = param<"table", f32>(shape<6, 4>);
  auto ids = input<"ids", i32>(shape<Batch, 3>);
  auto cube = param<"cube", f64>(shape<5, 2, 2>);
  auto flat_ids = input<"flat_ids", i32>(shape<4>);
  auto embedded = gather(table, ids);
  auto prog = compile<TestType>(embedded, sum<-1>(embedded) + 1.0_c, gather(cube, flat_ids), gather(exp(table), flat_ids));
  auto tv = test::random_array<float>({6, 4}, 261);
  auto cv = test::random_array<double>({5, 2, 2}, 262);
  xt::xarray<int> fv{4, 0, 4, 2};  // repeated ids
  prog.bind("table", tv);
  prog.bind("cube", cv);
  prog.bind("flat_ids", fv);
  auto td = test::to_double(tv);
  for (std::size_t batch : {2u, 5u}) {
    INFO("Batch = " << batch);
    auto iv = test::random_ints<int>({batch, 3}, 263 + unsigned(batch), 0, 5);
    iv(0, 0) = 0;
    iv(batch - 1, 2) = 5;  // both ends of the table
    prog.bind("ids", iv);
    prog.run();
    xt::xarray<double> expected = xt::zeros<double>({batch, std::size_t(3), std::size_t(4)});
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t s = 0; s < 3; ++s)
        for (std::size_t d = 0; d < 4; ++d) expected(b, s, d) = td(std::size_t(iv(b, s)), d);
    auto out = prog.template output<0>();
    REQUIRE(out.shape() == std::vector<std::size_t>{batch, 3, 4});
    check_exact(out, expected);
    check_f32(prog.template output<1>(), xt::xarray<double>(xt::sum(expected, {2}) + 1.0));
  }
  xt::xarray<double> e2 = xt::zeros<double>({4, 2, 2});
  xt::xarray<double> e3 = xt::zeros<double>({4, 4});
  for (std::size_t i = 0; i < 4; ++i) {
    std::size_t row = std::size_t(fv(i));
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t b = 0; b < 2; ++b) e2(i, a, b) = cv(row, a, b);
    for (std::size_t d = 0; d < 4; ++d) e3(i, d) = std::exp(td(row, d));
  }
  check_exact(prog.template output<2>(), e2);
  check_f32(prog.template output<3>(), e3);
  // A gather from a view: transpose(table) is [4, 6].
  auto tprog = compile<TestType>(gather(transpose(table), flat_ids));
  tprog.bind("table", tv);
  xt::xarray<int> in_range{3, 0, 3, 2};
  tprog.bind("flat_ids", in_range);
  tprog.run();
  xt::xarray<double> e4 = xt::zeros<double>({4, 6});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t d = 0; d < 6; ++d) e4(i, d) = td(d, std::size_t(in_range(i)));
  check_exact(tprog.template output<0>(), e4);
}

// ---- views feeding computation ----------------------------------------------------

TEMPLATE_LIST_TEST_CASE("non-contiguous views feed elementwise ops and reductions", "[ops][view]", test_backends) {
  using xt::all;
  using xt::range;
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto y = input<"y", f32>(shape<4, 2, 3>);
  auto m = input<"m", f32>(shape<5, 4>);
  auto w = input<"w", f32>(shape<4, 6>);
  auto v = input<"v", f32>(shape<3>);
  auto col = input<"col", f32>(shape<4, 1>);
  auto prog = compile<TestType>(exp(permute<2, 0, 1>(x)) + y,                                // 0 permute, then elementwise
                                slice<0, 1, 3>(transpose(m)),                                // 1 slice of a transpose
                                pad<1, 1, 2, 5.0>(slice<1, 1, 3>(x)),                        // 2 pad of a slice
                                sum<0>(expand(v, shape<4, 3>)),                              // 3 expand, then reduce
                                max<1>(expand(col, shape<4, 3>) * v),                        // 4 expand, multiply, reduce
                                reshape(permute<1, 0, 2>(x), shape<3, 8>),                   // 5 reshape of a permute
                                transpose(m) + slice<1, 1, 6>(w),                            // 6 views on both sides
                                permute<1, 2, 0>(y) * pad<2, 1, 0>(slice<2, 1, 0>(x)),       // 7 views on both sides
                                sum<1>(transpose(m)),                                        // 8 reduce across a transpose
                                slice<0, 1, 0>(pad<0, 2, 1, -3.0>(v)),                       // 9 slice of a pad
                                permute<2, 0, 1>(slice<1, 1, 3>(x)),                         // 10 permute of a slice
                                reshape(slice<2, 1, 3>(x), shape<12>),                       // 11 reshape of a slice
                                expand(slice<0, 1, 2>(m), shape<3, 4>) * 2.0_c,              // 12 expand of a slice
                                sum<0, 1>(permute<2, 0, 1>(x) * permute<2, 0, 1>(x)));       // 13 reduce of a product of views
  auto xv = test::random_array<float>({2, 3, 4}, 271);
  auto yv = test::random_array<float>({4, 2, 3}, 272);
  auto mv = test::random_array<float>({5, 4}, 273);
  auto wv = test::random_array<float>({4, 6}, 274);
  auto vv = test::random_array<float>({3}, 275);
  auto colv = test::random_array<float>({4, 1}, 276);
  prog.bind("x", xv);
  prog.bind("y", yv);
  prog.bind("m", mv);
  prog.bind("w", wv);
  prog.bind("v", vv);
  prog.bind("col", colv);
  prog.run();
  xt::xarray<double> xd = test::to_double(xv), yd = test::to_double(yv), md = test::to_double(mv),
                     wd = test::to_double(wv), vd = test::to_double(vv), cd = test::to_double(colv);
  xt::xarray<double> xp = xt::transpose(xd, {2, 0, 1});
  xt::xarray<double> mt = xt::transpose(md);
  check_f32(prog.template output<0>(), xt::xarray<double>(xt::exp(xp) + yd));
  check_exact(prog.template output<1>(), xt::xarray<double>(xt::view(mt, range(1, 3), all())));
  check_exact(prog.template output<2>(), padded(xt::view(xd, all(), range(1, 3), all()), 1, 1, 2, 5.0));
  check_f32(prog.template output<3>(), xt::xarray<double>(vd * 4.0));
  check_f32(prog.template output<4>(), xt::xarray<double>(xt::amax(cd * vd, {1})));
  check_exact(prog.template output<5>(), reshaped(xt::transpose(xd, {1, 0, 2}), {3, 8}));
  check_f32(prog.template output<6>(), xt::xarray<double>(mt + xt::view(wd, all(), range(1, 6))));
  xt::xarray<double> shifted = padded(xt::view(xd, all(), all(), range(1, 4)), 2, 1, 0, 0.0);
  check_f32(prog.template output<7>(), xt::xarray<double>(xt::transpose(yd, {1, 2, 0}) * shifted));
  check_f32(prog.template output<8>(), xt::xarray<double>(xt::sum(md, {0})));
  check_exact(prog.template output<9>(), xt::xarray<double>{-3, vd(0), vd(1), vd(2), -3});
  check_exact(prog.template output<10>(), xt::xarray<double>(xt::transpose(xt::view(xd, all(), range(1, 3), all()), {2, 0, 1})));
  check_exact(prog.template output<11>(), reshaped(xt::view(xd, all(), all(), range(1, 3)), {12}));
  check_exact(prog.template output<12>(), xt::xarray<double>(xt::broadcast(xt::view(md, range(1, 2), all()), {3, 4}) * 2.0));
  check_f32(prog.template output<13>(), xt::xarray<double>(xt::sum(xp * xp, {0, 1})));
}

TEMPLATE_LIST_TEST_CASE("views on a symbolic axis follow the extent bound at run time", "[ops][view][symbolic]",
                        test_backends) {
  using xt::all;
  using xt::range;
  auto s = input<"s", f32>(shape<Batch, 4>);
  auto row = param<"row", f32>(shape<1, 4>);
  auto prog = compile<TestType>(slice<0, 1, 0>(s) - slice<0, 0, -1>(s),  // differences of neighbouring rows
                                pad<0, 1, 1, 2.0>(s), sum<0>(pad<0, 1, 1, 2.0>(s)), transpose(s) * c<3>,
                                slice<1, 1, 3>(s) + slice<1, 0, 2>(row), s + row, reshape(transpose(s), shape<4 * Batch>));
  auto rowv = test::random_array<float>({1, 4}, 281);
  prog.bind("row", rowv);
  for (std::size_t batch : {3u, 7u, 1u}) {
    INFO("Batch = " << batch);
    auto sv = test::random_array<float>({batch, 4}, 282 + unsigned(batch));
    prog.bind("s", sv);
    prog.run();
    xt::xarray<double> sd = test::to_double(sv), rd = test::to_double(rowv);
    xt::xarray<double> diff = xt::zeros<double>({batch - 1, std::size_t(4)});
    for (std::size_t i = 0; i + 1 < batch; ++i)
      for (std::size_t j = 0; j < 4; ++j) diff(i, j) = sd(i + 1, j) - sd(i, j);
    auto out0 = prog.template output<0>();
    REQUIRE(out0.shape() == std::vector<std::size_t>{batch - 1, 4});
    check_f32(out0, diff);
    check_exact(prog.template output<1>(), padded(sd, 0, 1, 1, 2.0));
    check_f32(prog.template output<2>(), xt::xarray<double>(xt::sum(sd, {0}) + 4.0));
    check_f32(prog.template output<3>(), xt::xarray<double>(xt::transpose(sd) * 3.0));
    check_f32(prog.template output<4>(), xt::xarray<double>(xt::view(sd, all(), range(1, 3)) + xt::view(rd, all(), range(0, 2))));
    check_f32(prog.template output<5>(), xt::xarray<double>(sd + rd));
    check_exact(prog.template output<6>(), reshaped(xt::transpose(sd), {4 * batch}));
  }
}

TEMPLATE_LIST_TEST_CASE("rows read through pads: the edges tested, the interval inside every pad read untested",
                        "[ops][view][pad]", test_backends) {
  using xt::all;
  using xt::range;
  constexpr Dim N{"N"};
  auto x = input<"x", f32>(shape<3, 10>);
  auto y = input<"y", f32>(shape<3, 7>);
  auto s = input<"s", f32>(shape<2, N>);
  auto prog = compile<TestType>(pad<1, 2, 3>(x),                                            // 0 an interval in each row
                                pad<1, 6, 5, -2.0>(x),                                      // 1 borders wider than the ends tested
                                pad<1, 0, 2>(x) + pad<1, 2, 0>(x) * 0.5_c,                  // 2 two shifted windows (col2im)
                                concat<1>(x, y),                                            // 3 no interval inside both pads
                                pad<0, 1, 1, 4.0>(pad<1, 1, 1>(x)),                         // 4 rows wholly outside the outer pad
                                permute<0, 2, 1>(unfold<1, 3, 1>(pad<1, 1, 1>(x))),         // 5 im2col: rows of 10 windows
                                pad<1, 1, 2, 3.0>(s),                                       // 6 a row of symbolic length
                                pad<1, 2, 2>(slice<1, 3, 3>(x)));                           // 7 a row of padding only
  auto xv = test::random_array<float>({3, 10}, 291);
  auto yv = test::random_array<float>({3, 7}, 292);
  prog.bind("x", xv);
  prog.bind("y", yv);
  xt::xarray<double> xd = test::to_double(xv), yd = test::to_double(yv);
  auto at = [&](std::size_t r, long k) { return k >= 0 && k < 10 ? xd(r, std::size_t(k)) : 0.0; };
  for (std::size_t n : {9u, 1u, 3u}) {
    INFO("N = " << n);
    auto sv = test::random_array<float>({2, n}, 293 + unsigned(n));
    prog.bind("s", sv);
    prog.run();
    check_exact(prog.template output<0>(), padded(xd, 1, 2, 3, 0.0));
    check_exact(prog.template output<1>(), padded(xd, 1, 6, 5, -2.0));
    xt::xarray<double> windows = xt::zeros<double>({3, 12}), joined = xt::zeros<double>({3, 17});
    xt::xarray<double> im2col = xt::zeros<double>({3, 3, 10});
    for (std::size_t r = 0; r < 3; ++r) {
      for (std::size_t k = 0; k < 12; ++k) windows(r, k) = at(r, long(k)) + 0.5 * at(r, long(k) - 2);
      for (std::size_t k = 0; k < 17; ++k) joined(r, k) = k < 10 ? xd(r, k) : yd(r, k - 10);
      for (std::size_t w = 0; w < 3; ++w)
        for (std::size_t i = 0; i < 10; ++i) im2col(r, w, i) = at(r, long(i + w) - 1);
    }
    check_f32(prog.template output<2>(), windows);
    check_exact(prog.template output<3>(), joined);
    check_exact(prog.template output<4>(), padded(padded(xd, 1, 1, 1, 0.0), 0, 1, 1, 4.0));
    check_exact(prog.template output<5>(), im2col);
    check_exact(prog.template output<6>(), padded(test::to_double(sv), 1, 1, 2, 3.0));
    check_exact(prog.template output<7>(), xt::xarray<double>(xt::zeros<double>({3, 4})));
  }
}

TEMPLATE_LIST_TEST_CASE("a map over a reshape that splits its inner axis loops over the split axes",
                        "[ops][view][reshape]", test_backends) {
  using xt::all;
  using xt::range;
  constexpr Dim N{"N"};
  auto x = input<"x", f32>(shape<N, 3, 4, 2>);
  auto y = input<"y", f32>(shape<N, 3, 8>);
  auto w = input<"w", f32>(shape<N, 2, 2, 3, 2>);
  // 0: x's (4, 2) read as 8 columns, times y read in y's own order.
  // 1: two maps deep, over a reshape of a permute (a pool's window read back as columns).
  // 2: the split axis is the only one the reshape touches; a trailing axis of 1 after it.
  auto prog = compile<TestType>(reshape(x, shape<N, 3, 8>) * y,
                                exp(reshape(permute<0, 3, 1, 4, 2>(w), shape<N, 3, 2, 4>) + 1.0_c) * 0.5_c,
                                reshape(x, shape<N, 3, 8, 1>) - reshape(y, shape<N, 3, 8, 1>));
  for (std::size_t n : {5u, 1u, 2u}) {
    INFO("N = " << n);
    auto xv = test::random_array<float>({n, 3, 4, 2}, 301 + unsigned(n));
    auto yv = test::random_array<float>({n, 3, 8}, 311 + unsigned(n));
    auto wv = test::random_array<float>({n, 2, 2, 3, 2}, 321 + unsigned(n));
    prog.bind("x", xv);
    prog.bind("y", yv);
    prog.bind("w", wv);
    prog.run();
    xt::xarray<double> xd = test::to_double(xv), yd = test::to_double(yv), wd = test::to_double(wv);
    xt::xarray<double> product = xt::zeros<double>({n, std::size_t(3), std::size_t(8)});
    xt::xarray<double> windows = xt::zeros<double>({n, std::size_t(3), std::size_t(2), std::size_t(4)});
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t c = 0; c < 3; ++c) {
        for (std::size_t k = 0; k < 8; ++k) product(b, c, k) = xd(b, c, k / 2, k % 2) * yd(b, c, k);
        for (std::size_t i = 0; i < 2; ++i)
          for (std::size_t k = 0; k < 4; ++k)  // k = 2 p + q over the permute's last two axes (w's 4th and 2nd)
            windows(b, c, i, k) = 0.5 * std::exp(wd(b, i, k % 2, c, k / 2) + 1.0);
      }
    check_f32(prog.template output<0>(), product);
    check_f32(prog.template output<1>(), windows);
    check_f32(prog.template output<2>(), reshaped(xt::xarray<double>(reshaped(xd, {n, 3, 8}) - yd), {n, 3, 8, 1}));
  }
}
