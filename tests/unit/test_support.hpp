// Shared helpers for the unit tests: the backends every test runs on, seeded random
// arrays, and a closeness check that reports the first element that differs.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <random>
#include <sstream>
#include <tuple>
#include <xtensor/xarray.hpp>
#include <xtensor/xio.hpp>

#if defined(LUMINAL_TEST_CUDA)
// luminal_cuda_tests (tests/cuda/): the same test sources, compiled by nvcc, on the GPU only.
#include <luminal/backends/cuda.hpp>
using test_backends = std::tuple<luminal::cuda>;
#elif defined(LUMINAL_TEST_KOKKOS_DEVICE)
// luminal_kokkos_tests (tests/kokkos/): the same sources, compiled through a CUDA Kokkos'
// nvcc_wrapper, on Kokkos' default execution space (the GPU) only.
#include <luminal/backends/kokkos.hpp>
using test_backends = std::tuple<luminal::kokkos<Kokkos::DefaultExecutionSpace>>;
#elif defined(LUMINAL_TEST_KOKKOS)
// A host-only Kokkos (Debian's is Serial; an HPC site's may be OpenMP).
#include <luminal/backends/kokkos.hpp>
using test_backends = std::tuple<luminal::host, luminal::kokkos<Kokkos::DefaultHostExecutionSpace>>;
#else
using test_backends = std::tuple<luminal::host>;
#endif

#if defined(__CUDACC__)
// nvcc misspells a non-dependent decltype of a luminal type (its leaf names and extents)
// in the host code it generates, so compile-time checks are left to luminal_tests, which
// compiles the same sources with the host compiler. They record nothing here.
#undef STATIC_REQUIRE
#define STATIC_REQUIRE(...) static_cast<void>(0)
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

/// The tolerances of results of element type T: f32 within 1e-5 relative, f64 within 1e-12.
template <class T>
inline constexpr double rtol_of = std::is_same_v<T, luminal::f32> ? 1e-5 : 1e-12;
template <class T>
inline constexpr double atol_of = std::is_same_v<T, luminal::f32> ? 1e-6 : 1e-12;

/// require_close at the tolerances of element type T.
template <class T, class A, class E>
void check_close(const A& actual, const E& expected) {
  require_close(actual, expected, rtol_of<T>, atol_of<T>);
}

/// require_close with no tolerance: results that must be exact (max, integers, views).
template <class A, class E>
void check_exact(const A& actual, const E& expected) {
  require_close(actual, expected, 0, 0);
}

/// xs with the extents in `shape` (same elements, row-major).
inline xt::xarray<double> reshaped(xt::xarray<double> xs, std::vector<std::size_t> shape) {
  xs.reshape(shape);
  return xs;
}

/// Uniform integers in [lo, hi], reproducible from the seed.
template <class T>
xt::xarray<T> random_ints(std::vector<std::size_t> shape, unsigned seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  for (auto& v : out) v = static_cast<T>(dist(rng));
  return out;
}

/// f(double(a_i)) for every element, in double precision: the reference side of a test.
template <class A, class F>
xt::xarray<double> apply(const A& a, F f) {
  xt::xarray<double> out = xt::xarray<double>::from_shape(std::vector<std::size_t>(a.shape().begin(), a.shape().end()));
  auto o = out.begin();
  for (auto i = a.begin(); i != a.end(); ++i, ++o) *o = f(double(*i));
  return out;
}

/// f(double(a_i), double(b_i)) for two arrays of the same shape, in double precision.
template <class A, class B, class F>
xt::xarray<double> apply(const A& a, const B& b, F f) {
  REQUIRE(std::vector<std::size_t>(a.shape().begin(), a.shape().end()) ==
          std::vector<std::size_t>(b.shape().begin(), b.shape().end()));
  xt::xarray<double> out = xt::xarray<double>::from_shape(std::vector<std::size_t>(a.shape().begin(), a.shape().end()));
  auto o = out.begin();
  auto j = b.begin();
  for (auto i = a.begin(); i != a.end(); ++i, ++j, ++o) *o = f(double(*i), double(*j));
  return out;
}

