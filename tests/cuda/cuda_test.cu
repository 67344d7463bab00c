// GPU-only tests of the CUDA backend ([cuda]): results against the host backend for the
// paths only the GPU takes (block-level reductions, strided-batched cuBLAS, CUDA Graph
// replay). A compiled training step is train_step_cuda_test.cu. Run by
// luminal_cuda_tests, which skips (exit 77) without a GPU.
#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

using test::require_throws_with;
}  // namespace

TEST_CASE("cuda: long reductions run a block per output and match the host", "[cuda]") {
  // 3 rows of 100000: far above block_reduce_from, so the shared-memory tree is used.
  auto x = input<"x", f64>(shape<3, 100000>);
  auto y = input<"y", f32>(shape<Batch, 300>);
  auto on_gpu = compile<cuda>(sum<1>(x), max<1>(x), sum<0>(y), max<1>(y));
  auto on_host = compile<host>(sum<1>(x), max<1>(x), sum<0>(y), max<1>(y));
  auto xv = test::random_array<double>({3, 100000}, 1);
  auto yv = test::random_array<float>({7, 300}, 2);
  yv(4, 123) = std::numeric_limits<float>::quiet_NaN();  // max propagates NaN in any order
  on_gpu.bind("x", xv);
  on_gpu.bind("y", yv);
  on_host.bind("x", xv);
  on_host.bind("y", yv);
  on_gpu.run();
  on_host.run();
  test::require_close(on_gpu.output<0>(), on_host.output<0>(), 1e-12, 1e-9);
  test::require_close(on_gpu.output<1>(), on_host.output<1>(), 0, 0);
  test::require_close(on_gpu.output<2>(), on_host.output<2>(), 1e-5, 1e-5);
  auto row_max = on_gpu.output<3>();
  REQUIRE(std::isnan(row_max(4)));
  test::require_close(row_max, on_host.output<3>(), 0, 0);
}

TEST_CASE("cuda: batched matmuls (strided and broadcast) match the host", "[cuda]") {
  auto a = input<"a", f32>(shape<4, 8, 16>);
  auto b = input<"b", f32>(shape<4, 16, 5>);
  auto w = input<"w", f32>(shape<16, 5>);          // broadcast over the batch: stride 0
  auto bt = input<"bt", f32>(shape<4, 5, 16>);     // read transposed
  auto g = compile<cuda>(matmul(a, b), matmul(a, w), matmul(a, transpose(bt)));
  auto h = compile<host>(matmul(a, b), matmul(a, w), matmul(a, transpose(bt)));
  auto av = test::random_array<float>({4, 8, 16}, 3);
  auto bv = test::random_array<float>({4, 16, 5}, 4);
  auto wv = test::random_array<float>({16, 5}, 5);
  auto btv = test::random_array<float>({4, 5, 16}, 6);
  g.bind("a", av); g.bind("b", bv); g.bind("w", wv); g.bind("bt", btv);
  h.bind("a", av); h.bind("b", bv); h.bind("w", wv); h.bind("bt", btv);
  g.run();
  h.run();
  test::require_close(g.output<0>(), h.output<0>(), 1e-5, 1e-5);
  test::require_close(g.output<1>(), h.output<1>(), 1e-5, 1e-5);
  test::require_close(g.output<2>(), h.output<2>(), 1e-5, 1e-5);
}

TEST_CASE("cuda: cuda_graph captures once per buffer set and replays the same results", "[cuda]") {
  auto x = input<"x", f32>(shape<Batch, 64>);
  auto w = input<"w", f32>(shape<64, 32>);
  auto out = softmax<-1>(relu(matmul(x, w)) * 2.0_c);
  auto graphed = compile<cuda_graph>(out, sum(out));
  auto plain = compile<cuda>(out, sum(out));
  auto xv = test::random_array<float>({16, 64}, 7);
  auto wv = test::random_array<float>({64, 32}, 8);
  graphed.bind("x", xv); graphed.bind("w", wv);
  plain.bind("x", xv); plain.bind("w", wv);
  plain.run();
  for (int i = 0; i < 3; ++i) graphed.run();  // warm-up, capture + launch, launch
  REQUIRE(graphed.backend().graph_captures() == 1);
  REQUIRE(graphed.backend().graph_launches() == 2);
  test::require_close(graphed.output<0>(), plain.output<0>(), 1e-6, 1e-7);
  // New values in the same buffers: replayed, not recaptured, and the new result.
  auto xv2 = test::random_array<float>({16, 64}, 9);
  graphed.bind("x", xv2); plain.bind("x", xv2);
  graphed.run(); plain.run();
  REQUIRE(graphed.backend().graph_captures() == 1);
  REQUIRE(graphed.backend().graph_launches() == 3);
  test::require_close(graphed.output<0>(), plain.output<0>(), 1e-6, 1e-7);
  test::require_close(graphed.output<1>(), plain.output<1>(), 1e-5, 1e-6);
  // Another batch size changes the extents: warm-up, then a second graph.
  auto xv3 = test::random_array<float>({5, 64}, 10);
  graphed.bind("x", xv3); plain.bind("x", xv3);
  plain.run();
  graphed.run();
  test::require_close(graphed.output<0>(), plain.output<0>(), 1e-6, 1e-7);
  graphed.run();
  REQUIRE(graphed.backend().graph_captures() == 2);
  test::require_close(graphed.output<0>(), plain.output<0>(), 1e-6, 1e-7);
}

TEST_CASE("cuda: host memory cannot be bound without a copy", "[cuda]") {
  auto x = input<"x", f32>(shape<4>);
  auto prog = compile<cuda>(x * 2.0_c);
  std::vector<float> data{1, 2, 3, 4};
  require_throws_with([&] { prog.bind_view("x", data.data(), {4}); }, "needs bind()");
  require_throws_with([&] { prog.run(); }, "was not bound");
}
