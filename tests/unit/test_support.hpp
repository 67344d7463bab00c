// Shared helpers for the unit tests: the backends every test runs on, seeded random
// arrays, and a closeness check that reports the first element that differs.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <luminal/luminal.hpp>
#include <random>
#include <sstream>
#include <tuple>
#include <xtensor/xarray.hpp>
#include <xtensor/xio.hpp>

#ifdef LUMINAL_TEST_KOKKOS
#include <luminal/backends/kokkos.hpp>
using test_backends = std::tuple<luminal::host, luminal::kokkos<Kokkos::Serial>>;
#else
using test_backends = std::tuple<luminal::host>;
#endif

namespace test {

/// Uniform values in [lo, hi), reproducible from the seed.
template <class T>
xt::xarray<T> random_array(std::vector<std::size_t> shape, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  for (auto& v : out) v = static_cast<T>(dist(rng));
  return out;
}

/// Requires equal shapes and |actual - expected| <= atol + rtol |expected| everywhere
/// (NaN matches NaN, infinities must match exactly).
template <class A, class E>
void require_close(const A& actual, const E& expected, double rtol = 1e-5, double atol = 1e-6) {
  REQUIRE(std::vector<std::size_t>(actual.shape().begin(), actual.shape().end()) ==
          std::vector<std::size_t>(expected.shape().begin(), expected.shape().end()));
  auto a = actual.begin();
  auto e = expected.begin();
  for (std::size_t i = 0; a != actual.end(); ++a, ++e, ++i) {
    double av = double(*a), ev = double(*e);
    bool ok = (std::isnan(av) && std::isnan(ev)) || av == ev || std::abs(av - ev) <= atol + rtol * std::abs(ev);
    if (!ok) {
      std::ostringstream msg;
      msg << "element " << i << ": got " << av << ", expected " << ev;
      FAIL(msg.str());
    }
  }
  SUCCEED();
}

}  // namespace test
