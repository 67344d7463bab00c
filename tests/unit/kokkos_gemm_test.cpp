// The Kokkos backend's GEMMs (backends/luminal/backends/kokkos.hpp) on the host Kokkos
// space: the vendor path (the host backend's BLAS) and the tiled kernel that spaces
// without a vendor GEMM run (HIP, SYCL), forced here with kokkos_gemm_kernel::tiled. Both
// against the host backend's BLAS, over transposed operands, padded leading dimensions,
// edges that are not whole tiles, strided batches and summed batches; then a training step
// whose GEMMs all run tiled against the same step on the host backend.
#ifdef LUMINAL_TEST_KOKKOS
#include <luminal/backends/kokkos.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {

using tiled_kokkos = kokkos<Kokkos::DefaultHostExecutionSpace, kokkos_gemm_kernel::tiled>;
using vendor_kokkos = kokkos<Kokkos::DefaultHostExecutionSpace>;
static_assert(vendor_kokkos::blas_gemm && !tiled_kokkos::blas_gemm);

/// One GEMM problem: extents, transposes, the padding of each leading dimension beyond
/// its row, and batches at fixed strides (a stride of 0 for A repeats one matrix).
struct gemm_case {
  index_t m, n, k;
  bool trans_a, trans_b;
  index_t pad_a = 0, pad_b = 0, pad_c = 0;
  index_t batches = 1;
  bool repeat_a = false;
};

template <class T>
struct gemm_operands {
  index_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  std::vector<T> a, b;
  explicit gemm_operands(const gemm_case& g) {
    lda = (g.trans_a ? g.m : g.k) + g.pad_a;
    ldb = (g.trans_b ? g.k : g.n) + g.pad_b;
    ldc = g.n + g.pad_c;
    stride_a = g.repeat_a ? 0 : (g.trans_a ? g.k : g.m) * lda;
    stride_b = (g.trans_b ? g.n : g.k) * ldb;
    stride_c = g.m * ldc;
    std::mt19937 rng(unsigned(g.m * 31 + g.n * 7 + g.k));
    std::uniform_real_distribution<double> dist(-1, 1);
    a.resize(std::size_t(std::max<index_t>(stride_a, (g.trans_a ? g.k : g.m) * lda) * g.batches));
    b.resize(std::size_t(stride_b * g.batches));
    for (auto& v : a) v = T(dist(rng));
    for (auto& v : b) v = T(dist(rng));
  }
};

/// C from `backend` through gemm (one batch), gemm_strided_batched or gemm_batch_sum.
/// Host-space memory: the backend reads the vectors in place. C starts as NaN, so an
/// element the GEMM fails to write shows.
template <class T, class Backend>
std::vector<T> run_gemm(Backend& backend, const gemm_case& g, const gemm_operands<T>& op, bool summed) {
  std::vector<T> c(std::size_t(op.stride_c * (summed ? 1 : g.batches)), std::numeric_limits<T>::quiet_NaN());
  if (summed)
    backend.gemm_batch_sum(g.trans_a, g.trans_b, g.m, g.n, g.k, op.a.data(), op.lda, op.stride_a, op.b.data(), op.ldb,
                           op.stride_b, c.data(), op.ldc, g.batches);
  else if (g.batches == 1)
    backend.gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, op.a.data(), op.lda, op.b.data(), op.ldb, c.data(), op.ldc);
  else
    backend.gemm_strided_batched(g.trans_a, g.trans_b, g.m, g.n, g.k, op.a.data(), op.lda, op.stride_a, op.b.data(),
                                 op.ldb, op.stride_b, c.data(), op.ldc, op.stride_c, g.batches);
  return c;
}

/// Compares the written elements of C (the padding of ldc is never written).
template <class T>
void require_same_c(const std::vector<T>& actual, const std::vector<T>& expected, const gemm_case& g, index_t ldc,
                    index_t matrices, double tolerance) {
  for (index_t batch = 0; batch < matrices; ++batch)
    for (index_t i = 0; i < g.m; ++i)
      for (index_t j = 0; j < g.n; ++j) {
        const std::size_t at = std::size_t(batch * g.m * ldc + i * ldc + j);
        INFO("batch " << batch << ", C(" << i << ", " << j << ")");
        REQUIRE(std::isfinite(double(actual[at])));
        REQUIRE(std::abs(double(actual[at]) - double(expected[at])) <=
                tolerance * (1 + std::abs(double(expected[at]))));
      }
}

const std::vector<gemm_case> cases = {
    {1, 1, 1, false, false},
    {37, 45, 29, false, false},                 // no extent a whole tile, k not a whole step
    {37, 45, 29, true, false, 3, 0, 5},         // A transposed, lda and ldc padded
    {37, 45, 29, false, true, 0, 2, 1},         // B transposed
    {70, 33, 50, true, true, 1, 4, 2},          // both transposed, more than two tiles of rows
    {64, 96, 32, false, false},                 // whole tiles
    {5, 70, 3, false, true, 0, 0, 0, 3},        // three batches
    {19, 8, 40, true, false, 2, 1, 3, 4, true}, // four batches of one repeated A
};

