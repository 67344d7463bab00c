// The ops that read weights in their storage format (ops/quantized.hpp), attention over a
// key/value cache (ops/cached_attention.hpp) and RoPE (ops/rope.hpp), on every backend:
// the host backend's own kernels and the generic bodies (Kokkos), against plain loops.
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test_support.hpp"

using namespace luminal;

namespace {

constexpr Dim Rows{"Rows"}, In{"In"}, Out{"Out"};

/// `rows` rows of `k` elements in `format` with random contents: scales of a realistic
/// size, every nibble and byte value. Every bit pattern is a valid block.
std::vector<unsigned char> random_weights(quant_format format, std::int64_t rows, std::int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> bytes(std::size_t(rows) * row_bytes(format, std::size_t(k)));
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  const quant_format_info info = format_info(format);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f), offset(-0.1f, 0.0f);
  auto put_f16 = [](unsigned char* at, float v) {
    const std::uint16_t h = f32_to_f16(v);
    at[0] = static_cast<unsigned char>(h & 0xff);
    at[1] = static_cast<unsigned char>(h >> 8);
  };
  for (std::size_t b = 0; b < bytes.size() / info.block_bytes; ++b) {
    unsigned char* block = bytes.data() + b * info.block_bytes;
    if (format == quant_format::q4_0 || format == quant_format::q8_0) put_f16(block, scale(rng));
    else if (format == quant_format::q4_1) put_f16(block, scale(rng)), put_f16(block + 2, offset(rng));
    else if (format == quant_format::f16) put_f16(block, scale(rng) * 10 - 0.1f);
    else if (format == quant_format::bf16) {
      const std::uint16_t h = f32_to_bf16(scale(rng) * 10 - 0.1f);
      block[0] = static_cast<unsigned char>(h & 0xff), block[1] = static_cast<unsigned char>(h >> 8);
    } else {
      const float v = scale(rng) * 10 - 0.1f;
      std::memcpy(block, &v, 4);
    }
  }
  return bytes;
}

xt::xarray<float> dequantized(quant_format format, const std::vector<unsigned char>& bytes, std::int64_t rows,
                              std::int64_t k) {
  xt::xarray<float> w = xt::xarray<float>::from_shape({std::size_t(rows), std::size_t(k)});
  for (std::int64_t r = 0; r < rows; ++r)
    dequantize_row(format, bytes.data() + std::size_t(r) * row_bytes(format, std::size_t(k)), w.data() + r * k,
                   std::size_t(k));
  return w;
}

constexpr std::array<quant_format, 6> every_format{quant_format::q4_0, quant_format::q4_1, quant_format::q8_0,
                                                   quant_format::f16,  quant_format::bf16, quant_format::f32};

}  // namespace

TEMPLATE_LIST_TEST_CASE("linear with a quantized weight is x @ w^T of the dequantized weight, every format",
                        "[ops][quantized]", test_backends) {
  using B = TestType;
  auto x = input<"x", f32>(shape<Rows, In>);
  auto w = quantized_weight<"w">(shape<Out, In>);
  auto program = compile<B>(linear(x, w));
  for (quant_format format : every_format) {
    for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{1, 96, 64}, {3, 40, 128}, {17, 64, 96}, {64, 33, 256}}) {
      CAPTURE(format_info(format).name, m, n, k);
      const auto bytes = random_weights(format, n, k, unsigned(m * 31 + n));
      const xt::xarray<float> weights = dequantized(format, bytes, n, k);
      const xt::xarray<float> xs = test::random_array<float>({std::size_t(m), std::size_t(k)}, unsigned(k));
      program.bind("x", xs);
      program.bind_quantized("w", format, bytes.data(), {n, k});
      program.run();
      const xt::xarray<float> y = program.output();
      // The host multiplies block formats by 8-bit activations, as ggml does: each product
      // is then within the activation's rounding, 1/254 of its block's largest value.
      const bool integer = format == quant_format::q4_0 || format == quant_format::q4_1 || format == quant_format::q8_0;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double exact = 0, bound = 0;
          for (std::int64_t c = 0; c < k; ++c) {
            exact += double(xs(i, c)) * weights(j, c);
            bound += std::abs(double(weights(j, c)));
          }
          const double tolerance = integer && std::is_same_v<B, host> ? bound / 254.0 + 1e-5 : 1e-5 + 1e-5 * bound;
          if (std::abs(y(i, j) - exact) > tolerance) FAIL("y(" << i << ", " << j << ") = " << y(i, j) << ", exact " << exact);
        }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("gather from a quantized table dequantizes the rows, and refuses ids outside it",
                        "[ops][quantized]", test_backends) {
  using B = TestType;
  auto table = quantized_weight<"table">(shape<Rows, In>);
  auto program = compile<B>(gather(table, input<"ids", i32>(shape<Out>)));
  for (quant_format format : every_format) {
    CAPTURE(format_info(format).name);
    const auto bytes = random_weights(format, 10, 64, 7);
    const xt::xarray<float> rows = dequantized(format, bytes, 10, 64);
    const xt::xarray<std::int32_t> ids{9, 0, 3, 3};
    program.bind("ids", ids);
    program.bind_quantized("table", format, bytes.data(), {10, 64});
    program.run();
    const xt::xarray<float> out = program.output();
    for (std::size_t i = 0; i < ids.size(); ++i)
      for (std::size_t c = 0; c < 64; ++c) REQUIRE(out(i, c) == rows(std::size_t(ids(i)), c));
    program.bind("ids", xt::xarray<std::int32_t>{2, 10});
    REQUIRE_THROWS_AS(program.run(), run_error);
  }
}

