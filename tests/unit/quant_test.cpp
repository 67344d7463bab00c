// Quantized weights: the block structs, f16/bf16 conversions (exhaustive), dequantization
// against the `gguf` Python package (tests/fixtures/quant_fixtures.json, written by
// make_quant_fixtures.py from SmolLM2's real tensors and synthetic rows), and every
// quantized-matmul kernel (each instruction set this CPU has, each method and tiling)
// against a double-precision reference, with activations that have outlier channels as
// SmolLM2's hidden states do: the accurate methods (int16_dot, float_fma) within 1e-5 of
// sum |x w|, int8_dot within the rounding of its own quantization.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <luminal/core/quant_blocks.hpp>
#include <luminal/exec/quant_matmul.hpp>

#include "fixture_dir.hpp"

using namespace luminal;

namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The value of an f16 pattern by its definition, in double.
double f16_value(std::uint16_t h) {
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(double(mantissa), -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(double(1024 + mantissa), exponent - 25);
}

/// Round to nearest even among candidates lo and lo + 1 (patterns of equal sign, lo nearer
/// zero) by their exact values in double; `value_of` gives a pattern's value.
template <class Value>
std::uint16_t nearest_even(double v, std::uint16_t lo, Value value_of) {
  const double below = std::fabs(v - value_of(lo)), above = std::fabs(value_of(std::uint16_t(lo + 1)) - v);
  if (below < above) return lo;
  if (above < below) return std::uint16_t(lo + 1);
  return (lo & 1) ? std::uint16_t(lo + 1) : lo;
}

/// f32 -> f16 by search over the f16 grid (the reference for f32_to_f16).
std::uint16_t reference_f16(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return std::uint16_t(sign | 0x7e00 | ((bits(f) >> 13) & 0x3ff));
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return std::uint16_t(sign | 0x7c00);
  std::uint16_t lo = 0;  // the largest magnitude pattern <= a
  for (int step = 1 << 14; step; step >>= 1)
    if (lo + step <= 0x7bff && f16_value(std::uint16_t(lo + step)) <= a) lo = std::uint16_t(lo + step);
  if (f16_value(lo) == a || lo == 0x7bff) return std::uint16_t(sign | lo);
  return std::uint16_t(sign | nearest_even(a, lo, f16_value));
}

std::uint16_t reference_bf16(float f) {
  const std::uint32_t u = bits(f);
  if (std::isnan(f)) return std::uint16_t((u >> 16) | 0x40);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000), lo = std::uint16_t((u >> 16) & 0x7fff);
  const double a = std::fabs(double(f));
  auto value = [](std::uint16_t p) { return double(from_bits(std::uint32_t(p) << 16)); };
  if (value(lo) == a) return std::uint16_t(sign | lo);
  if (lo == 0x7f7f) {  // above the largest finite bf16: RNE goes to infinity past the midpoint
    const double mid = value(0x7f7f) + std::ldexp(1.0, 119);  // half the grid step there
    return std::uint16_t(sign | (a >= mid ? 0x7f80 : 0x7f7f));
  }
  return std::uint16_t(sign | nearest_even(a, lo, value));
}

