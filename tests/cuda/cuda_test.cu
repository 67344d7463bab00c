// GPU-only tests of the CUDA backend ([cuda]): results against the host backend for the
// paths only the GPU takes (block-level reductions, strided-batched cuBLAS, CUDA Graph
// replay, work queued without waiting). A compiled training step is train_step_cuda_test.cu. Run by
// luminal_cuda_tests, which skips (exit 77) without a GPU.
#include "test_support.hpp"

#include <luminal/runtime/parameter_store.hpp>
#include <luminal/backends/host.hpp>
#include <map>
#include <stdlib.h>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

using test::require_throws_with;

// Each kind of loop: a nest over a broadcast, a write through a permute, reductions over
// a short last axis (through a pad) and over the batch, and a flat map.
namespace chunk_test {
auto x = input<"x", f32>(shape<Batch, 29>);
auto b = input<"b", f32>(shape<29>);
auto nest = tanh(x + b);
auto permuted = transpose(exp(x));
auto padded_sum = sum<1>(square(pad<1, 2, 3, 0.5>(x)));
auto batch_max = max<0>(x);
auto scaled = x * 3.0_c;
constexpr Dim Rows{"Rows"};
auto wide = input<"wide", f32>(shape<Rows, 300>);
auto row_sum = sum<1>(wide * wide);  // 2000 outputs, enough to fill a GPU: a warp per output, or a block
}  // namespace chunk_test
}  // namespace

