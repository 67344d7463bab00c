// Matmul against double-precision loops: 2-D, batched and with broadcast batch axes,
// transposed, computed and permuted operands, and a symbolic batch rebound between runs.
// Every case runs on every backend. (Split from ops_reduce_test.cpp: nvcc needed 2.7 GB
// for the two together.)
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

/// Batched matrix product [..., M, K] x [..., K, N] with NumPy batch broadcasting.
xt::xarray<double> matmul_ref(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  std::size_t ra = a.dimension(), rb = b.dimension(), r = std::max(ra, rb);
  std::size_t m = a.shape()[ra - 2], k = a.shape()[ra - 1], n = b.shape()[rb - 1];
  REQUIRE(b.shape()[rb - 2] == k);
  // Batch extents, aligned from the right; 1 where an operand has fewer axes.
  std::vector<std::size_t> ba(r - 2, 1), bb(r - 2, 1), batch(r - 2, 1);
  for (std::size_t i = 0; i + 2 < ra; ++i) ba[i + (r - ra)] = a.shape()[i];
  for (std::size_t i = 0; i + 2 < rb; ++i) bb[i + (r - rb)] = b.shape()[i];
  for (std::size_t i = 0; i + 2 < r; ++i) {
    REQUIRE((ba[i] == bb[i] || ba[i] == 1 || bb[i] == 1));
    batch[i] = std::max(ba[i], bb[i]);
  }
  std::vector<std::size_t> shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  xt::xarray<double> out = xt::zeros<double>(shape);
  std::size_t batches = out.size() / (m * n);
  for (std::size_t flat = 0; flat < batches; ++flat) {
    std::size_t rest = flat, offset_a = 0, offset_b = 0, stride_a = 1, stride_b = 1;
    for (std::size_t i = r - 2; i-- > 0;) {
      std::size_t coord = rest % batch[i];
      rest /= batch[i];
      offset_a += (ba[i] == 1 ? 0 : coord) * stride_a;
      offset_b += (bb[i] == 1 ? 0 : coord) * stride_b;
      stride_a *= ba[i];
      stride_b *= bb[i];
    }
    const double* pa = a.data() + offset_a * m * k;
    const double* pb = b.data() + offset_b * k * n;
    double* po = out.data() + flat * m * n;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::size_t p = 0; p < k; ++p) acc += pa[i * k + p] * pb[p * n + j];
        po[i * n + j] = acc;
      }
  }
  return out;
}

xt::xarray<double> transposed(const xt::xarray<double>& x) {
  std::vector<std::size_t> order(x.dimension());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::swap(order[order.size() - 2], order[order.size() - 1]);
  return xt::transpose(x, order);
}
}  // namespace

// ---- matmul -----------------------------------------------------------------------