std::vector<unsigned char> from_hex(const std::string& hex) {
  std::vector<unsigned char> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

quant_format format_named(const std::string& name) {
  for (quant_format f : {quant_format::f32, quant_format::f16, quant_format::q4_0, quant_format::q4_1,
                         quant_format::q8_0, quant_format::bf16})
    if (format_info(f).name == name) return f;
  FAIL("unknown format " << name);
  return quant_format::f32;
}

/// N random weight rows of K elements in format f, with scales of a realistic size.
std::vector<unsigned char> random_weights(quant_format f, std::int64_t N, std::int64_t K, std::mt19937& rng) {
  std::vector<unsigned char> w(row_bytes(f, std::size_t(K)) * std::size_t(N));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (auto& b : w) b = static_cast<unsigned char>(rng());
  const std::size_t block_bytes = format_info(f).block_bytes;
  for (std::size_t at = 0; at < w.size(); at += block_bytes) {
    std::uint16_t h;
    switch (f) {
      case quant_format::q4_0: case quant_format::q8_0: case quant_format::q4_1:
        h = f32_to_f16(scale(rng));
        std::memcpy(&w[at], &h, 2);
        if (f == quant_format::q4_1) h = f32_to_f16(-8.0f * scale(rng)), std::memcpy(&w[at + 2], &h, 2);
        break;
      case quant_format::f16: h = f32_to_f16(normal(rng)), std::memcpy(&w[at], &h, 2); break;
      case quant_format::bf16: h = f32_to_bf16(normal(rng)), std::memcpy(&w[at], &h, 2); break;
      case quant_format::f32: { const float v = normal(rng); std::memcpy(&w[at], &v, 4); break; }
    }
  }
  return w;
}

std::vector<quant_kernel> kernels_of_this_cpu() {
  std::vector<quant_kernel> out;
  for (quant_isa isa : {quant_isa::scalar, quant_isa::avx2, quant_isa::avx512}) {
    if (!quant_isa_supported(isa)) continue;
    for (quant_method method : {quant_method::float_fma, quant_method::int8_dot, quant_method::int16_dot})
      for (quant_tiling tiling : {quant_tiling::rows, quant_tiling::panels}) out.push_back({isa, method, tiling});
  }
  return out;
}

std::string describe(quant_format f, quant_kernel k, std::int64_t M) {
  return std::string(format_info(f).name) +
         (k.isa == quant_isa::avx512 ? " avx512" : k.isa == quant_isa::avx2 ? " avx2" : " scalar") +
         (k.method == quant_method::int8_dot ? " int8_dot" : k.method == quant_method::int16_dot ? " int16_dot" : " float_fma") +
         (k.tiling == quant_tiling::panels ? " panels" : " rows") + " M=" + std::to_string(M);
}

/// M rows of K standard normal values, with channels 5 and K - 7 of every row (and channel 40
/// of every third row) 300 times larger: outliers that share blocks with ordinary values.
std::vector<float> activations_with_outliers(std::int64_t M, std::int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(std::size_t(M * K));
  for (auto& v : x) v = normal(rng);
  for (std::int64_t m = 0; m < M; ++m) {
    x[std::size_t(m * K + 5)] *= 300.0f;
    x[std::size_t(m * K + K - 7)] *= 300.0f;
    if (m % 3 == 0 && K > 40) x[std::size_t(m * K + 40)] *= 300.0f;
  }
  return x;
}

}  // namespace

TEST_CASE("quant blocks: sizes and format facts", "[quant]") {
  CHECK(sizeof(block_q4_0) == 18);
  CHECK(sizeof(block_q4_1) == 20);
  CHECK(sizeof(block_q8_0) == 34);
  CHECK(row_bytes(quant_format::q4_1, 576) == 360);
  CHECK(row_bytes(quant_format::q8_0, 576) == 612);
  CHECK(offsetof(block_q4_1, qs) == 4);
  CHECK(offsetof(block_q8_0, qs) == 2);
}