template <class T, class Backend>
void check_against_blas(double tolerance) {
  host blas;
  Backend backend;
  for (const gemm_case& g : cases) {
    INFO("m " << g.m << " n " << g.n << " k " << g.k << " trans_a " << g.trans_a << " trans_b " << g.trans_b
              << " batches " << g.batches);
    gemm_operands<T> op(g);
    require_same_c(run_gemm(backend, g, op, false), run_gemm(blas, g, op, false), g, op.ldc, g.batches, tolerance);
    require_same_c(run_gemm(backend, g, op, true), run_gemm(blas, g, op, true), g, op.ldc, 1, tolerance);
  }
}

}  // namespace

TEST_CASE("kokkos GEMMs on a host space: the tiled kernel and the BLAS path match the host backend's BLAS",
          "[kokkos][gemm]") {
  SECTION("tiled, f32") { check_against_blas<float, tiled_kokkos>(1e-5); }
  SECTION("tiled, f64") { check_against_blas<double, tiled_kokkos>(1e-13); }
  SECTION("BLAS, f32") { check_against_blas<float, vendor_kokkos>(1e-5); }
  SECTION("BLAS, f64") { check_against_blas<double, vendor_kokkos>(1e-13); }
}

namespace {
/// The host space's threads as host_gemm.hpp sees them, claiming four: the work is split
/// into parts and batches as for OpenMP with four threads, and run through Kokkos
/// (serially on Serial).
struct four_kokkos_threads : detail::kokkos_host_threads<Kokkos::DefaultHostExecutionSpace> {
  unsigned size() const { return 4; }
};
}  // namespace

TEST_CASE("kokkos host space: BLAS work shared out over the space's threads matches one call",
          "[kokkos][gemm]") {
  four_kokkos_threads threads{{Kokkos::DefaultHostExecutionSpace()}};
  host blas;
  // Above host_gemm_serial_below: split into blocks of rows or columns, or by batches, or
  // summed in partial matrices per thread.
  const std::vector<gemm_case> split_cases = {{70, 90, 60, false, true, 1, 2, 3},
                                              {90, 70, 60, true, false},
                                              {40, 50, 60, false, false, 0, 0, 0, 2},
                                              {40, 50, 60, true, true, 1, 1, 1, 6}};
  for (const gemm_case& g : split_cases) {
    INFO("m " << g.m << " n " << g.n << " batches " << g.batches);
    gemm_operands<double> op(g);
    detail::host_gemm_batch<double> call{g.trans_a, g.trans_b, g.m, g.n, g.k, op.a.data(), op.lda, op.stride_a,
                                         op.b.data(), op.ldb, op.stride_b, nullptr, op.ldc, op.stride_c};
    std::vector<double> c(std::size_t(op.stride_c * g.batches), std::numeric_limits<double>::quiet_NaN());
    call.c = c.data();
    detail::host_gemm(call, g.batches, threads);
    require_same_c(c, run_gemm(blas, g, op, false), g, op.ldc, g.batches, 1e-13);
    std::fill(c.begin(), c.end(), std::numeric_limits<double>::quiet_NaN());
    detail::host_gemm_batch_sum(call, g.batches, threads);
    require_same_c(c, run_gemm(blas, g, op, true), g, op.ldc, 1, 1e-13);
  }
}

namespace {
constexpr Dim Batch{"Batch"};
/// A convolution (per-image GEMMs, the weight's gradient summed over images) and a linear
/// layer (both operands transposed in the backward).
struct small_cnn {
  nn::Conv2d<"conv", 2, 5, 3, 1, 1> conv;
  nn::Linear<"fc", 5 * 6 * 6, 7> fc;
  auto loss() const {
    auto x = input<"x", f32>(shape<Batch, 2, 6, 6>);
    auto logits = fc(reshape(relu(conv(x)), shape<Batch, 5 * 6 * 6>));
    return nn::cross_entropy(logits, input<"labels", i32>(shape<Batch>));
  }
};

template <class B>
std::vector<float> train_losses(const small_cnn& model) {
  auto step = compile_train_step<B>(model.loss(), sgd{.lr = 0.1f});
  tensor_store initial;
  model.conv.initialize(initial, 3);
  model.fc.initialize(initial, 3);
  step.store().assign(initial);
  step.bind("x", test::random_array<f32>({9, 2, 6, 6}, 11));
  xt::xarray<std::int32_t> labels = xt::zeros<std::int32_t>({9});
  for (std::size_t i = 0; i < labels.size(); ++i) labels(i) = std::int32_t(i % 7);
  step.bind("labels", labels);
  std::vector<float> losses;
  for (int k = 0; k < 4; ++k) losses.push_back(step.run());
  return losses;
}
}  // namespace

TEST_CASE("kokkos training step with every GEMM tiled matches the host backend", "[kokkos][gemm][train]") {
  small_cnn model;
  std::vector<float> host_losses = train_losses<host>(model), tiled_losses = train_losses<tiled_kokkos>(model);
  REQUIRE(host_losses.size() == tiled_losses.size());
  CHECK(host_losses.back() < host_losses.front());
  for (std::size_t k = 0; k < host_losses.size(); ++k) CHECK(tiled_losses[k] == Approx(host_losses[k]).epsilon(1e-5));
}
#endif  // LUMINAL_TEST_KOKKOS
