// Parameter initializers with torch.nn.init's formulas, reproducible from a seed on every
// platform: std::mt19937_64 (whose output the standard fixes) with our own uniform and
// normal transforms (std's distributions differ between standard libraries).
//
//     namespace init = luminal::nn::init;
//     auto stream = init::stream_seed(42, "fc1.weight");   // one stream per (seed, name)
//     xt::xarray<float> w = init::kaiming_uniform({256, 784}, stream, std::sqrt(5.0));
//     xt::xarray<float> v = init::xavier_normal({10, 256}, stream);
//
// Fans follow torch.nn.init._calculate_fan_in_and_fan_out: for a weight [out, in, k...]
// fan_in = in * prod(k), fan_out = out * prod(k) (a 2-D [out, in] weight: fan_in = in).
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string_view>
#include <vector>
#include <xtensor/xarray.hpp>

namespace luminal::nn::init {

/// Which fan kaiming_* scales by (torch's mode="fan_in" / "fan_out").
enum class fan_mode { fan_in, fan_out };
/// The nonlinearity that follows, for the gain (torch.nn.init.calculate_gain).
enum class nonlinearity { linear, sigmoid, tanh, relu, leaky_relu };

/// The recommended gain: 1 for linear and sigmoid, 5/3 for tanh, sqrt(2) for relu and
/// sqrt(2 / (1 + a^2)) for leaky_relu with negative slope a.
inline double gain(nonlinearity f, double a = 0.0) {
  switch (f) {
    case nonlinearity::tanh: return 5.0 / 3.0;
    case nonlinearity::relu: return std::numbers::sqrt2;
    case nonlinearity::leaky_relu: return std::sqrt(2.0 / (1.0 + a * a));
    default: return 1.0;
  }
}

struct fans {
  double in = 0, out = 0;
};
/// fan_in and fan_out of a weight of rank >= 2 (see the file comment).
inline fans compute_fans(const std::vector<std::size_t>& shape) {
  if (shape.size() < 2)
    throw std::invalid_argument("luminal: fan in and fan out need a weight of rank >= 2, as in torch.nn.init");
  double receptive = 1;
  for (std::size_t k = 2; k < shape.size(); ++k) receptive *= double(shape[k]);
  return {double(shape[1]) * receptive, double(shape[0]) * receptive};
}

/// A 64-bit seed for the stream of one parameter, from the model seed and the parameter's
/// name (FNV-1a, then splitmix64): streams do not depend on the order of initialization.
inline std::uint64_t stream_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : name) { h ^= std::uint64_t(static_cast<unsigned char>(ch)); h *= 0x100000001b3ull; }
  std::uint64_t z = h ^ (seed + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1) from the top 53 bits of one draw.
inline double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

/// Standard normal by Box-Muller (one value per two draws; no cached second value, so a
/// stream's values do not depend on how calls are split).
inline double standard_normal(std::mt19937_64& rng) {
  double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

/// Elements uniform in [lo, hi), from stream `seed`.
template <class T = float>
xt::xarray<T> uniform(const std::vector<std::size_t>& shape, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  for (auto& v : out) v = static_cast<T>(lo + (hi - lo) * uniform01(rng));
  return out;
}

/// Elements normal with the given mean and standard deviation, from stream `seed`.
template <class T = float>
xt::xarray<T> normal(const std::vector<std::size_t>& shape, std::uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  std::mt19937_64 rng(seed);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  for (auto& v : out) v = static_cast<T>(mean + stddev * standard_normal(rng));
  return out;
}

/// Every element `value` (torch.nn.init.constant_, ones_, zeros_).
template <class T = float>
xt::xarray<T> constant(const std::vector<std::size_t>& shape, double value) {
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  out.fill(static_cast<T>(value));
  return out;
}

/// The standard deviation kaiming_* use: gain(f, a) / sqrt(fan).
inline double kaiming_std(const std::vector<std::size_t>& shape, double a, fan_mode mode, nonlinearity f) {
  fans n = compute_fans(shape);
  return gain(f, a) / std::sqrt(mode == fan_mode::fan_in ? n.in : n.out);
}

/// torch.nn.init.kaiming_uniform_: U(-b, b) with b = sqrt(3) gain / sqrt(fan). With
/// a = sqrt(5) (torch's default for Linear and Conv weights), b = 1 / sqrt(fan_in).
template <class T = float>
xt::xarray<T> kaiming_uniform(const std::vector<std::size_t>& shape, std::uint64_t seed, double a = 0.0,
                              fan_mode mode = fan_mode::fan_in, nonlinearity f = nonlinearity::leaky_relu) {
  double bound = std::sqrt(3.0) * kaiming_std(shape, a, mode, f);
  return uniform<T>(shape, seed, -bound, bound);
}

/// torch.nn.init.kaiming_normal_: N(0, gain^2 / fan).
template <class T = float>
xt::xarray<T> kaiming_normal(const std::vector<std::size_t>& shape, std::uint64_t seed, double a = 0.0,
                             fan_mode mode = fan_mode::fan_in, nonlinearity f = nonlinearity::leaky_relu) {
  return normal<T>(shape, seed, 0.0, kaiming_std(shape, a, mode, f));
}

/// torch.nn.init.xavier_uniform_: U(-b, b) with b = gain sqrt(6 / (fan_in + fan_out)).
template <class T = float>
xt::xarray<T> xavier_uniform(const std::vector<std::size_t>& shape, std::uint64_t seed, double gain = 1.0) {
  fans n = compute_fans(shape);
  double bound = gain * std::sqrt(6.0 / (n.in + n.out));
  return uniform<T>(shape, seed, -bound, bound);
}

/// torch.nn.init.xavier_normal_: N(0, gain^2 2 / (fan_in + fan_out)).
template <class T = float>
xt::xarray<T> xavier_normal(const std::vector<std::size_t>& shape, std::uint64_t seed, double gain = 1.0) {
  fans n = compute_fans(shape);
  return normal<T>(shape, seed, 0.0, gain * std::sqrt(2.0 / (n.in + n.out)));
}

}  // namespace luminal::nn::init