TEST_CASE("quant blocks: f16 <-> f32 over all 65536 patterns", "[quant]") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(std::uint16_t(h));
    const double expected = f16_value(std::uint16_t(h));
    if (std::isnan(expected)) {
      REQUIRE(std::isnan(f));
      REQUIRE(bits(f) == (((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)));  // payload kept
      REQUIRE(f32_to_f16(f) == std::uint16_t(h | 0x200));                                  // quieted
    } else {
      REQUIRE(double(f) == expected);
      REQUIRE(std::signbit(f) == bool(h & 0x8000));
      REQUIRE(f32_to_f16(f) == h);  // exact values round trip
    }
  }
  // Midpoints between neighbours (exact in f32) go to the even one, and a step off goes to
  // the nearer one; then a sweep over f32 patterns against the reference.
  for (std::uint16_t h = 0; h < 0x7bff; ++h) {
    const float mid = float((f16_value(h) + f16_value(std::uint16_t(h + 1))) / 2);
    REQUIRE(f32_to_f16(mid) == ((h & 1) ? h + 1 : h));
    REQUIRE(f32_to_f16(std::nextafter(mid, 0.0f)) == h);
    REQUIRE(f32_to_f16(std::nextafter(mid, INFINITY)) == h + 1);
    REQUIRE(f32_to_f16(-mid) == (0x8000 | ((h & 1) ? h + 1 : h)));
  }
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) REQUIRE(f32_to_f16(from_bits(std::uint32_t(u))) == reference_f16(from_bits(std::uint32_t(u))));
  CHECK(f32_to_f16(65519.996f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);
  CHECK(f32_to_f16(-INFINITY) == 0xfc00);
  CHECK(f32_to_f16(1e-45f) == 0);
  static_assert(f32_to_f16(1.0f) == 0x3c00 && f16_to_f32(0x3c00) == 1.0f, "usable in constant expressions");
}

TEST_CASE("quant blocks: bf16 <-> f32 over all 65536 patterns", "[quant]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(std::uint16_t(b));
    REQUIRE(bits(f) == b << 16);
    REQUIRE(f32_to_bf16(f) == (std::isnan(f) ? std::uint16_t(b | 0x40) : b));
    if (!std::isnan(f) && (b & 0x7fff) < 0x7f7f) {  // the midpoint to the next pattern ties to even
      const float mid = from_bits((b << 16) | 0x8000u);
      REQUIRE(f32_to_bf16(mid) == ((b & 1) ? b + 1 : b));
      REQUIRE(f32_to_bf16(from_bits((b << 16) | 0x7fffu)) == b);
      REQUIRE(f32_to_bf16(from_bits((b << 16) | 0x8001u)) == b + 1);
    }
  }
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) REQUIRE(f32_to_bf16(from_bits(std::uint32_t(u))) == reference_bf16(from_bits(std::uint32_t(u))));
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16
  CHECK(f32_to_bf16(-0.0f) == 0x8000);
}

TEST_CASE("quant blocks: dequantization matches gguf.quants.dequantize bit for bit", "[quant]") {
  std::ifstream in(test::fixture_dir() / "quant_fixtures.json");
  REQUIRE(in);
  const nlohmann::json fixtures = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& t : fixtures.at("tensors")) {
    const quant_format f = format_named(t.at("format").get<std::string>());
    const auto rows = t.at("rows").get<std::size_t>(), cols = t.at("cols").get<std::size_t>();
    const std::vector<unsigned char> data = from_hex(t.at("data_hex").get<std::string>());
    const std::vector<unsigned char> expected = from_hex(t.at("dequantized_hex").get<std::string>());
    INFO(t.at("name").get<std::string>() << " " << format_info(f).name);
    REQUIRE(data.size() == rows * row_bytes(f, cols));
    REQUIRE(expected.size() == rows * cols * 4);
    std::vector<float> values(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) dequantize_row(f, data.data() + r * row_bytes(f, cols), values.data() + r * cols, cols);
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::uint32_t want;
      std::memcpy(&want, expected.data() + 4 * i, 4);
      INFO("element " << i);
      REQUIRE(bits(values[i]) == want);
      REQUIRE(bits(dequantize_element(f, data.data() + (i / cols) * row_bytes(f, cols), i % cols)) == want);
    }
    ++checked;
  }
  CHECK(checked == 7);
}

TEST_CASE("quant blocks: bad lengths and formats are refused", "[quant]") {
  std::vector<unsigned char> blocks(64);
  std::vector<float> out(64);
  CHECK_THROWS_AS(dequantize_row(quant_format::q4_1, blocks.data(), out.data(), 33), quant_error);
  CHECK_THROWS_WITH(dequantize_row(quant_format::q8_0, blocks.data(), out.data(), 40),
                    Catch::Contains("40 elements of Q8_0"));
  CHECK_THROWS_AS(dequantize_row(static_cast<quant_format>(99), blocks.data(), out.data(), 32), quant_error);
  CHECK_NOTHROW(dequantize_row(quant_format::f16, blocks.data(), out.data(), 7));
}

