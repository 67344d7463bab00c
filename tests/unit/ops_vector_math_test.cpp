// The vectorizable exp2, log2 and erf of float (ops/vector_math.hpp) against libm computed
// in double and rounded once: every 4099th float bit pattern (both signs, subnormals and
// specials included) and a dense sweep of the range softmax and GELU use, within 1 ulp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <luminal/ops/vector_math.hpp>
#include <sstream>
#include <vector>

namespace {

/// Distance in representable floats between a and b (0 for two NaNs or equal values).
std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<std::int64_t>::max();
  if (a == b) return 0;  // also +0 and -0
  auto ordered = [](float x) {
    std::int32_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? std::int64_t(std::numeric_limits<std::int32_t>::min()) - i : std::int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

std::vector<float> sample_floats() {
  std::vector<float> xs;
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099) {
    std::uint32_t b = std::uint32_t(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  for (float x = -160.0f; x <= 160.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1.0f, 0.5f, 2.0f, 127.99f, 128.0f, 129.0f, -126.0f, -149.0f, -149.5f, -150.0f,
                  -151.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    xs.push_back(x);
  return xs;
}

template <class Fast, class Reference>
void check_within_ulps(const char* what, Fast fast, Reference reference, std::int64_t allowed) {
  std::int64_t worst = 0;
  float worst_x = 0;
  std::size_t checked = 0;
  for (float x : sample_floats()) {
    const float expected = float(reference(double(x)));
    const std::int64_t d = ulp_distance(fast(x), expected);
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
    ++checked;
  }
  std::ostringstream where;
  where.precision(9);
  where << what << ": worst " << worst << " ulp at x = " << worst_x << " over " << checked << " values";
  INFO(where.str());
  CHECK(checked > 1000000);
  CHECK(worst <= allowed);
}

}  // namespace

TEST_CASE("vector_math: exp2 of float is within 1 ulp of libm everywhere", "[ops][math]") {
  check_within_ulps("exp2", [](float x) { return luminal::detail::exp2_f32(x); },
                     [](double x) { return std::exp2(x); }, 1);
  CHECK(luminal::detail::exp2_f32(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(luminal::detail::exp2_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(luminal::detail::exp2_f32(std::numeric_limits<float>::quiet_NaN())));
  // Every float where 2^x leaves the subnormals for 0, the lanes exp2 sets to 0 without
  // scaling: within 1 ulp of libm, and 0 exactly where libm gives 0.
  std::int64_t worst = 0;
  for (float x = -153.0f; x < -147.0f; x = std::nextafter(x, 0.0f)) {
    const float expected = float(std::exp2(double(x)));
    worst = std::max(worst, ulp_distance(luminal::detail::exp2_f32(x), expected));
    if (expected == 0.0f && luminal::detail::exp2_f32(x) != 0.0f) worst = std::max<std::int64_t>(worst, 99);
  }
  CHECK(worst <= 1);
  CHECK(luminal::detail::exp2_f32(-1e30f) == 0.0f);
}

TEST_CASE("vector_math: log2 of float is within 1 ulp of libm everywhere", "[ops][math]") {
  check_within_ulps("log2", [](float x) { return luminal::detail::log2_f32(x); },
                     [](double x) { return std::log2(x); }, 1);
  CHECK(luminal::detail::log2_f32(0.0f) == -std::numeric_limits<float>::infinity());
  CHECK(luminal::detail::log2_f32(-0.0f) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(luminal::detail::log2_f32(-1.0f)));
  CHECK(luminal::detail::log2_f32(8.0f) == 3.0f);
}

TEST_CASE("vector_math: erf of float is within 1 ulp of libm everywhere", "[ops][math]") {
  check_within_ulps("erf", [](float x) { return luminal::detail::erf_f32(x); }, [](double x) { return std::erf(x); },
                    1);
  for (float x : {0.0f, 1e-30f, 0.5f, 1.0f, 1.0000001f, 3.9f, 4.0f, 10.0f}) {  // odd, -0 included
    INFO("x = " << x);
    CHECK(std::signbit(luminal::detail::erf_f32(-x)));
    CHECK(luminal::detail::erf_f32(-x) == -luminal::detail::erf_f32(x));
  }
  CHECK(luminal::detail::erf_f32(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(luminal::detail::erf_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(luminal::detail::erf_f32(std::numeric_limits<float>::quiet_NaN())));
}