TEST_CASE("cuda: long reductions run a block per output or per part and match the host", "[cuda]") {
  // 3 rows of 100000 and one sum of all 300000: few outputs over long axes, split into
  // parts of a block each, then combined. 7 rows of 300 and 1000 rows of 4096: a block
  // per output. Columns of 7: a thread per output.
  auto x = input<"x", f64>(shape<3, 100000>);
  auto y = input<"y", f32>(shape<Batch, 300>);
  auto z = input<"z", f32>(shape<1000, 4096>);
  auto on_gpu = compile<cuda>(sum<1>(x), max<1>(x), sum(x), sum<0>(y), max<1>(y), sum<1>(z), max(z));
  auto on_host = compile<host>(sum<1>(x), max<1>(x), sum(x), sum<0>(y), max<1>(y), sum<1>(z), max(z));
  auto xv = test::random_array<double>({3, 100000}, 1);
  auto yv = test::random_array<float>({7, 300}, 2);
  auto zv = test::random_array<float>({1000, 4096}, 3);
  xv(1, 77777) = std::numeric_limits<double>::quiet_NaN();  // max propagates NaN in any order,
  yv(4, 123) = std::numeric_limits<float>::quiet_NaN();     // through the parts too
  on_gpu.bind("x", xv);
  on_gpu.bind("y", yv);
  on_gpu.bind("z", zv);
  on_host.bind("x", xv);
  on_host.bind("y", yv);
  on_host.bind("z", zv);
  on_gpu.run();
  on_host.run();
  auto row_sums = on_gpu.output<0>(), row_maxima = on_gpu.output<1>();
  REQUIRE(std::isnan(row_sums(1)));
  REQUIRE(std::isnan(row_maxima(1)));
  for (std::size_t r : {0u, 2u}) {
    REQUIRE(std::abs(row_sums(r) - on_host.output<0>()(r)) <= 1e-9 * (1 + std::abs(row_sums(r))));
    REQUIRE(row_maxima(r) == on_host.output<1>()(r));
  }
  REQUIRE(std::isnan(on_gpu.output<2>()()));
  test::require_close(on_gpu.output<3>(), on_host.output<3>(), 1e-5, 1e-5);
  auto row_max = on_gpu.output<4>();
  REQUIRE(std::isnan(row_max(4)));
  test::require_close(row_max, on_host.output<4>(), 0, 0);
  test::require_close(on_gpu.output<5>(), on_host.output<5>(), 1e-4, 1e-5);
  test::require_close(on_gpu.output<6>(), on_host.output<6>(), 0, 0);
  // Without the NaN, the sum of all 300000 through 100-odd parts.
  xv(1, 77777) = 0.5;
  on_gpu.bind("x", xv);
  on_host.bind("x", xv);
  on_gpu.run();
  on_host.run();
  const double total = on_gpu.output<2>()(), expected = on_host.output<2>()();
  REQUIRE(std::abs(total - expected) <= 1e-9 * (1 + std::abs(expected)));
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

TEST_CASE("cuda: kernels give the same results whatever each thread's chunk, with dependent launch or without",
          "[cuda]") {
  // 37 rows of 29 (chunk_test): chunks of 3, 5 and 8 end inside rows and past the end.
  using namespace chunk_test;
  using cuda_program = decltype(compile<cuda>(nest, permuted, padded_sum, batch_max, scaled, row_sum));
  auto reference = compile<host>(nest, permuted, padded_sum, batch_max, scaled, row_sum);
  const auto xv = test::random_array<float>({37, 29}, 21);
  const auto bv = test::random_array<float>({29}, 22);
  const auto wv = test::random_array<float>({2000, 300}, 23);
  reference.bind("x", xv);
  reference.bind("b", bv);
  reference.bind("wide", wv);
  reference.run();
  // Settings with the same reduction kernels give the same bits: each element and each
  // output is computed by the same code in the same order, whatever the chunks.
  std::map<index_t, std::vector<std::vector<float>>> first;  // by warp_reduce_below
  for (const cuda_launch_settings settings :
       {cuda_launch_settings{1, 1, false, 0}, cuda_launch_settings{3, 2, true, 0},
        cuda_launch_settings{8, 5, true, 4096}, cuda_launch_settings{4, 1, true, 4096}}) {
    INFO("row_elements " << settings.row_elements << ", flat_elements " << settings.flat_elements
                         << ", dependent_launch " << settings.dependent_launch << ", warp_reduce_below "
                         << settings.warp_reduce_below);
    cuda_program prog{cuda(settings)};
    prog.bind("x", xv);
    prog.bind("b", bv);
    prog.bind("wide", wv);
    prog.run();
    std::vector<std::vector<float>> results;
    auto check = [&](const auto& got, const auto& expected) {
      test::require_close(got, expected, 1e-5, 1e-5);
      results.emplace_back(got.begin(), got.end());
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (check(prog.template output<I>(), reference.template output<I>()), ...);
    }(std::make_index_sequence<6>{});
    auto [seen, fresh] = first.try_emplace(settings.warp_reduce_below, results);
    if (!fresh) REQUIRE(results == seen->second);
  }
}

TEST_CASE("cuda: launch settings from the environment, and a clear error for a bad one", "[cuda]") {
  ::setenv("LUMINAL_CUDA_ROW_ELEMENTS", "6", 1);
  ::setenv("LUMINAL_CUDA_DEPENDENT_LAUNCH", "0", 1);
  const cuda_launch_settings read = cuda_launch_settings::from_environment();
  CHECK(read.row_elements == 6);
  CHECK(read.flat_elements == cuda_launch_settings{}.flat_elements);
  CHECK(!read.dependent_launch);
  CHECK(cuda{}.launch_settings().row_elements == 6);
  ::setenv("LUMINAL_CUDA_ROW_ELEMENTS", "0", 1);
  require_throws_with([] { cuda{}; }, "LUMINAL_CUDA_ROW_ELEMENTS is '0'; it must be a whole number from 1 to 64");
  ::setenv("LUMINAL_CUDA_ROW_ELEMENTS", "4x", 1);
  require_throws_with([] { cuda_launch_settings::from_environment(); }, "is '4x'");
  ::unsetenv("LUMINAL_CUDA_ROW_ELEMENTS");
  ::unsetenv("LUMINAL_CUDA_DEPENDENT_LAUNCH");
  CHECK(cuda{}.launch_settings().row_elements == cuda_launch_settings{}.row_elements);
}

TEST_CASE("cuda: host memory cannot be bound without a copy", "[cuda]") {
  auto x = input<"x", f32>(shape<4>);
  auto prog = compile<cuda>(x * 2.0_c);
  std::vector<float> data{1, 2, 3, 4};
  require_throws_with([&] { prog.bind_view("x", data.data(), {4}); }, "needs bind()");
  require_throws_with([&] { prog.run(); }, "was not bound");
}

TEST_CASE("cuda: programs queue on the device's one stream and read each other's results without waiting",
          "[cuda]") {
  // Two programs with backend objects of their own, the first writing into a
  // parameter_store's memory and the second reading it: neither run waits for the GPU,
  // so only the shared stream orders them. Two destinations alternate, so the first
  // program's table of addresses changes at every run.
  auto x = input<"x", f32>(shape<256, 256>);
  auto w = input<"w", f32>(shape<256, 256>);
  auto h = input<"h", f32>(shape<256, 256>);
  auto produce = compile<cuda>(tanh(matmul(x, w)));
  auto consume = compile<cuda>(sum<1>(h * 2.0_c));
  auto reference = compile<host>(sum<1>(tanh(matmul(x, w)) * 2.0_c));
  cuda first = produce.backend(), second = consume.backend();  // copies share their state
  REQUIRE(first.stream() == second.stream());
  parameter_store<cuda> store;
  store.add("a", dtype_tag::f32, {256, 256});
  store.add("b", dtype_tag::f32, {256, 256});
  const auto wv = test::random_array<float>({256, 256}, 12);
  produce.bind("w", wv);
  reference.bind("w", wv);
  for (int i = 0; i < 4; ++i) {
    const auto xv = test::random_array<float>({256, 256}, 13 + i);
    float* target = static_cast<float*>(store.at(i % 2 ? "b" : "a").current);
    produce.bind("x", xv);
    produce.write_output_to<0>(target);
    produce.run();
    consume.bind_device("h", target, std::vector<index_t>{256, 256});
    consume.run();
    reference.bind("x", xv);
    reference.run();
    test::require_close(consume.output<0>(), reference.output<0>(), 1e-4, 1e-4);
  }
}