namespace {
template <class B, class T>
void matmul_shapes() {
  auto a = input<"a", T>(shape<3, 7>);
  auto b = input<"b", T>(shape<7, 5>);
  auto a3 = input<"a3", T>(shape<2, 3, 7>);
  auto b3 = input<"b3", T>(shape<2, 7, 5>);
  auto a4 = input<"a4", T>(shape<2, 3, 4, 7>);
  auto a4b = input<"a4b", T>(shape<2, 1, 4, 7>);
  auto b3c = input<"b3c", T>(shape<3, 7, 6>);
  auto prog = compile<B>(matmul(a, b), matmul(a3, b3), matmul(a4, b), matmul(a4b, b3c), matmul(a, b3),
                         matmul(a3, b));
  auto av = test::random_array<T>({3, 7}, 171);
  auto bv = test::random_array<T>({7, 5}, 172);
  auto a3v = test::random_array<T>({2, 3, 7}, 173);
  auto b3v = test::random_array<T>({2, 7, 5}, 174);
  auto a4v = test::random_array<T>({2, 3, 4, 7}, 175);
  auto a4bv = test::random_array<T>({2, 1, 4, 7}, 176);
  auto b3cv = test::random_array<T>({3, 7, 6}, 177);
  prog.bind("a", av);
  prog.bind("b", bv);
  prog.bind("a3", a3v);
  prog.bind("b3", b3v);
  prog.bind("a4", a4v);
  prog.bind("a4b", a4bv);
  prog.bind("b3c", b3cv);
  prog.run();
  auto d = [](const auto& v) { return test::to_double(v); };
  SECTION("2-D") { test::check_close<T>(prog.template output<0>(), matmul_ref(d(av), d(bv))); }
  SECTION("batched 3-D") { test::check_close<T>(prog.template output<1>(), matmul_ref(d(a3v), d(b3v))); }
  SECTION("[2,3,4,7] x [7,5]: a matrix broadcast over two batch axes") {
    auto out = prog.template output<2>();
    REQUIRE(out.shape() == std::vector<std::size_t>{2, 3, 4, 5});
    test::check_close<T>(out, matmul_ref(d(a4v), d(bv)));
  }
  SECTION("[2,1,4,7] x [3,7,6]: both operands broadcast") {
    auto out = prog.template output<3>();
    REQUIRE(out.shape() == std::vector<std::size_t>{2, 3, 4, 6});
    test::check_close<T>(out, matmul_ref(d(a4bv), d(b3cv)));
  }
  SECTION("a matrix times a batch and a batch times a matrix") {
    test::check_close<T>(prog.template output<4>(), matmul_ref(d(av), d(b3v)));
    test::check_close<T>(prog.template output<5>(), matmul_ref(d(a3v), d(bv)));
  }
}

template <class B, class T>
void matmul_operands() {
  auto at = input<"at", T>(shape<7, 3>);   // used as its transpose [3, 7]
  auto b = input<"b", T>(shape<7, 5>);
  auto bt = input<"bt", T>(shape<5, 7>);   // used as its transpose [7, 5]
  auto q = input<"q", T>(shape<2, 3, 4>);
  auto k = input<"k", T>(shape<2, 6, 4>);
  auto s = input<"s", T>(shape<1, 7, 3>);  // transposed, then broadcast over the batch
  auto b3 = input<"b3", T>(shape<2, 7, 5>);
  auto p = input<"p", T>(shape<3, 2, 7>);  // permuted (not the last two axes) to [2, 3, 7]
  auto kh = input<"kh", T>(shape<2, 6, 3, 4>);  // [batch, seq, heads, width] -> k^T [2, 3, 4, 6]
  auto qh = input<"qh", T>(shape<2, 3, 5, 4>);
  auto scores = matmul(qh, permute<0, 2, 3, 1>(kh));
  auto prog = compile<B>(matmul(transpose(at), b), matmul(transpose(at), transpose(bt)), matmul(q, transpose(k)),
                         matmul(transpose(s), b3), matmul(exp(transpose(at)) * 0.5_c, b),
                         matmul(permute<1, 0, 2>(p), b3), matmul(matmul(transpose(at), b), transpose(b)) + c<1>,
                         scores);
  // The GEMM reads k^T as the transpose of a stored [2, 3, 6, 4] permute (rows of 4 copied
  // whole), not as a copy that writes k^T at a stride.
  using layout = typename decltype(prog)::layout;
  constexpr int k_operand = layout::table[layout::template id<decltype(scores)>::value].children[1];
  STATIC_REQUIRE(layout::table[k_operand].is_last_two_transpose);
  STATIC_REQUIRE(layout::plan.stored[layout::table[k_operand].children[0]]);
  auto atv = test::random_array<T>({7, 3}, 181);
  auto bv = test::random_array<T>({7, 5}, 182);
  auto btv = test::random_array<T>({5, 7}, 183);
  auto qv = test::random_array<T>({2, 3, 4}, 184);
  auto kv = test::random_array<T>({2, 6, 4}, 185);
  auto sv = test::random_array<T>({1, 7, 3}, 186);
  auto b3v = test::random_array<T>({2, 7, 5}, 187);
  auto pv = test::random_array<T>({3, 2, 7}, 188);
  prog.bind("at", atv);
  prog.bind("b", bv);
  prog.bind("bt", btv);
  prog.bind("q", qv);
  prog.bind("k", kv);
  prog.bind("s", sv);
  prog.bind("b3", b3v);
  prog.bind("p", pv);
  auto khv = test::random_array<T>({2, 6, 3, 4}, 189);
  auto qhv = test::random_array<T>({2, 3, 5, 4}, 190);
  prog.bind("kh", khv);
  prog.bind("qh", qhv);
  prog.run();
  auto a_ = transposed(test::to_double(atv)), b_ = test::to_double(bv);
  SECTION("transposed left operand") { test::check_close<T>(prog.template output<0>(), matmul_ref(a_, b_)); }
  SECTION("both operands transposed") {
    test::check_close<T>(prog.template output<1>(), matmul_ref(a_, transposed(test::to_double(btv))));
  }
  SECTION("batched q k^T") {
    test::check_close<T>(prog.template output<2>(), matmul_ref(test::to_double(qv), transposed(test::to_double(kv))));
  }
  SECTION("transposed and broadcast over the batch") {
    test::check_close<T>(prog.template output<3>(), matmul_ref(transposed(test::to_double(sv)), test::to_double(b3v)));
  }
  SECTION("a computed operand") {
    test::check_close<T>(prog.template output<4>(), matmul_ref(test::apply(a_, [](double v) { return std::exp(v) * 0.5; }), b_));
  }
  SECTION("an operand permuted on its batch axis") {
    xt::xarray<double> permuted = xt::transpose(test::to_double(pv), {1, 0, 2});
    test::check_close<T>(prog.template output<5>(), matmul_ref(permuted, test::to_double(b3v)));
  }
  SECTION("attention's scores q k^T with k^T permuted from [batch, seq, heads, width]") {
    xt::xarray<double> kt = xt::transpose(test::to_double(khv), {0, 2, 3, 1});
    test::check_close<T>(prog.template output<7>(), matmul_ref(test::to_double(qhv), kt));
  }
  SECTION("a chain of products, then an elementwise epilogue") {
    auto chain = matmul_ref(matmul_ref(a_, b_), transposed(b_));
    test::check_close<T>(prog.template output<6>(), test::apply(chain, [](double v) { return v + 1; }));
  }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("matmul 2-D, batched and with broadcast batch axes", "[ops][matmul]", test_backends) {
  SECTION("f32") { matmul_shapes<TestType, f32>(); }
  SECTION("f64") { matmul_shapes<TestType, f64>(); }
}

// f32 only: f64 GEMM is covered above, and each instantiation costs compile time.
TEMPLATE_LIST_TEST_CASE("matmul of transposed, computed and permuted operands", "[ops][matmul]", test_backends) {
  matmul_operands<TestType, f32>();
}

TEMPLATE_LIST_TEST_CASE("matmul with a symbolic batch, rebound between runs", "[ops][matmul][symbolic]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 6>);
  auto w = param<"w", f32>(shape<6, 4>);
  auto bias = param<"bias", f32>(shape<4>);
  auto seq = input<"seq", f32>(shape<Batch, 3, 6>);
  auto prog = compile<TestType>(relu(matmul(x, w) + bias), matmul(seq, w), matmul(transpose(x), x));
  auto wv = test::random_array<float>({6, 4}, 191);
  auto biasv = test::random_array<float>({4}, 192);
  prog.bind("w", wv);
  prog.bind("bias", biasv);
  for (std::size_t batch : {3u, 10u}) {
    INFO("Batch = " << batch);
    auto xv = test::random_array<float>({batch, 6}, 193 + unsigned(batch));
    auto seqv = test::random_array<float>({batch, 3, 6}, 194 + unsigned(batch));
    prog.bind("x", xv);
    prog.bind("seq", seqv);
    prog.run();
    auto xd = test::to_double(xv), wd = test::to_double(wv);
    xt::xarray<double> affine = matmul_ref(xd, wd) + test::to_double(biasv);
    test::check_close<f32>(prog.template output<0>(), test::apply(affine, [](double v) { return std::max(v, 0.0); }));
    test::check_close<f32>(prog.template output<1>(), matmul_ref(test::to_double(seqv), wd));
    test::check_close<f32>(prog.template output<2>(), matmul_ref(transposed(xd), xd));
  }
}

// A weight's gradient sums the per-image products over the batch: on a backend that can
// (sums_gemm_batches), that sum is one GEMM accumulating over the axis, and the products
// get no buffer. Summed over the first, a middle and a broadcast batch axis, with batches
// fewer and more than the threads, and where the product is also an output (then stored).
TEMPLATE_LIST_TEST_CASE("a sum over a batch axis of a product is one GEMM accumulating over it", "[ops][matmul]",
                        test_backends) {
  auto a = input<"a", f32>(shape<Batch, 64, 70>);
  auto b = input<"b", f32>(shape<Batch, 66, 70>);   // used as its transpose [Batch, 70, 66]
  auto a4 = input<"a4", f32>(shape<2, 4, 3, 7>);
  auto b4 = input<"b4", f32>(shape<2, 4, 7, 5>);
  auto w = input<"w", f32>(shape<7, 5>);              // broadcast over both batch axes of a4
  auto kept = matmul(a4, b4);
  auto summed = sum<0>(matmul(a, transpose(b)));
  auto middle = sum<1>(kept);
  auto prog = compile<TestType>(summed, middle, sum<0>(matmul(a4, w)), kept);
#if !defined(__CUDACC__)  // nvcc's host front end cannot spell these leaf types
  using layout = typename decltype(prog)::layout;
  constexpr int summed_id = layout::template id<decltype(summed)>::value;
  constexpr int reduce_id = layout::table[summed_id].children[0];  // sum<0> drops the axis: a reshape
  constexpr int product_id = layout::table[reduce_id].children[0];
  STATIC_REQUIRE(layout::plan.sums_gemm[reduce_id] == sums_gemm_batches<TestType>);
  STATIC_REQUIRE(layout::plan.stored[product_id] == !sums_gemm_batches<TestType>);
  // The product that is also an output keeps its buffer, and its sum reads it.
  constexpr int middle_reduce = layout::table[layout::template id<decltype(middle)>::value].children[0];
  STATIC_REQUIRE(!layout::plan.sums_gemm[middle_reduce]);
  STATIC_REQUIRE(layout::plan.stored[layout::template id<decltype(kept)>::value]);
#endif

  auto a4v = test::random_array<float>({2, 4, 3, 7}, 201);
  auto b4v = test::random_array<float>({2, 4, 7, 5}, 202);
  auto wv = test::random_array<float>({7, 5}, 203);
  prog.bind("a4", a4v);
  prog.bind("b4", b4v);
  prog.bind("w", wv);
  auto sum_axis = [](const xt::xarray<double>& x, std::size_t axis) {
    xt::xarray<double> summed = xt::sum(x, std::vector<std::size_t>{axis});
    return summed;
  };
  for (std::size_t batch : {1u, 9u}) {
    INFO("Batch = " << batch);
    auto av = test::random_array<float>({batch, 64, 70}, 204 + unsigned(batch));
    auto bv = test::random_array<float>({batch, 66, 70}, 205 + unsigned(batch));
    prog.bind("a", av);
    prog.bind("b", bv);
    prog.run();
    // Sums of up to 630 products of magnitude 1: f32 rounding, absolute.
    test::require_close(prog.template output<0>(),
                        sum_axis(matmul_ref(test::to_double(av), transposed(test::to_double(bv))), 0), 1e-5, 1e-4);
    auto products = matmul_ref(test::to_double(a4v), test::to_double(b4v));
    test::check_close<f32>(prog.template output<1>(), sum_axis(products, 1));
    test::check_close<f32>(prog.template output<2>(), sum_axis(matmul_ref(test::to_double(a4v), test::to_double(wv)), 0));
    test::check_close<f32>(prog.template output<3>(), products);
    if (sums_gemm_batches<TestType> && batch == 9)
      REQUIRE_THAT(prog.describe(), Catch::Contains("GEMM 64 x 66 x 70, 9 batch(es) summed over axis 0 (9 of them)") &&
                                        Catch::Contains("GEMM 3 x 5 x 7, 8 batch(es) summed over axis 0 (2 of them)"));
  }
}
