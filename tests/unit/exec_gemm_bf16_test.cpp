// The bf16 GEMM (exec/gemm_bf16.hpp) and the host backend's bf16 GEMMs (host_gemm.hpp)
// against a double-precision reference of the same bf16 inputs (their products are exact in
// double, and so are sums of a few hundred of them, to far below f32's rounding).
//
// Bounds: f32 output, |c - r| <= e = k 2^-23 sum_p |a_ip b_pj| (each of the k additions
// rounds once or, in vdpbf16ps, at most twice per pair, by at most 2^-24 of a partial sum
// bounded by that sum); bf16 output, |c - r| <= 2^-8 (|r| + e) + e (the f32 sum, rounded
// once to 8 significant bits), and c is exactly bf16 of the same call's f32 output. Every
// path runs: the AVX512_BF16 kernel where this CPU has it, the portable loop and the
// widened sgemm fallback, each called directly.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <luminal/backends/host.hpp>
#include <luminal/exec/gemm_bf16.hpp>

using namespace luminal;

namespace {

struct problem {
  bool trans_a, trans_b;
  index_t m, n, k;
  index_t lda, ldb, ldc;
  std::vector<bf16> a, b;
  std::vector<double> exact, magnitude;  // r and sum_p |a_ip b_pj|, m x n

  problem(bool ta, bool tb, index_t m_, index_t n_, index_t k_, std::mt19937& rng, index_t pad = 3)
      : trans_a(ta), trans_b(tb), m(m_), n(n_), k(k_) {
    lda = (ta ? m : k) + pad;
    ldb = (tb ? k : n) + pad + 1;
    ldc = n + pad;
    std::normal_distribution<float> normal;
    a.resize(std::size_t((ta ? k : m) * lda));
    b.resize(std::size_t((tb ? n : k) * ldb));
    for (auto& x : a) x = bf16(normal(rng));
    for (auto& x : b) x = bf16(normal(rng));
    exact.assign(std::size_t(m * n), 0.0);
    magnitude.assign(std::size_t(m * n), 0.0);
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j)
        for (index_t p = 0; p < k; ++p) {
          const double product = double(a_at(i, p)) * double(b_at(p, j));
          exact[std::size_t(i * n + j)] += product;
          magnitude[std::size_t(i * n + j)] += std::fabs(product);
        }
  }
  bf16 a_at(index_t i, index_t p) const { return a[std::size_t(trans_a ? p * lda + i : i * lda + p)]; }
  bf16 b_at(index_t p, index_t j) const { return b[std::size_t(trans_b ? j * ldb + p : p * ldb + j)]; }
  double f32_bound(std::size_t at) const { return double(k) * std::ldexp(magnitude[at], -23) + 1e-30; }
};

/// One GEMM path: C (float or bf16) = op(A) op(B) + beta C.
using f32_path = void (*)(bool, bool, index_t, index_t, index_t, const bf16*, index_t, const bf16*, index_t, float*,
                          index_t, float);
using bf16_path = void (*)(bool, bool, index_t, index_t, index_t, const bf16*, index_t, const bf16*, index_t, bf16*,
                           index_t, float);

/// Runs one path on p with beta 0 (C full of NaN first) and beta 1 (C holding `base`), and
/// checks both outputs, their agreement and that C's padding is untouched.
void check_path(const problem& p, f32_path run_f32, bf16_path run_bf16) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::size_t size = std::size_t(p.m * p.ldc);
  std::vector<float> c32(size, nan);
  std::vector<bf16> c16(size, bf16(nan));
  run_f32(p.trans_a, p.trans_b, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, c32.data(), p.ldc, 0.0f);
  run_bf16(p.trans_a, p.trans_b, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, c16.data(), p.ldc, 0.0f);
  // beta 1 onto base = i - j / 4 (exact in bf16 for these extents)
  std::vector<float> acc32(size, nan);
  std::vector<bf16> acc16(size, bf16(nan));
  auto base = [](index_t i, index_t j) { return float(i % 64) - float(j % 64) / 4; };
  for (index_t i = 0; i < p.m; ++i)
    for (index_t j = 0; j < p.n; ++j) acc32[std::size_t(i * p.ldc + j)] = base(i, j);
  for (index_t i = 0; i < p.m; ++i)
    for (index_t j = 0; j < p.n; ++j) acc16[std::size_t(i * p.ldc + j)] = bf16(base(i, j));
  run_f32(p.trans_a, p.trans_b, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, acc32.data(), p.ldc, 1.0f);
  run_bf16(p.trans_a, p.trans_b, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, acc16.data(), p.ldc, 1.0f);
  int failures = 0;
  for (index_t i = 0; i < p.m && failures < 3; ++i)
    for (index_t j = 0; j < p.ldc && failures < 3; ++j) {
      const std::size_t at = std::size_t(i * p.ldc + j), ref_at = std::size_t(i * p.n + j);
      if (j >= p.n) {  // padding: never written
        if (!std::isnan(c32[at]) || !std::isnan(float(c16[at])) || !std::isnan(acc32[at])) {
          ++failures;
          FAIL_CHECK("wrote C's padding at (" << i << ", " << j << ")");
        }
        continue;
      }
      const double r = p.exact[ref_at], e = p.f32_bound(ref_at), with_base = r + double(base(i, j));
      const double bf16_bound = std::ldexp(std::fabs(r) + e, -8) + e;
      const double base_bound = e + std::ldexp(std::fabs(with_base), -23);
      const bool ok = std::fabs(double(c32[at]) - r) <= e && std::fabs(double(float(c16[at])) - r) <= bf16_bound &&
                      c16[at].bits == bf16(c32[at]).bits && std::fabs(double(acc32[at]) - with_base) <= base_bound &&
                      std::fabs(double(float(acc16[at])) - with_base) <= std::ldexp(std::fabs(with_base) + e, -8) + e;
      if (!ok) {
        ++failures;
        FAIL_CHECK("(m, n, k) = (" << p.m << ", " << p.n << ", " << p.k << ") trans " << p.trans_a << p.trans_b
                                   << " at (" << i << ", " << j << "): exact " << r << ", f32 " << c32[at] << ", bf16 "
                                   << float(c16[at]) << ", f32 bound " << e << "; beta 1: exact " << with_base
                                   << ", f32 " << acc32[at] << ", bf16 " << float(acc16[at]));
      }
    }
  CHECK(failures == 0);
}

