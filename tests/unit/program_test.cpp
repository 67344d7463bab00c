// The program API: binding errors, symbolic extents, fusion, buffer planning, zero-copy
// views, and that running a compiled program again performs no heap allocation.
#include <atomic>
#include <cstdlib>
#include <new>
#include <luminal/io/tensor_store.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train_programs.hpp>
#include <xtensor/xmanipulation.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
constexpr Dim Seq{"Seq"};

// Counts operator new calls while `counting` is set (all threads).
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

/// Wraps a backend and counts its device allocations.
template <class B>
struct counting_backend : B {
  static inline std::atomic<long> device_allocations{0};
  void* allocate(std::size_t bytes) {
    ++device_allocations;
    return B::allocate(bytes);
  }
};

using test::require_throws_with;

/// a [m, k] x b [k, n] in double, row by row.
xt::xarray<double> reference_matmul(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  const std::size_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  xt::xarray<double> out = xt::zeros<double>({m, n});
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t l = 0; l < n; ++l) out(i, l) += a(i, j) * b(j, l);
  return out;
}
}  // namespace

// nvcc compiles a replaced operator new for the device as well, where it may not throw:
// the throwing and counting happen in a host function it calls. The nothrow forms are
// replaced too, so that every block the replaced delete frees came from malloc: a
// sanitizer's own nothrow new would otherwise allocate what this delete frees.
static void* counted_malloc_or_null(std::size_t bytes) noexcept {
  if (counting.load(std::memory_order_relaxed)) ++allocations;
  return std::malloc(bytes ? bytes : 1);
}
static void* counted_malloc(std::size_t bytes) {
  if (void* p = counted_malloc_or_null(bytes)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t bytes) { return counted_malloc(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return counted_malloc_or_null(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

TEMPLATE_LIST_TEST_CASE("binding errors name the input, the axis and both sizes", "[program][errors]", test_backends) {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto y = input<"y", f32>(shape<Batch, 1>);
  auto prog = compile<TestType>(x * y);
  xt::xarray<float> good = test::random_array<float>({2, 3}, 1);

  require_throws_with([&] { prog.bind("z", good); }, "no input named 'z'; its inputs are: x, y");
  require_throws_with([&] { prog.bind("x", xt::xarray<double>(good)); }, "input 'x' holds f32, but the data given is f64");
  require_throws_with([&] { prog.bind("x", xt::xarray<float>::from_shape({2, 3, 1})); },
                      "input 'x' has shape (Batch, 3) of rank 2, but the data given has rank 3");
  require_throws_with([&] { prog.bind("x", xt::xarray<float>::from_shape({2, 4})); },
                      "axis 1 must be 3, but the data given has 4");

  prog.bind("x", good);
  require_throws_with([&] { prog.run(); }, "input 'y' was not bound before run()");
  require_throws_with([&] { (void)prog.template output<0>(); }, "before run()");

  prog.bind("y", xt::xarray<float>::from_shape({5, 1}));
  require_throws_with([&] { prog.run(); }, "input 'y' axis 0 is Batch = 5, but input 'x' set Batch = 2");
}

TEMPLATE_LIST_TEST_CASE("a gather index out of range makes run() throw", "[program][errors]", test_backends) {
  auto table = param<"table", f32>(shape<4, 2>);
  auto ids = input<"ids", i32>(shape<Batch>);
  auto prog = compile<TestType>(gather(table, ids));
  prog.bind("table", test::random_array<float>({4, 2}, 2));
  prog.bind("ids", xt::xarray<int>{0, 3, 1});
  prog.run();
  prog.bind("ids", xt::xarray<int>{0, 4});
  require_throws_with([&] { prog.run(); }, "gather index was outside");
  prog.bind("ids", xt::xarray<int>{-1});
  require_throws_with([&] { prog.run(); }, "gather index was outside");
}

TEST_CASE("only a program that gathers reads an error flag back after its kernels", "[program][errors]") {
  // On a GPU that read is the one wait of a run: other programs only queue their kernels.
  auto table = param<"table", f32>(shape<4, 2>);
  auto ids = input<"ids", i32>(shape<Batch>);
  STATIC_REQUIRE(decltype(compile(gather(table, ids) * 2.0_c))::checks_indices);
  STATIC_REQUIRE_FALSE(decltype(compile(table * 2.0_c, sum(table)))::checks_indices);
}

TEST_CASE("a run reads the memory bound last, when it changes and when it changes back", "[program]") {
  // run() uploads its table of buffer addresses only when an address changed.
  auto x = input<"x", f32>(shape<3>);
  auto prog = compile(x * 2.0_c);
  const std::vector<float> a{1, 2, 3}, b{4, 5, 6};
  for (int i = 0; i < 4; ++i) {
    const std::vector<float>& v = i % 2 ? b : a;
    prog.bind_view("x", v.data(), {3});
    prog.run();
    REQUIRE(bool(prog.output<0>() == xt::xarray<float>{2 * v[0], 2 * v[1], 2 * v[2]}));
  }
}

TEMPLATE_LIST_TEST_CASE("symbolic extents are resolved at each run", "[program]", test_backends) {
  auto x = input<"x", f32>(shape<Batch, Seq, 4>);
  auto flat = reshape(x, shape<Batch * Seq, 4>);
  auto prog = compile<TestType>(sum<1>(flat), mean<0>(flat));
  for (std::size_t batch : {3u, 1u, 7u}) {
    auto data = test::random_array<float>({batch, 5, 4}, unsigned(batch));
    prog.bind("x", data);
    prog.run();
    REQUIRE(prog.template output_shape<0>() == std::vector<index_t>{index_t(batch * 5)});
    xt::xarray<double> rows = xt::zeros<double>({batch * 5});
    xt::xarray<double> cols = xt::zeros<double>({std::size_t(4)});
    for (std::size_t i = 0; i < batch * 5; ++i)
      for (std::size_t j = 0; j < 4; ++j) {
        rows(i) += data.flat(i * 4 + j);
        cols(j) += data.flat(i * 4 + j) / double(batch * 5);
      }
    test::require_close(prog.template output<0>(), rows);
    test::require_close(prog.template output<1>(), cols);
  }
}

#ifndef __CUDACC__  // nvcc misprints decltype of these types outside templates; luminal_tests runs it
TEST_CASE("every node's extents are resolved from one row per distinct shape", "[program]") {
  auto x = input<"x", f32>(shape<Batch, Seq, 4>);
  auto flat = reshape(x, shape<Batch * Seq, 4>);
  auto prog = compile(sum<1>(exp(flat) + flat), mean<0>(flat) * 2.0_c);
  using layout = decltype(prog)::layout;
  STATIC_REQUIRE(layout::extents::row_count < layout::node_count);  // shapes are shared
  symbol_values symbols;
  symbols.set("Batch", 3);
  symbols.set("Seq", 5);
  std::vector<index_t> dims(layout::node_count * layout::max_rank, -1);
  layout::extents::resolve_all(symbols, dims.data());
  int extent_nodes = 0;
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<layout::node_count>>([&](auto I) {
    using N = boost::mp11::mp_at_c<layout::nodes, I>;
    INFO("node " << I);
    if constexpr (N::kind == op_kind::extent) {
      ++extent_nodes;
      REQUIRE(dims[I * layout::max_rank] == resolve(N::dim, symbols));  // the extent it holds
    } else {
      for (std::size_t k = 0; k < N::shape::rank; ++k)
        REQUIRE(dims[I * layout::max_rank + k] == resolve(N::shape::dims[k], symbols));
    }
  });
  REQUIRE(extent_nodes == 1);  // mean's divisor: Batch * Seq = 15
  symbols.count = 1;           // Seq has no value
  REQUIRE_THROWS_WITH(layout::extents::resolve_all(symbols, dims.data()), Catch::Contains("symbol 'Seq' has no value"));
}
#endif

#ifndef __CUDACC__  // nvcc misprints decltype of these types outside templates; luminal_tests runs it
TEST_CASE("the same expression type is the same node", "[graph]") {
  auto x = input<"x", f32>(shape<3>);
  auto y = input<"y", f32>(shape<3>);
  auto a = exp(x * y);
  auto b = exp(x * y);
  STATIC_REQUIRE(std::is_same_v<decltype(a), decltype(b)>);
  // x, y, mul, the log2(e) constant, its expand, the scaled product, exp2, add.
  using nodes = topo_nodes<decltype(a + b)>;
  STATIC_REQUIRE(boost::mp11::mp_size<nodes>::value == 8);
  STATIC_REQUIRE(!std::is_same_v<decltype(input<"x", f32>(shape<3>)), decltype(input<"x", f64>(shape<3>))>);
}
#endif

TEST_CASE("elementwise chains and views fuse into one kernel", "[plan]") {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto y = input<"y", f32>(shape<8, Batch>);
  auto chain = relu(exp(x) * transpose(y) + 1.0_c) - slice<1, 0, 8>(pad<1, 1, 1>(x));
  STATIC_REQUIRE(decltype(compile(chain))::kernel_count() == 1);
  // softmax: max, sum and the normalized output.
  STATIC_REQUIRE(decltype(compile(softmax<-1>(x)))::kernel_count() == 3);
  // matmul, then bias + relu fused into one epilogue kernel.
  auto w = param<"w", f32>(shape<8, 16>);
  auto b = param<"b", f32>(shape<16>);
  STATIC_REQUIRE(decltype(compile(relu(matmul(x, w) + b)))::kernel_count() == 2);
  // A transposed parameter is read by GEMM directly, not copied first.
  auto wt = param<"wt", f32>(shape<16, 8>);
  STATIC_REQUIRE(decltype(compile(matmul(x, transpose(wt))))::kernel_count() == 1);
}

TEMPLATE_LIST_TEST_CASE("consecutive flat kernels of one size compute what their loops compute one by one", "[plan]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 300>);
  auto y = input<"y", f32>(shape<Batch, 300>);
  auto a = x * y + 1.0_c;                           // stored: an output
  auto b = a * a - y;                               // reads a at its own index
  auto c = reshape(b, shape<Batch * 300>) * 2.0_c;  // the same elements through a reshape
  auto d = relu(a - reshape(c, shape<Batch, 300>)); // reads a and c
  auto prog = compile<TestType>(a, b, c, d);
  STATIC_REQUIRE(decltype(prog)::kernel_count() == 4);
  // All four run as one loop: kernel 0 starts a group that ends after kernel 3.
  using groups = luminal::detail::kernel_groups<typename decltype(prog)::layout>;
  STATIC_REQUIRE(groups::end[0] == 4);
  STATIC_REQUIRE(groups::first_of(3) == 0);
  for (std::size_t batch : {1u, 7u}) {  // 7 * 300 spans several blocks of the loop
    auto xv = test::random_array<float>({batch, 300}, 31);
    auto yv = test::random_array<float>({batch, 300}, 32);
    prog.bind("x", xv);
    prog.bind("y", yv);
    prog.run();
    std::size_t n = batch * 300;
    xt::xarray<double> ad = xt::xarray<double>::from_shape({batch, 300}), bd = ad, dd = ad;
    xt::xarray<double> cd = xt::xarray<double>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
      double xi = xv.data()[i], yi = yv.data()[i];
      ad.data()[i] = xi * yi + 1.0;
      bd.data()[i] = ad.data()[i] * ad.data()[i] - yi;
      cd.data()[i] = bd.data()[i] * 2.0;
      dd.data()[i] = std::max(ad.data()[i] - cd.data()[i], 0.0);
    }
    test::require_close(prog.template output<0>(), ad, 1e-5, 1e-6);
    test::require_close(prog.template output<1>(), bd, 1e-5, 1e-6);
    test::require_close(prog.template output<2>(), cd, 1e-5, 1e-6);
    test::require_close(prog.template output<3>(), dd, 1e-5, 1e-6);
  }
}

TEMPLATE_LIST_TEST_CASE("a kernel joins the loop whose results it reads, and a result only that loop reads stays in it",
                        "[plan]", test_backends) {
  auto x = input<"x", f32>(shape<Batch, 300>);
  auto y = input<"y", f32>(shape<Batch, 300>);
  auto w = param<"w", f32>(shape<300, 7>);
  auto h = gelu(x, approximate::tanh) * y;  // read three times and dear to recompute: stored
  auto a = h * 2.0_c + y;
  auto m = matmul(a, w);
  auto b = h * h;  // after the GEMM in the graph, but it reads only h
  auto prog = compile<TestType>(a, m, b);
  using layout = typename decltype(prog)::layout;
  using groups = luminal::detail::kernel_groups<layout>;
  constexpr auto outputs = decltype(prog)::output_ids;
  STATIC_REQUIRE(decltype(prog)::kernel_count() == 4);
  // h's kernel, then a's, then b's, moved up before the GEMM into the loop of h and a; h,
  // which only that loop reads (each at the index it writes), stays in the cache.
  STATIC_REQUIRE(!layout::plan.is_output[layout::plan.kernels[0]]);
  STATIC_REQUIRE(layout::plan.kernels[1] == outputs[0]);
  STATIC_REQUIRE(layout::plan.kernels[2] == outputs[2]);
  STATIC_REQUIRE(layout::plan.kernels[3] == outputs[1]);
  STATIC_REQUIRE(groups::end[0] == 3);
  STATIC_REQUIRE(groups::stays_in_group(0));
  STATIC_REQUIRE(!groups::stays_in_group(1));
  STATIC_REQUIRE(groups::local_mask(0) == 1);
  for (std::size_t batch : {1u, 30u}) {  // 30 * 300 spans several blocks of the loop
    auto xv = test::random_array<float>({batch, 300}, 41);
    auto yv = test::random_array<float>({batch, 300}, 42);
    auto wv = test::random_array<float>({300, 7}, 43);
    prog.bind("x", xv);
    prog.bind("y", yv);
    prog.bind("w", wv);
    prog.run();
    xt::xarray<double> xd = test::to_double(xv), yd = test::to_double(yv);
    xt::xarray<double> hd = 0.5 * xd * (1.0 + xt::tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd))) * yd;
    xt::xarray<double> ad = hd * 2.0 + yd;
    test::require_close(prog.template output<0>(), ad, 1e-5, 1e-6);
    test::require_close(prog.template output<1>(), reference_matmul(ad, test::to_double(wv)), 1e-4, 1e-5);
    test::require_close(prog.template output<2>(), xt::xarray<double>(hd * hd), 1e-5, 1e-6);
  }
  const std::string text = prog.describe();
  REQUIRE(text.find("stays in the cache") != std::string::npos);
  // h's loop applies exp2 (tanh): bound by its arithmetic, it alone is compiled for the
  // widest vectors; a, b and the GEMM read h stored.
  auto count = [&](std::string_view what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
#ifdef LUMINAL_VECTOR_WIDTHS
  REQUIRE(count("512-bit vectors") == 1);
  REQUIRE(text.find("512-bit vectors") < text.find("kernel 1:"));
#else
  REQUIRE(count("512-bit vectors") == 0);
#endif
}

TEMPLATE_LIST_TEST_CASE("a GEMM reads a reshaped operand in the memory under the reshape, without a copy", "[plan]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 4, 8>);
  auto w = param<"w", f32>(shape<8, 5>);
  // The [Batch * 4, 8] view of an input, and of a value that is also an output.
  STATIC_REQUIRE(decltype(compile(matmul(reshape(x, shape<Batch * 4, 8>), w)))::kernel_count() == 1);
  auto r = relu(x - 0.25_c);
  auto prog = compile<TestType>(r, matmul(reshape(r, shape<Batch * 4, 8>), w));
  STATIC_REQUIRE(decltype(prog)::kernel_count() == 2);
  auto xv = test::random_array<float>({3, 4, 8}, 44);
  auto wv = test::random_array<float>({8, 5}, 45);
  prog.bind("x", xv);
  prog.bind("w", wv);
  prog.run();
  xt::xarray<double> rd = xt::maximum(test::to_double(xv) - 0.25, 0.0);
  xt::xarray<double> flat = xt::reshape_view(rd, {12, 8});
  test::require_close(prog.template output<1>(), reference_matmul(flat, test::to_double(wv)), 1e-5, 1e-6);
}

TEMPLATE_LIST_TEST_CASE("a map over a reshape that splits its input's rows loops over the input's longer rows", "[plan]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 3, 12>);
  auto bias = input<"bias", f32>(shape<3, 1>);
  auto z = input<"z", f32>(shape<Batch, 3, 3, 4>);
  auto split = reshape(x + bias, shape<Batch, 3, 3, 4>);  // as a convolution's output
  // The ReLU's other operand is a constant: its nest runs over (Batch, 3, 12). Adding z,
  // read at the output's own coordinates, keeps the nest over (Batch, 3, 3, 4).
  auto relu_only = compile<TestType>(relu(split));
  auto with_z = compile<TestType>(relu(split + z));
  for (std::size_t batch : {1u, 5u}) {
    auto xv = test::random_array<float>({batch, 3, 12}, 46);
    auto bv = test::random_array<float>({3, 1}, 47);
    auto zv = test::random_array<float>({batch, 3, 3, 4}, 48);
    relu_only.bind("x", xv);
    relu_only.bind("bias", bv);
    relu_only.run();
    with_z.bind("x", xv);
    with_z.bind("bias", bv);
    with_z.bind("z", zv);
    with_z.run();
    xt::xarray<double> sd = test::to_double(xv) + test::to_double(bv);
    xt::xarray<double> sz = xt::reshape_view(sd, {batch, std::size_t(3), std::size_t(3), std::size_t(4)});
    test::require_close(relu_only.output(), xt::xarray<double>(xt::maximum(sz, 0.0)), 1e-6, 1e-7);
    test::require_close(with_z.output(), xt::xarray<double>(xt::maximum(sz + test::to_double(zv), 0.0)), 1e-6, 1e-7);
  }
  REQUIRE(relu_only.describe().find("loop nest over (5, 3, 12), inner loop 12 (the reshape's input)") !=
          std::string::npos);
  REQUIRE(with_z.describe().find("loop nest over (5, 3, 3, 4), inner loop 4") != std::string::npos);
}

TEMPLATE_LIST_TEST_CASE("loop nests of one size run in one loop when each reads the others in place", "[plan]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 40, 40>);
  auto bias = input<"bias", f32>(shape<40>);
  auto a = x + bias;                   // a loop nest: the bias is read through an expand
  auto b = a * a + bias;               // reads a at its own index
  auto t = transpose<1, 2>(b) + bias;  // reads b through a permute: must not join b's loop
  auto prog = compile<TestType>(a, b, t);
  STATIC_REQUIRE(decltype(prog)::kernel_count() == 3);
  using groups = luminal::detail::kernel_groups<typename decltype(prog)::layout>;
  STATIC_REQUIRE(groups::end[0] == 2);
  STATIC_REQUIRE(groups::end[2] == 3);
  for (std::size_t batch : {1u, 7u}) {  // 7 * 1600 spans several blocks, which end inside rows
    auto xv = test::random_array<float>({batch, 40, 40}, 36);
    auto bv = test::random_array<float>({40}, 37);
    prog.bind("x", xv);
    prog.bind("bias", bv);
    prog.run();
    xt::xarray<double> ad = test::to_double(xv) + test::to_double(bv);
    xt::xarray<double> bd = ad * ad + test::to_double(bv);
    xt::xarray<double> td = xt::transpose(bd, {0, 2, 1}) + test::to_double(bv);
    test::require_close(prog.template output<0>(), ad, 1e-5, 1e-6);
    test::require_close(prog.template output<1>(), bd, 1e-5, 1e-6);
    test::require_close(prog.template output<2>(), td, 1e-5, 1e-6);
  }
}

TEMPLATE_LIST_TEST_CASE("independent loops of other sizes run in one launch, each over its own elements", "[plan]",
                        test_backends) {
  auto x = input<"x", f32>(shape<Batch, 300>);
  auto y = input<"y", f32>(shape<7>);
  auto z = input<"z", f32>(shape<Batch, 7>);
  auto a = x * 2.0_c + 1.0_c;
  auto b = y * y - 1.0_c;  // another size, and reads nothing of a's: a loop of its own
  auto c = a * a;          // reads a in place: a's loop
  auto d = z * b;          // reads b through a broadcast: not beside it
  auto prog = compile<TestType>(a, b, c, d);
  using layout = typename decltype(prog)::layout;
  using groups = luminal::detail::kernel_groups<layout>;
  constexpr auto outputs = decltype(prog)::output_ids;
  STATIC_REQUIRE(decltype(prog)::kernel_count() == 4);
  STATIC_REQUIRE(layout::plan.kernels[0] == outputs[0]);
  STATIC_REQUIRE(layout::plan.kernels[1] == outputs[2]);
  STATIC_REQUIRE(layout::plan.kernels[2] == outputs[1]);
  STATIC_REQUIRE(groups::end[0] == 3);          // a, c and b: one launch
  STATIC_REQUIRE(groups::segment_end[0] == 2);  // a and c over Batch * 300 elements
  STATIC_REQUIRE(groups::segment_end[1] == -1);
  STATIC_REQUIRE(groups::segment_end[2] == 3);  // b over 7
  STATIC_REQUIRE(groups::end[3] == 4);          // d alone
  STATIC_REQUIRE(groups::template segment_ends<0>() == std::array<int, 2>{2, 3});
  // 1 and 2039 elements of a, a prime count: the host's threads split the launch's
  // elements inside a's loop, inside blocks and in b's loop.
  for (std::size_t batch : {1u, 20u, 2039u}) {
    auto xv = test::random_array<float>({batch, 300}, 51);
    auto yv = test::random_array<float>({7}, 52);
    auto zv = test::random_array<float>({batch, 7}, 53);
    prog.bind("x", xv);
    prog.bind("y", yv);
    prog.bind("z", zv);
    prog.run();
    xt::xarray<double> ad = test::to_double(xv) * 2.0 + 1.0;
    xt::xarray<double> bd = test::to_double(yv) * test::to_double(yv) - 1.0;
    test::require_close(prog.template output<0>(), ad, 1e-5, 1e-6);
    test::require_close(prog.template output<1>(), bd, 1e-5, 1e-6);
    test::require_close(prog.template output<2>(), xt::xarray<double>(ad * ad), 1e-5, 1e-6);
    test::require_close(prog.template output<3>(), xt::xarray<double>(test::to_double(zv) * bd), 1e-5, 1e-6);
  }
  REQUIRE_THAT(prog.describe(), Catch::Contains("one launch with kernels 1 to 2, as 2 loops over their own elements") &&
                                    Catch::Contains("a loop of its own in the launch of kernel 0"));
}

TEST_CASE("each kernel's reads of stored nodes are recorded once, in place or elsewhere", "[plan]") {
  auto x = input<"x", f32>(shape<16, 16>);
  auto y = input<"y", f32>(shape<16, 16>);
  auto z = input<"z", f32>(shape<16, 16>);
  auto a = x * 2.0_c;                              // an output: stored
  auto b = a + transpose(y) + z * transpose(z);   // reads a in place, y moved, z both ways
  auto prog = compile(a, b);
  using layout = typename decltype(prog)::layout;
  using groups = luminal::detail::kernel_groups<layout>;
  using kind = typename groups::read_kind;
  constexpr int ia = layout::template id<decltype(a)>::value, ib = layout::template id<decltype(b)>::value;
  constexpr int ix = layout::template id<decltype(x)>::value, iy = layout::template id<decltype(y)>::value;
  constexpr int iz = layout::template id<decltype(z)>::value;
  STATIC_REQUIRE(groups::find_read(ia, ix) == kind::in_place);
  STATIC_REQUIRE(groups::find_read(ib, ia) == kind::in_place);
  STATIC_REQUIRE(groups::find_read(ib, iy) == kind::elsewhere);
  STATIC_REQUIRE(groups::find_read(ib, iz) == kind::elsewhere);  // one path moves the index
  STATIC_REQUIRE(groups::find_read(ib, ix) == kind::none);       // behind a's buffer
  STATIC_REQUIRE(groups::find_read(ia, iz) == kind::none);
  // b's kernel: a, y and z, each once; the readers' side lists the same entries.
  STATIC_REQUIRE(groups::reads.begin[ib + 1] - groups::reads.begin[ib] == 3);
  STATIC_REQUIRE(groups::readers.begin[iz + 1] - groups::readers.begin[iz] == 1);
  STATIC_REQUIRE(groups::readers.entries[groups::readers.begin[iz]].kernel == layout::plan.kernel_of[ib]);
  STATIC_REQUIRE(groups::readers.begin[ix + 1] - groups::readers.begin[ix] == 1);
}

TEMPLATE_LIST_TEST_CASE("an update is not written over a tensor that another loop of its launch reads", "[plan]",
                        test_backends) {
  // p * 0.5 may replace p only if every kernel that reads p is done with it first; a + p
  // reads p in the first loop of the same launch, which the other threads may still run.
  auto a = param<"a", f32>(shape<300>);
  auto p = param<"p", f32>(shape<300>);
  auto q = param<"q", f32>(shape<7>);
  auto prog = compile<TestType>(a + p, q * 2.0_c, p * 0.5_c);
  using update = decltype(prog);
  using groups = luminal::detail::kernel_groups<typename update::layout>;
  STATIC_REQUIRE(groups::end[0] == 3);
  STATIC_REQUIRE(groups::template segment_ends<0>() == std::array<int, 3>{1, 2, 3});
#if !defined(__CUDACC__)  // nvcc's host front end cannot spell these leaves' types here
  constexpr auto in_place = luminal::detail::slots_updated_in_place<update>(
      boost::mp11::mp_list<decltype(a), decltype(q), decltype(p)>{});
  STATIC_REQUIRE(in_place[0]);
  STATIC_REQUIRE(in_place[1]);
  STATIC_REQUIRE(!in_place[2]);
#endif
}

TEMPLATE_LIST_TEST_CASE("a kernel run in one loop with the next keeps the scalar it broadcasts", "[plan]",
                        test_backends) {
  // a reads the scalar s at index 0 for every element, and b is written after a. Run one
  // by one, s is dead once a is done and b may take its memory; run as one loop, a's
  // later blocks would read what b wrote there.
  auto x = input<"x", f32>(shape<Batch, 300>);
  auto s = sum(x);
  auto a = x * s + 1.0_c;
  auto b = a * 3.0_c;
  auto prog = compile<TestType>(a, b);
  for (std::size_t batch : {1u, 7u, 20u}) {
    auto xv = test::random_array<float>({batch, 300}, 33);
    prog.bind("x", xv);
    prog.run();
    double total = 0;
    for (std::size_t i = 0; i < batch * 300; ++i) total += xv.data()[i];
    xt::xarray<double> ad = xt::xarray<double>::from_shape({batch, 300}), bd = ad;
    for (std::size_t i = 0; i < batch * 300; ++i) {
      ad.data()[i] = xv.data()[i] * total + 1.0;
      bd.data()[i] = ad.data()[i] * 3.0;
    }
    test::require_close(prog.template output<0>(), ad, 1e-4, 1e-4);
    test::require_close(prog.template output<1>(), bd, 1e-4, 1e-4);
  }
}

TEMPLATE_LIST_TEST_CASE("rows of 3 run as blocks, also where a thread's range begins inside a row", "[plan]",
                        test_backends) {
  // The output (7, Batch, 3) reads x through a permute, row by row of 3 elements. 2039 is
  // prime, so the ranges the host's threads take begin and end inside rows.
  auto x = input<"x", f32>(shape<Batch, 7, 3>);
  auto prog = compile<TestType>(permute<1, 0, 2>(x) * 2.0_c + 1.0_c);
  for (std::size_t batch : {1u, 2039u}) {
    auto xv = test::random_array<float>({batch, 7, 3}, 35);
    prog.bind("x", xv);
    prog.run();
    xt::xarray<double> expected = xt::transpose(test::to_double(xv), {1, 0, 2}) * 2.0 + 1.0;
    test::require_close(prog.template output<0>(), expected, 1e-6, 1e-6);
  }
}

TEMPLATE_LIST_TEST_CASE("buffers whose lifetimes do not overlap share memory", "[plan]", test_backends) {
  auto x = input<"x", f32>(shape<64, 64>);
  auto w = param<"w", f32>(shape<64, 64>);
  auto h1 = matmul(x, w);
  auto h2 = matmul(h1, w);
  auto h3 = matmul(h2, w);
  auto h4 = matmul(h3, w);
  auto prog = compile<TestType>(sum(h4));
  prog.bind("x", test::random_array<float>({64, 64}, 3));
  prog.bind("w", test::random_array<float>({64, 64}, 4, -0.1, 0.1));
  prog.run();
  REQUIRE(prog.arena_bytes() > 0);
  REQUIRE(prog.arena_bytes() < prog.unshared_bytes());
  // h1..h4 are 16 KiB each and live one after another: two buffers at a time suffice.
  REQUIRE(prog.arena_bytes() <= 2 * 64 * 64 * sizeof(float) + 64);
}

TEST_CASE("place_in_arena: live-together buffers are disjoint, the others may share", "[plan]") {
  // kernels: a 0..1, b 1..2 (overlaps a), c 3..4 (overlaps neither), d 0..4 (overlaps all)
  std::vector<buffer_request> requests{{0, 256, 0, 1}, {1, 128, 1, 2}, {2, 256, 3, 4}, {3, 64, 0, 4}};
  const std::size_t total = place_in_arena(requests);
  auto disjoint = [&](int i, int j) {
    const auto &p = requests[i], &q = requests[j];
    return p.offset + p.bytes <= q.offset || q.offset + q.bytes <= p.offset;
  };
  REQUIRE(disjoint(0, 1));
  REQUIRE(disjoint(0, 3));
  REQUIRE(disjoint(1, 3));
  REQUIRE(disjoint(2, 3));
  REQUIRE(requests[2].offset == requests[0].offset);  // c reuses a's bytes (largest first)
  for (const auto& r : requests) REQUIRE(r.offset + r.bytes <= total);
  REQUIRE(total == 256 + 128 + 64);
}

TEMPLATE_LIST_TEST_CASE("running again with the same extents allocates nothing", "[program][alloc]", test_backends) {
  using B = counting_backend<TestType>;
  auto x = input<"x", f32>(shape<Batch, 32>);
  auto w = param<"w", f32>(shape<32, 16>);
  auto ids = input<"ids", i32>(shape<Batch>);
  auto logits = matmul(tanh(x), w) + cast<f32>(reshape(ids, shape<Batch, 1>));
  auto prog = compile<B>(log_softmax<-1>(logits), argmax<1>(logits), mean(logits));
  auto data = test::random_array<float>({64, 32}, 5);
  auto weights = test::random_array<float>({32, 16}, 6);
  xt::xarray<int> labels = xt::arange<int>(64);
  if constexpr (TestType::host_accessible) prog.bind_view("x", data.data(), {64, 32});
  else prog.bind("x", data);  // device memory: bind_view of host memory throws
  prog.bind("w", weights);
  prog.bind("ids", labels);
  prog.run();  // plans the arena
  auto expected = prog.template output<0>();

  long device_before = B::device_allocations.load();
  allocations = 0;
  counting = true;
  for (int i = 0; i < 3; ++i) prog.run();
  counting = false;
  REQUIRE(allocations.load() == 0);
  REQUIRE(B::device_allocations.load() == device_before);
  test::require_close(prog.template output<0>(), expected, 0, 0);
}

TEMPLATE_LIST_TEST_CASE("bind_view reads the caller's memory without copying", "[program]", test_backends) {
  if constexpr (TestType::host_accessible) {
    auto x = input<"x", f64>(shape<4>);
    auto prog = compile<TestType>(x * 2.0_c);
    std::vector<double> data{1, 2, 3, 4};
    prog.bind_view("x", data.data(), {4});
    prog.run();
    test::require_close(prog.template output<0>(), xt::xarray<double>{2, 4, 6, 8});
    data[2] = 10;  // visible to the next run: no copy was taken
    prog.run();
    test::require_close(prog.template output<0>(), xt::xarray<double>{2, 4, 20, 8});
    std::vector<double> out(4);
    prog.template read_output<0>(out);
    REQUIRE(out == std::vector<double>{2, 4, 20, 8});
    std::vector<double> small(3);
    require_throws_with([&] { prog.template read_output<0>(small); }, "holds 4 elements");
  } else {  // device memory: host memory cannot be read in place
    auto x = input<"x", f64>(shape<4>);
    auto prog = compile<TestType>(x * 2.0_c);
    std::vector<double> data{1, 2, 3, 4};
    require_throws_with([&] { prog.bind_view("x", data.data(), {4}); }, "needs bind()");
  }
}

TEST_CASE("write_output_to by a run-time index writes there, and refuses a wrong index, type or input", "[program]") {
  auto x = input<"x", f32>(shape<4>);
  auto prog = compile(x * 2.0_c, x);
  prog.bind("x", xt::xarray<float>{1, 2, 3, 4});
  std::vector<float> out(4);
  prog.write_output_to(0, dtype_tag::f32, out.data());
  prog.run();
  REQUIRE(out == std::vector<float>{2, 4, 6, 8});
  require_throws_with([&] { prog.write_output_to(0, dtype_tag::f64, out.data()); }, "holds f32, not f64");
  require_throws_with([&] { prog.write_output_to(1, dtype_tag::f32, out.data()); }, "is an input");
  require_throws_with([&] { prog.write_output_to(2, dtype_tag::f32, out.data()); }, "does not exist");
  prog.write_output_to(0, dtype_tag::f32, nullptr);  // back to the arena
  prog.bind("x", xt::xarray<float>{5, 6, 7, 8});
  prog.run();
  test::require_close(prog.template output<0>(), xt::xarray<float>{10, 12, 14, 16});
  REQUIRE(out == std::vector<float>{2, 4, 6, 8});  // no longer written
}

TEMPLATE_LIST_TEST_CASE("a tensor_store binds every input it names into a program", "[program][io]", test_backends) {
  auto w = param<"w", f32>(shape<3>);
  auto k = input<"k", i32>(shape<>);
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto prog = compile<TestType>(x * w + cast<f32>(k));
  tensor_store store;
  store.set("w", xt::xarray<float>{1, 2, 3});
  store.set("k", xt::xarray<i32>(10));
  store.set("unused", xt::xarray<double>{7});  // not an input of prog: left alone
  REQUIRE(store.bind(prog) == 2);
  prog.bind("x", xt::xarray<float>{{1, 1, 1}, {2, 2, 2}});
  prog.run();
  test::require_close(prog.template output<0>(), xt::xarray<float>{{11, 12, 13}, {12, 14, 16}});

  store.set("w", xt::xarray<float>{0, 0, 1});  // copied in: the program sees the store at bind()
  prog.run();
  test::require_close(prog.template output<0>(), xt::xarray<float>{{11, 12, 13}, {12, 14, 16}});

  tensor_store wrong_type;
  wrong_type.set("w", xt::xarray<double>{1, 2, 3});
  require_throws_with([&] { wrong_type.bind(prog); },
                      "tensor_store entry 'w' holds f64, but the program's input 'w' is f32");
  tensor_store wrong_shape;
  wrong_shape.set("w", xt::xarray<float>{1, 2});
  require_throws_with([&] { wrong_shape.bind(prog); }, "axis 0 must be 3, but the data given has 2");
}

TEST_CASE("to_dot draws every node and edge", "[dot]") {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = param<"fc.weight", f32>(shape<3, 2>);
  std::string dot = to_dot(relu(matmul(x, w)));
  REQUIRE(dot.rfind("digraph luminal {", 0) == 0);
  REQUIRE(dot.find("input x\\nf32 (Batch, 3)") != std::string::npos);
  REQUIRE(dot.find("param fc.weight\\nf32 (3, 2)") != std::string::npos);
  REQUIRE(dot.find("matmul\\nf32 (Batch, 2)") != std::string::npos);
  REQUIRE(dot.find("n0 -> n2;") != std::string::npos);
  REQUIRE(dot.find("style=bold") != std::string::npos);
  REQUIRE(dot.back() == '\n');
}