TEST_CASE("quant matmul: every kernel against a double reference", "[quant]") {
  std::mt19937 rng(2024);
  const std::int64_t N = 83;
  for (quant_format f : {quant_format::q4_0, quant_format::q4_1, quant_format::q8_0, quant_format::f16,
                         quant_format::bf16, quant_format::f32}) {
    const std::int64_t K = is_block_format(f) ? 96 : 71;  // the f32 kernels handle any K for plain formats
    const std::vector<unsigned char> w = random_weights(f, N, K, rng);
    std::vector<float> dequantized(std::size_t(N * K));
    for (std::int64_t n = 0; n < N; ++n)
      dequantize_row(f, w.data() + n * row_bytes(f, std::size_t(K)), dequantized.data() + n * K, std::size_t(K));
    for (std::int64_t M : {1, 3, 17, 64}) {
      const std::vector<float> x = activations_with_outliers(M, K, rng);
      // Each integer method's own definition: the scalar preparation of x.
      std::vector<unsigned char> reference_ws[3];
      quant_activations reference[3];
      for (quant_method method : {quant_method::int8_dot, quant_method::int16_dot}) {
        const quant_kernel scalar{quant_isa::scalar, method, quant_tiling::rows};
        auto& ws = reference_ws[int(method)];
        ws.resize(quant_workspace_bytes(f, M, K, scalar));
        prepare_activations(f, x.data(), M, K, K, ws.data(), scalar);
        reference[int(method)] = quant_detail::activations_at(f, M, K, method, ws.data());
      }
      const quant_activations& qa = reference[int(quant_method::int8_dot)];
      for (quant_kernel kernel : kernels_of_this_cpu()) {
        const quant_method method = effective_method(f, kernel.method);
        INFO(describe(f, kernel, M));
        std::vector<unsigned char> ws(quant_workspace_bytes(f, M, K, kernel) + 3);
        void* unaligned = ws.data() + 3;  // the kernels align the workspace themselves
        prepare_activations(f, x.data(), M, K, K, unaligned, kernel, 0, M / 2);  // in two pieces, as threads may
        prepare_activations(f, x.data(), M, K, K, unaligned, kernel, M / 2, M);
        const quant_activations a = quant_detail::activations_at(f, M, K, method, unaligned);
        if (method == quant_method::int8_dot) {  // every ISA quantizes x exactly as the scalar code
          for (std::int64_t m = 0; m < M; ++m) {
            REQUIRE(std::memcmp(a.q + m * a.q_stride, qa.q + m * qa.q_stride, std::size_t(K)) == 0);
            REQUIRE(std::memcmp(&a.d(m * a.blocks), &qa.d(m * qa.blocks), std::size_t(a.blocks) * 8) == 0);
            REQUIRE(std::memcmp(a.c + m * a.blocks, qa.c + m * qa.blocks, std::size_t(a.blocks) * 4) == 0);
          }
        }
        if (method == quant_method::int16_dot) {
          const quant_activations& r = reference[int(quant_method::int16_dot)];
          for (std::int64_t m = 0; m < M; ++m) {
            REQUIRE(std::memcmp(a.q16 + m * a.q_stride, r.q16 + m * r.q_stride, std::size_t(K) * 2) == 0);
            REQUIRE(std::memcmp(a.r16 + m * a.q_stride, r.r16 + m * r.q_stride, std::size_t(K) * 2) == 0);
            REQUIRE(std::memcmp(&a.d(m * a.blocks), &r.d(m * r.blocks), std::size_t(a.blocks) * 8) == 0);
          }
          REQUIRE(std::memcmp(a.wide, r.wide, std::size_t(M * a.blocks)) == 0);
        }
        // Odd ranges, computed in pieces as threads would: [0, 5), [5, 38), [38, 83).
        std::vector<float> y(std::size_t(M * N), NAN);
        for (auto [n0, n1] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 38}, {38, N}})
          quant_matmul_rows(f, w.data(), K, M, unaligned, x.data(), K, y.data(), N, n0, n1, kernel);
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t n = 0; n < N; ++n) {
            double exact = 0, magnitude = 0, int8_exact = 0, quantization_bound = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              const double wk = dequantized[std::size_t(n * K + k)], xk = x[std::size_t(m * K + k)];
              exact += wk * xk;
              magnitude += std::fabs(wk * xk);
              if (method == quant_method::int8_dot) {
                const double dx = qa.d(m * qa.blocks + k / 32);
                int8_exact += wk * dx * qa.q[m * qa.q_stride + k];
                quantization_bound += std::fabs(wk) * dx / 2;  // |x - dx q| <= dx / 2
              }
            }
            const double got = y[std::size_t(m * N + n)];
            INFO("m=" << m << " n=" << n << " got " << got << " exact " << exact);
            if (method == quant_method::int8_dot) {
              REQUIRE(std::fabs(got - int8_exact) <= 1e-5 * (magnitude + quantization_bound) + 1e-30);
              REQUIRE(std::fabs(int8_exact - exact) <= quantization_bound * 1.0001 + 1e-6 * magnitude);
            } else {  // int16_dot and float_fma
              REQUIRE(std::fabs(got - exact) <= 1e-5 * magnitude + 1e-30);
            }
          }
      }
    }
  }
}