void check_all_paths(const problem& p) {
  check_path(p, gemm_bf16<float>, gemm_bf16<bf16>);
  check_path(p, gemm_bf16_portable<float>, gemm_bf16_portable<bf16>);
  check_path(p, detail::host_gemm_bf16_widened<float>, detail::host_gemm_bf16_widened<bf16>);
}

}  // namespace

TEST_CASE("gemm_bf16: every extent and transposition within the f32 sum's bounds", "[exec][gemm][bf16]") {
  INFO("AVX512_BF16 kernel on this CPU: " << gemm_bf16_native());
  std::mt19937 rng(2024);
  const index_t extents[] = {1, 2, 3, 5, 7, 16, 17, 31, 33, 64, 65, 100, 257};
  for (int t = 0; t < 4; ++t)
    for (index_t m : extents)
      for (index_t n : extents)
        for (index_t k : extents) {
          // Every extent meets every other one; the largest products are left to a few.
          if (m * n * k > (1 << 17) && !(m == 257 && n == 65 && (k == 257 || k == 33)) &&
              !(m == 100 && n == 257 && k == 31))
            continue;
          check_all_paths(problem(t & 1, t & 2, m, n, k, rng));
        }
}

TEST_CASE("gemm_bf16: k = 0, leading dimensions far past the row, B packed in several blocks",
          "[exec][gemm][bf16]") {
  std::mt19937 rng(5);
  check_all_paths(problem(false, true, 9, 70, 0, rng));
  check_all_paths(problem(true, false, 13, 67, 41, rng, 97));
  check_all_paths(problem(true, true, 70, 3, 129, rng, 64));
  // k = 4097: packed panels of B (256 KB each) fill the packing budget: n = 100 takes two blocks.
  check_all_paths(problem(false, false, 17, 100, 4097, rng));
  check_all_paths(problem(true, true, 9, 70, 4097, rng));
  // BLAS's conditions on the arguments
  std::vector<bf16> x(64);
  std::vector<float> y(64);
  CHECK_THROWS_WITH(gemm_bf16(false, false, 4, 4, 4, x.data(), 3, x.data(), 4, y.data(), 4),
                    Catch::Contains("lda 3 is shorter than a row of A"));
  CHECK_THROWS_WITH(gemm_bf16_portable(false, true, 4, 4, 4, x.data(), 4, x.data(), 2, y.data(), 4),
                    Catch::Contains("ldb 2"));
  CHECK_THROWS_WITH(gemm_bf16(false, false, 2, -1, 4, x.data(), 4, x.data(), 4, y.data(), 4),
                    Catch::Contains("negative extent"));
}

namespace {

/// `batches` problems of one shape stored back to back (stride 0: one matrix repeated).
struct batched {
  index_t m, n, k, batches, stride_a, stride_b;
  bool trans_a, trans_b;
  std::vector<bf16> a, b;
  batched(bool ta, bool tb, index_t m_, index_t n_, index_t k_, index_t batches_, bool repeat_a, bool repeat_b,
          std::mt19937& rng)
      : m(m_), n(n_), k(k_), batches(batches_), trans_a(ta), trans_b(tb) {
    stride_a = repeat_a ? 0 : m * k;
    stride_b = repeat_b ? 0 : k * n;
    std::normal_distribution<float> normal;
    a.resize(std::size_t(repeat_a ? m * k : m * k * batches));
    b.resize(std::size_t(repeat_b ? k * n : k * n * batches));
    for (auto& x : a) x = bf16(normal(rng));
    for (auto& x : b) x = bf16(normal(rng));
  }
  index_t lda() const { return trans_a ? m : k; }
  index_t ldb() const { return trans_b ? k : n; }
  /// Product `batch`'s (i, j) and sum |terms|, in double.
  std::pair<double, double> exact(index_t batch, index_t i, index_t j) const {
    double sum = 0, magnitude = 0;
    const bf16* ab = a.data() + batch * stride_a;
    const bf16* bb = b.data() + batch * stride_b;
    for (index_t p = 0; p < k; ++p) {
      const double product = double(ab[trans_a ? p * m + i : i * k + p]) * double(bb[trans_b ? j * k + p : p * n + j]);
      sum += product;
      magnitude += std::fabs(product);
    }
    return {sum, magnitude};
  }
};

}  // namespace