/// The elements of a as doubles.
template <class A>
xt::xarray<double> to_double(const A& a) {
  return apply(a, [](double v) { return v; });
}

/// Requires f() to throw a std::exception whose message contains `fragment`.
template <class F>
void require_throws_with(F&& f, const std::string& fragment) {
  try {
    f();
  } catch (const std::exception& e) {
    INFO("message: " << e.what());
    REQUIRE(std::string(e.what()).find(fragment) != std::string::npos);
    return;
  }
  FAIL("no exception; expected one containing: " + fragment);
}

}  // namespace test

// ---- gradient checking ----------------------------------------------------------------
namespace test {

/// Output 0 of `prog` (after run()) as a double; it must hold one element (a scalar loss).
template <class Prog>
double scalar_output(const Prog& prog) {
  auto out = prog.template output<0>();
  REQUIRE(out.size() == 1);
  return double(*out.begin());
}

/// Central finite differences of output 0 of `prog` (a scalar loss) with respect to the
/// input `name`, whose bound value is `value`: each element is moved by +h and -h (in T),
/// the program is run at both points, and the difference is divided by the step actually
/// taken. Every other input must already be bound. `value` is bound again at the end.
template <class Prog, class T>
xt::xarray<double> numeric_gradient(Prog& prog, std::string_view name, const xt::xarray<T>& value, double h = 1e-6) {
  xt::xarray<double> out = xt::xarray<double>::from_shape(std::vector<std::size_t>(value.shape().begin(), value.shape().end()));
  xt::xarray<T> probe = value;
  for (std::size_t i = 0; i < probe.size(); ++i) {
    const T saved = probe.data()[i];
    const T up = static_cast<T>(saved + h), down = static_cast<T>(saved - h);
    probe.data()[i] = up;
    prog.bind(name, probe);
    prog.run();
    const double loss_up = scalar_output(prog);
    probe.data()[i] = down;
    prog.bind(name, probe);
    prog.run();
    const double loss_down = scalar_output(prog);
    probe.data()[i] = saved;
    out.data()[i] = (loss_up - loss_down) / (double(up) - double(down));
  }
  prog.bind(name, value);
  prog.run();
  return out;
}

/// Requires equal shapes and max|analytic - numeric| / max(1e-8, max|numeric|) < tol,
/// reporting the worst element otherwise.
template <class A, class N>
void require_gradient_close(const A& analytic, const N& numeric, double tol = 1e-6, std::string_view what = "") {
  INFO("gradient of " << what);
  REQUIRE(std::vector<std::size_t>(analytic.shape().begin(), analytic.shape().end()) ==
          std::vector<std::size_t>(numeric.shape().begin(), numeric.shape().end()));
  double worst = 0, scale = 0, worst_a = 0, worst_n = 0;
  std::size_t worst_at = 0;
  auto a = analytic.begin();
  auto n = numeric.begin();
  for (std::size_t i = 0; n != numeric.end(); ++a, ++n, ++i) {
    const double diff = std::abs(double(*a) - double(*n));
    if (!(diff <= worst)) { worst = diff; worst_at = i; worst_a = double(*a); worst_n = double(*n); }  // NaN too
    scale = std::max(scale, std::abs(double(*n)));
  }
  const double error = worst / std::max(1e-8, scale);
  if (!(error < tol)) {
    std::ostringstream msg;
    msg << "relative error " << error << " (tolerance " << tol << "); worst at element " << worst_at
        << ": analytic " << worst_a << ", numeric " << worst_n
        << "\nanalytic:\n" << analytic << "\nnumeric:\n" << numeric;
    FAIL(msg.str());
  }
  SUCCEED();
}


/// Everything a gradient check binds, by name; `h` is the finite-difference step.
///     feeds().add("x", xv).add("ids", iv).step(1e-6)
struct feeds {
  std::vector<std::pair<std::string, xt::xarray<luminal::f64>>> doubles;
  std::vector<std::pair<std::string, xt::xarray<luminal::f32>>> floats;
  std::vector<std::pair<std::string, xt::xarray<luminal::i32>>> ints;
  double h = 1e-6;