TEST_CASE("quant matmul: int16 activations keep 22 bits where a block is wide", "[quant]") {
  std::mt19937 rng(11);
  const std::int64_t M = 4, K = 576;
  const std::vector<float> x = activations_with_outliers(M, K, rng);
  for (quant_isa isa : {quant_isa::scalar, quant_isa::avx2, quant_isa::avx512}) {
    if (!quant_isa_supported(isa)) continue;
    const quant_kernel kernel{isa, quant_method::int16_dot, quant_tiling::rows};
    std::vector<unsigned char> ws(quant_workspace_bytes(quant_format::q4_1, M, K, kernel));
    prepare_activations(quant_format::q4_1, x.data(), M, K, K, ws.data(), kernel);
    const quant_activations a = quant_detail::activations_at(quant_format::q4_1, M, K, kernel.method, ws.data());
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t b = 0; b < a.blocks; ++b) {
        const std::int64_t at = m * a.blocks + b;
        const bool outlier_block = b == 0 || b == (K - 7) / 32 || (m % 3 == 0 && b == 1);
        INFO("row " << m << " block " << b);
        CHECK(bool(a.wide[b * M + m]) == outlier_block);  // normal blocks are never wide here
        double largest = 0, sum = 0, represented = 0;
        for (int j = 0; j < 32; ++j) largest = std::max(largest, std::fabs(double(x[std::size_t(m * K + 32 * b + j)])));
        for (int j = 0; j < 32; ++j) {
          const double v = x[std::size_t(m * K + 32 * b + j)];
          sum += v;
          const std::int64_t at_k = m * a.q_stride + 32 * b + j;
          represented += a.d(at) * (a.q16[at_k] + (a.wide[b * M + m] ? a.r16[at_k] / 128.0 : 0.0));
          const std::int64_t k = m * a.q_stride + 32 * b + j;
          const double q = a.q16[k], r = a.r16[k];
          REQUIRE(std::fabs(q) <= 32767);
          REQUIRE(std::fabs(r) <= 64);
          REQUIRE(std::fabs(v - a.d(at) * q) <= a.d(at) * (0.5 + 1e-3));             // 15 bits
          REQUIRE(std::fabs(v - a.d(at) * (q + r / 128)) <= largest * 0x1p-22 + 1e-30);  // 22 bits
        }
        CHECK(a.d(at) == Approx(largest / 32767).epsilon(1e-6));
        // s sums the block as the kernels see it: d (q + r / 128), r only where wide.
        CHECK(a.s(at) == Approx(represented).epsilon(1e-6));
        CHECK(std::fabs(represented - sum) <= 16 * a.d(at) * 1.001);
      }
  }
}