TEST_CASE("quantized weights are bound by format and checked", "[ops][quantized]") {
  auto program = compile(linear(input<"x", f32>(shape<Rows, In>), quantized_weight<"w">(shape<Out, In>)));
  std::vector<unsigned char> bytes(row_bytes(quant_format::q4_1, 64) * 3);
  REQUIRE_THROWS_WITH(program.bind_quantized("w", quant_format::q4_1, bytes.data(), {3, 48}),
                      Catch::Contains("48 elements") && Catch::Contains("Q4_1 blocks of 32"));
  REQUIRE_THROWS_WITH(program.bind_quantized("w", quant_format(7), bytes.data(), {3, 64}),
                      Catch::Contains("unknown format"));
  REQUIRE_THROWS_WITH(program.bind_quantized("x", quant_format::q4_1, bytes.data(), {3, 64}),
                      Catch::Contains("'x' holds f32"));
  const std::vector<float> floats(3 * 64);
  REQUIRE_THROWS_WITH(program.bind("w", floats.data(), {3, 64}), Catch::Contains("holds quantized"));
}

namespace {
constexpr Dim S{"S"}, P{"P"}, H{"H"}, KV{"KV"}, D{"D"};

/// softmax(q k / sqrt(d)) v over past keys and new keys up to the query's own position.
xt::xarray<float> reference_attention(const xt::xarray<float>& q, const xt::xarray<float>& kp, const xt::xarray<float>& vp,
                                      const xt::xarray<float>& kn, const xt::xarray<float>& vn) {
  const std::size_t s = q.shape()[0], h = q.shape()[1], d = q.shape()[2], p = kp.shape()[0], kv = kp.shape()[1];
  xt::xarray<float> y = xt::xarray<float>::from_shape({s, h, d});
  for (std::size_t i = 0; i < s; ++i)
    for (std::size_t head = 0; head < h; ++head) {
      const std::size_t g = head / (h / kv);
      std::vector<double> scores;
      double top = -INFINITY;
      for (std::size_t j = 0; j < p + i + 1; ++j) {
        double dot = 0;
        for (std::size_t c = 0; c < d; ++c) dot += double(q(i, head, c)) * (j < p ? kp(j, g, c) : kn(j - p, g, c));
        scores.push_back(dot / std::sqrt(double(d)));
        top = std::max(top, scores.back());
      }
      double total = 0;
      for (double& v : scores) total += (v = std::exp(v - top));
      for (std::size_t c = 0; c < d; ++c) {
        double acc = 0;
        for (std::size_t j = 0; j < scores.size(); ++j) acc += scores[j] * (j < p ? vp(j, g, c) : vn(j - p, g, c));
        y(i, head, c) = float(acc / total);
      }
    }
  return y;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("cached_attention is causal attention over the cache and the new keys, grouped heads",
                        "[ops][attention]", test_backends) {
  using B = TestType;
  auto q = input<"q", f32>(shape<S, H, D>);
  auto kp = input<"kp", f32>(shape<P, KV, D>);
  auto vp = input<"vp", f32>(shape<P, KV, D>);
  auto kn = input<"kn", f32>(shape<S, KV, D>);
  auto vn = input<"vn", f32>(shape<S, KV, D>);
  auto program = compile<B>(cached_attention(q, kp, vp, kn, vn));
  // decode (S = 1) with and without a past, prefill longer than one block, no grouping.
  for (auto [s, p, h, kv, d] : std::vector<std::array<std::size_t, 5>>{
           {1, 0, 9, 3, 64}, {1, 17, 9, 3, 64}, {5, 3, 4, 2, 8}, {70, 0, 9, 3, 16}, {23, 40, 6, 6, 16}}) {
    CAPTURE(s, p, h, kv, d);
    const unsigned seed = unsigned(s * 7 + p);
    const auto xq = test::random_array<float>({s, h, d}, seed), xkp = test::random_array<float>({p, kv, d}, seed + 1),
               xvp = test::random_array<float>({p, kv, d}, seed + 2), xkn = test::random_array<float>({s, kv, d}, seed + 3),
               xvn = test::random_array<float>({s, kv, d}, seed + 4);
    program.bind("q", xq), program.bind("kp", xkp), program.bind("vp", xvp), program.bind("kn", xkn),
        program.bind("vn", xvn);
    program.run();
    test::require_close(program.output(), reference_attention(xq, xkp, xvp, xkn, xvn), 1e-5, 1e-6);
  }
  // Query heads that do not share the key/value heads evenly.
  program.bind("q", test::random_array<float>({1, 5, 8}, 1));
  program.bind("kp", test::random_array<float>({0, 2, 8}, 2)), program.bind("vp", test::random_array<float>({0, 2, 8}, 3));
  program.bind("kn", test::random_array<float>({1, 2, 8}, 4)), program.bind("vn", test::random_array<float>({1, 2, 8}, 5));
  REQUIRE_THROWS_WITH(program.run(), Catch::Contains("5 query heads cannot share 2"));
}

TEMPLATE_LIST_TEST_CASE("rope rotates interleaved pairs or halves by position times frequency",
                        "[ops][rope]", test_backends) {
  using B = TestType;
  constexpr Dim Half{"Half"};
  auto x = input<"x", f32>(shape<S, H, 2 * Half>);
  auto angles = rope_angles(input<"positions", f32>(shape<S>), input<"inv_freq", f32>(shape<Half>));
  auto interleaved = compile<B>(rope<rope_pairs::interleaved>(x, cos(angles), sin(angles)));
  auto halves = compile<B>(rope<rope_pairs::halves>(x, cos(angles), sin(angles)));
  const std::size_t s = 5, h = 3, half = 4;
  const auto xs = test::random_array<float>({s, h, 2 * half}, 9);
  const xt::xarray<float> positions{7, 8, 9, 10, 11}, frequencies{1.0f, 0.1f, 0.01f, 0.001f};
  auto run = [&](auto& program) {
    program.bind("x", xs), program.bind("positions", positions), program.bind("inv_freq", frequencies);
    program.run();
    return xt::xarray<float>(program.output());
  };
  const xt::xarray<float> yi = run(interleaved), yh = run(halves);
  for (std::size_t i = 0; i < s; ++i)
    for (std::size_t head = 0; head < h; ++head)
      for (std::size_t pair = 0; pair < half; ++pair) {
        const float t = positions(i) * frequencies(pair);
        const float c = std::cos(t), sn = std::sin(t);
        const std::array<std::array<std::size_t, 2>, 2> at{{{2 * pair, 2 * pair + 1}, {pair, pair + half}}};
        for (int style = 0; style < 2; ++style) {
          const auto& y = style == 0 ? yi : yh;
          const float a = xs(i, head, at[style][0]), b = xs(i, head, at[style][1]);
          REQUIRE(y(i, head, at[style][0]) == Approx(a * c - b * sn).margin(1e-5));
          REQUIRE(y(i, head, at[style][1]) == Approx(b * c + a * sn).margin(1e-5));
        }
      }
}

TEMPLATE_LIST_TEST_CASE("rope's gradient is the inverse rotation, in both pairings", "[ops][rope][grad]", test_backends) {
  // RoPE rotates each pair by an angle: the gradient of <rope(x), w> with respect to x is
  // w rotated back, which is rope of w with the sines negated.
  using B = TestType;
  constexpr Dim Half{"Half"};
  auto x = param<"x", f32>(shape<S, H, 2 * Half>);
  auto w = input<"w", f32>(shape<S, H, 2 * Half>);
  auto c = input<"cos", f32>(shape<S, Half>);
  auto sn = input<"sin", f32>(shape<S, Half>);
  auto gi = grad(sum(rope<rope_pairs::interleaved>(x, c, sn) * w), x);
  auto gh = grad(sum(rope<rope_pairs::halves>(x, c, sn) * w), x);
  auto program = compile<B>(gi, gh, rope<rope_pairs::interleaved>(w, c, -sn), rope<rope_pairs::halves>(w, c, -sn));
  const std::size_t s = 3, h = 2, half = 4;
  const auto angles = test::random_array<float>({s, half}, 21);
  // The gradient of a linear map does not read x: the program has no input x.
  REQUIRE_FALSE(program.reads_input("x"));
  program.bind("w", test::random_array<float>({s, h, 2 * half}, 23));
  program.bind("cos", xt::xarray<float>(xt::cos(angles)));
  program.bind("sin", xt::xarray<float>(xt::sin(angles)));
  program.run();
  test::require_close(program.template output<0>(), program.template output<2>(), 1e-6, 1e-6);
  test::require_close(program.template output<1>(), program.template output<3>(), 1e-6, 1e-6);
}

TEST_CASE("a symbol that only a product holds is solved from the bound extent", "[ops][symbolic]") {
  constexpr Dim Heads{"Heads"}, HeadDim{"HeadDim"};
  auto w = input<"w", f32>(shape<Heads * HeadDim, In>);
  auto per_head = input<"per_head", f32>(shape<HeadDim>);
  auto program = compile(reshape(w, shape<Heads, HeadDim, In>) * reshape(per_head, shape<1, HeadDim, 1>));
  program.bind("w", test::random_array<float>({12, 2}, 1));
  program.bind("per_head", test::random_array<float>({4}, 2));
  program.run();
  REQUIRE(program.output().shape() == std::vector<std::size_t>{3, 4, 2});
  program.bind("w", test::random_array<float>({10, 2}, 1));
  REQUIRE_THROWS_WITH(program.run(), Catch::Contains("no whole value of Heads"));
}