  feeds& add(std::string name, xt::xarray<luminal::f64> v) { doubles.emplace_back(std::move(name), std::move(v)); return *this; }
  feeds& add(std::string name, xt::xarray<luminal::f32> v) { floats.emplace_back(std::move(name), std::move(v)); return *this; }
  feeds& add(std::string name, xt::xarray<luminal::i32> v) { ints.emplace_back(std::move(name), std::move(v)); return *this; }
  feeds& step(double step) { h = step; return *this; }

  template <class T>
  const auto& list() const {
    if constexpr (std::is_same_v<T, luminal::f64>) return doubles;
    else if constexpr (std::is_same_v<T, luminal::f32>) return floats;
    else return ints;
  }
  template <class T>
  const xt::xarray<T>& value(std::string_view name) const {
    for (const auto& [n, v] : list<T>())
      if (n == name) return v;
    FAIL("no value given for input '" << name << "'");
    return list<T>().front().second;
  }
  template <class Prog>
  void bind(Prog& prog) const {
    for (const auto& [n, v] : doubles) prog.bind(n, v);
    for (const auto& [n, v] : floats) prog.bind(n, v);
    for (const auto& [n, v] : ints) prog.bind(n, v);
  }
};

/// Compiles `loss` and grad(loss, wrt...) on backend B, runs it with `in`, and requires
/// every analytic gradient to match central finite differences of the loss (relative
/// error max|analytic - numeric| / max(1e-8, max|numeric|) below 1e-6). Every leaf in
/// wrt must be given a value in `in`.
template <class B, luminal::expression Loss, luminal::expression... W>
void check_gradients(Loss loss, const feeds& in, W... wrt) {
  auto as_tuple = []<class G>(G g) {
    if constexpr (requires { std::tuple_size<G>::value; }) return g;
    else return std::tuple<G>{g};
  };
  auto prog = std::apply([&](auto... g) { return luminal::compile<B>(loss, g...); },
                         as_tuple(luminal::grad(loss, wrt...)));
  in.bind(prog);
  prog.run();
  REQUIRE(std::isfinite(scalar_output(prog)));
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto one = [&]<std::size_t K, class Leaf>(std::integral_constant<std::size_t, K>, Leaf) {
      using T = luminal::value_t<Leaf>;
      std::string name(Leaf::name.view());
      xt::xarray<T> analytic = prog.template output<K + 1>();  // read before the probes rerun it
      require_gradient_close(analytic, numeric_gradient(prog, name, in.value<T>(name), in.h), 1e-6, name);
    };
    (one(std::integral_constant<std::size_t, I>{}, wrt), ...);
  }(std::index_sequence_for<W...>{});
}

/// Uniform doubles in [lo, hi).
inline xt::xarray<double> uniform(std::vector<std::size_t> shape, unsigned seed, double lo = -1.0, double hi = 1.0) {
  return random_array<double>(std::move(shape), seed, lo, hi);
}
/// Magnitudes uniform in [lo, hi) with random signs: inputs away from a kink at 0.
inline xt::xarray<double> signed_away(std::vector<std::size_t> shape, unsigned seed, double lo = 0.05, double hi = 1.0) {
  xt::xarray<double> out = uniform(shape, seed, lo, hi);
  xt::xarray<double> sign = uniform(shape, seed + 1000);
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] *= sign.data()[i] < 0 ? -1 : 1;
  return out;
}
/// Distinct values at least 0.05 apart in random order: max reductions without ties.
inline xt::xarray<double> distinct_values(std::vector<std::size_t> shape, unsigned seed) {
  xt::xarray<double> out = xt::xarray<double>::from_shape(shape);
  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  xt::xarray<double> jitter = uniform(shape, seed + 1, 0.0, 0.05);
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = -1.0 + 0.1 * double(order[i]) + jitter.data()[i];
  return out;
}
/// x + d with |d| in [0.05, 0.5): a second operand that never ties with x.
inline xt::xarray<double> apart_from(const xt::xarray<double>& x, unsigned seed) {
  return x + signed_away(std::vector<std::size_t>(x.shape().begin(), x.shape().end()), seed, 0.05, 0.5);
}

}  // namespace test