TEST_CASE("quant matmul: int16 is the default for block formats and beats int8 on outliers", "[quant]") {
  CHECK(choose_quant_kernel(quant_format::q4_1, 1).method == quant_method::int16_dot);
  CHECK(choose_quant_kernel(quant_format::q8_0, 512).method == quant_method::int16_dot);
  CHECK(choose_quant_kernel(quant_format::q8_0, 512).tiling == quant_tiling::panels);
  CHECK(choose_quant_kernel(quant_format::f16, 512).method == quant_method::float_fma);
  std::mt19937 rng(3);
  const std::int64_t N = 64, K = 256, M = 8;
  const std::vector<unsigned char> w = random_weights(quant_format::q4_1, N, K, rng);
  const std::vector<float> x = activations_with_outliers(M, K, rng);
  std::vector<float> W(std::size_t(N * K));
  for (std::int64_t n = 0; n < N; ++n)
    dequantize_row(quant_format::q4_1, w.data() + n * row_bytes(quant_format::q4_1, K), W.data() + n * K, K);
  auto worst_error = [&](quant_method method) {
    std::vector<float> y(std::size_t(M * N));
    quant_matmul(quant_format::q4_1, w.data(), N, K, x.data(), M, y.data(), {best_quant_isa(), method, quant_tiling::panels});
    double worst = 0;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double exact = 0, magnitude = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          exact += double(W[std::size_t(n * K + k)]) * x[std::size_t(m * K + k)];
          magnitude += std::fabs(double(W[std::size_t(n * K + k)]) * x[std::size_t(m * K + k)]);
        }
        worst = std::max(worst, std::fabs(y[std::size_t(m * N + n)] - exact) / magnitude);
      }
    return worst;
  };
  const double int16 = worst_error(quant_method::int16_dot), int8 = worst_error(quant_method::int8_dot);
  CHECK(int16 < 1e-5);
  CHECK(int8 > 100 * int16);  // the outliers' blocks cost int8 its precision
}

TEST_CASE("quant matmul: infinities and NaN in x neither crash nor read out of bounds", "[quant]") {
  std::mt19937 rng(9);
  const std::int64_t N = 40, K = 64, M = 7;
  for (quant_format f : {quant_format::q4_0, quant_format::q4_1, quant_format::q8_0}) {
    const std::vector<unsigned char> w = random_weights(f, N, K, rng);
    std::vector<float> x = activations_with_outliers(M, K, rng);
    x[3] = INFINITY;
    x[K + 9] = -INFINITY;
    x[2 * K + 33] = NAN;
    x[3 * K + 1] = 3e38f;
    x[4 * K + 2] = 1e-42f;  // a subnormal block maximum
    for (std::int64_t k = 0; k < 32; ++k) x[std::size_t(5 * K + k)] = 1e-40f;
    for (quant_kernel kernel : kernels_of_this_cpu()) {
      INFO(describe(f, kernel, M));
      std::vector<float> y(std::size_t(M * N));
      CHECK_NOTHROW(quant_matmul(f, w.data(), N, K, x.data(), M, y.data(), kernel));
      for (std::int64_t n = 0; n < N; ++n) CHECK(std::isfinite(y[std::size_t(6 * N + n)]));  // an untouched row
    }
  }
}