TEST_CASE("host backend: bf16 gemm, strided batches and summed batches", "[exec][gemm][bf16][host]") {
  static_assert(host::bf16_gemm);
  host backend;
  std::mt19937 rng(11);
  struct shape {
    bool trans_a, trans_b;
    index_t m, n, k, batches;
    bool repeat_a, repeat_b;
  };
  // Large enough for the pool (2^18 multiply-adds), split by rows and by columns, batches
  // below and above the thread count, odd k, one operand repeated (stride 0).
  const shape shapes[] = {
      {false, true, 200, 70, 33, 1, false, false},  {true, false, 70, 300, 65, 1, false, false},
      {false, false, 96, 130, 17, 5, false, true},  {true, true, 33, 65, 257, 3, true, false},
      {false, true, 7, 5, 3, 2, false, false},      {true, false, 64, 64, 64, 2, false, true},
      {false, true, 300, 40, 31, 9, true, false},
  };
  for (const shape& s : shapes) {
    batched g(s.trans_a, s.trans_b, s.m, s.n, s.k, s.batches, s.repeat_a, s.repeat_b, rng);
    const index_t ldc = s.n + 2;
    std::vector<bf16> c(std::size_t(s.m * ldc * s.batches), bf16(1e30f)), sum(std::size_t(s.m * ldc), bf16(1e30f));
    if (s.batches == 1)
      backend.gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, g.a.data(), g.lda(), g.b.data(), g.ldb(), c.data(), ldc);
    else
      backend.gemm_strided_batched(s.trans_a, s.trans_b, s.m, s.n, s.k, g.a.data(), g.lda(), g.stride_a, g.b.data(),
                                   g.ldb(), g.stride_b, c.data(), ldc, s.m * ldc, s.batches);
    backend.gemm_batch_sum(s.trans_a, s.trans_b, s.m, s.n, s.k, g.a.data(), g.lda(), g.stride_a, g.b.data(), g.ldb(),
                           g.stride_b, sum.data(), ldc, s.batches);
    int failures = 0;
    for (index_t i = 0; i < s.m; ++i)
      for (index_t j = 0; j < s.n; ++j) {
        double total = 0, total_magnitude = 0;
        for (index_t batch = 0; batch < s.batches; ++batch) {
          const auto [r, magnitude] = g.exact(batch, i, j);
          total += r;
          total_magnitude += magnitude;
          const double e = double(s.k) * std::ldexp(magnitude, -23);
          const float got = float(c[std::size_t(batch * s.m * ldc + i * ldc + j)]);
          if (std::fabs(double(got) - r) > std::ldexp(std::fabs(r) + e, -8) + e && failures++ < 3)
            FAIL_CHECK("batch " << batch << " (" << i << ", " << j << "): " << got << " vs " << r);
        }
        const double e = double(s.k * s.batches) * std::ldexp(total_magnitude, -23);
        const float got = float(sum[std::size_t(i * ldc + j)]);
        if (std::fabs(double(got) - total) > std::ldexp(std::fabs(total) + e, -8) + e && failures++ < 3)
          FAIL_CHECK("sum (" << i << ", " << j << "): " << got << " vs " << total);
      }
    INFO("(m, n, k) = (" << s.m << ", " << s.n << ", " << s.k << "), batches " << s.batches);
    CHECK(failures == 0);
  }
}

TEST_CASE("host backend: a bf16 batch sum is rounded once, not per batch", "[exec][gemm][bf16][host]") {
  // Each batch adds k * 0.1 (in bf16: 0.10009765625) to every element: rounded to bf16
  // after each of 100 batches, the sum would drift by far more than bf16's last bit.
  host backend;
  const index_t batches = 100;
  struct extents {
    index_t m, n, k;
  };
  // On the calling thread alone (below 2^18 multiply-adds), and shared out by batches.
  for (const extents& s : {extents{1, 16, 16}, extents{64, 64, 64}}) {
    std::vector<bf16> a(std::size_t(s.m * s.k), bf16(1.0f)), b(std::size_t(s.k * s.n), bf16(0.1f));
    std::vector<bf16> c(std::size_t(s.m * s.n));
    backend.gemm_batch_sum(false, false, s.m, s.n, s.k, a.data(), s.k, 0, b.data(), s.n, 0, c.data(), s.n, batches);
    const double exact = double(batches) * double(s.k) * double(bf16(0.1f));
    for (const bf16& x : c) REQUIRE(std::fabs(double(float(x)) - exact) <= std::ldexp(exact, -8));
  }
}