TEST_CASE("quant matmul: the real SmolLM2 rows of the fixture", "[quant]") {
  std::ifstream in(test::fixture_dir() / "quant_fixtures.json");
  REQUIRE(in);
  const nlohmann::json fixtures = nlohmann::json::parse(in);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const auto& t : fixtures.at("tensors")) {
    const quant_format f = format_named(t.at("format").get<std::string>());
    if (!is_block_format(f) || t.at("name").get<std::string>() == "synthetic") continue;
    const auto N = t.at("rows").get<std::int64_t>(), K = t.at("cols").get<std::int64_t>();
    const std::vector<unsigned char> w = from_hex(t.at("data_hex").get<std::string>());
    const std::vector<unsigned char> expected = from_hex(t.at("dequantized_hex").get<std::string>());
    const std::int64_t M = 5;
    std::vector<float> x(std::size_t(M * K)), y(std::size_t(M * N));
    for (auto& v : x) v = normal(rng);
    for (quant_kernel kernel : kernels_of_this_cpu()) {
      INFO(describe(f, kernel, M) << " " << t.at("name").get<std::string>());
      quant_matmul(f, w.data(), N, K, x.data(), M, y.data(), kernel);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          double exact = 0, norm = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            float wk;
            std::memcpy(&wk, expected.data() + 4 * (n * K + k), 4);
            exact += double(wk) * x[std::size_t(m * K + k)];
            norm += std::fabs(double(wk) * x[std::size_t(m * K + k)]);
          }
          const double tolerance = effective_method(f, kernel.method) == quant_method::int8_dot ? 0.02 : 1e-5;  // normal x
          REQUIRE(std::fabs(y[std::size_t(m * N + n)] - exact) <= tolerance * norm);
        }
    }
  }
}

TEST_CASE("quant matmul: bad extents, ranges and buffers are refused", "[quant]") {
  const quant_format f = quant_format::q4_1;
  std::vector<unsigned char> w(row_bytes(f, 64) * 4);
  std::vector<float> x(2 * 64), y(2 * 4);
  const quant_kernel kernel = choose_quant_kernel(f, 2);
  std::vector<unsigned char> ws(quant_workspace_bytes(f, 2, 64, kernel));
  CHECK_THROWS_WITH(quant_workspace_bytes(f, 2, 40, kernel), Catch::Contains("not a whole number"));
  CHECK_THROWS_AS(quant_workspace_bytes(f, -1, 64, kernel), quant_error);
  CHECK_THROWS_AS(quant_workspace_bytes(f, std::int64_t(1) << 40, std::int64_t(1) << 20, kernel), quant_error);
  CHECK_THROWS_AS(prepare_activations(f, x.data(), 2, 64, 32, ws.data(), kernel), quant_error);  // ldx < K
  CHECK_THROWS_AS(prepare_activations(f, x.data(), 2, 64, 64, nullptr, kernel), quant_error);
  CHECK_THROWS_WITH(prepare_activations(f, x.data(), 2, 64, 64, ws.data(), kernel, 1, 3), Catch::Contains("rows [1, 3)"));
  prepare_activations(f, x.data(), 2, 64, 64, ws.data(), kernel);
  CHECK_THROWS_AS(quant_matmul_rows(f, w.data(), 64, 2, ws.data(), x.data(), 64, y.data(), 4, 3, 2, kernel), quant_error);
  CHECK_THROWS_AS(quant_matmul_rows(f, w.data(), 64, 2, ws.data(), x.data(), 64, y.data(), 3, 0, 4, kernel), quant_error);
  CHECK_THROWS_AS(quant_matmul_rows(static_cast<quant_format>(7), w.data(), 64, 2, ws.data(), x.data(), 64, y.data(), 4, 0, 4, kernel), quant_error);
  CHECK_NOTHROW(quant_matmul_rows(f, w.data(), 64, 2, ws.data(), x.data(), 64, y.data(), 4, 0, 4, kernel));
  CHECK(quant_workspace_bytes(quant_format::f16, 3, 7, choose_quant_kernel(quant_format::f16, 3)) == 0);
  if (!quant_isa_supported(quant_isa::avx512))
    CHECK_THROWS_AS(prepare_activations(f, x.data(), 2, 64, 64, ws.data(), {quant_isa::avx512}), quant_error);
}
