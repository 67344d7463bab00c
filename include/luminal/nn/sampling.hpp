// Choosing the next token from logits, as llama.cpp and transformers' generate() do:
// greedy at temperature 0, else top-k, then the softmax at the temperature, then top-p
// (nucleus), then a draw. The draws come from a seeded generator of luminal's own (not
// <random>'s distributions, which differ between standard libraries): the same seed gives
// the same text on every platform.
//
//     nn::sampler pick({.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .seed = 42});
//     std::int32_t next = pick(logits);      // logits [vocab] of the last position
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace luminal::nn {

/// How sampler picks a token. temperature 0 is greedy (the largest logit, the lowest id on
/// ties); top_k 0 keeps every token; top_p 1 keeps the whole distribution.
struct sampling_options {
  float temperature = 0.8f;
  std::int32_t top_k = 40;
  float top_p = 0.95f;
  std::uint64_t seed = 0;
};

/// Picks tokens from logits; see the top of this file.
class sampler {
 public:
  /// Throws std::invalid_argument naming a temperature below 0 or not finite, a negative
  /// top_k, or a top_p outside (0, 1].
  explicit sampler(sampling_options options) : options_(options), state_(options.seed) {
    if (!std::isfinite(options.temperature) || options.temperature < 0)
      throw std::invalid_argument("luminal: sampling temperature must be finite and at least 0, not " +
                                  std::to_string(options.temperature));
    if (options.top_k < 0) throw std::invalid_argument("luminal: top_k must be at least 0 (0 keeps every token)");
    if (!(options.top_p > 0 && options.top_p <= 1))
      throw std::invalid_argument("luminal: top_p must be in (0, 1], not " + std::to_string(options.top_p));
  }

  const sampling_options& options() const { return options_; }

  /// The next token for these logits. Throws std::invalid_argument for empty logits or a
  /// NaN among them.
  std::int32_t operator()(std::span<const float> logits) {
    if (logits.empty()) throw std::invalid_argument("luminal: sampler: no logits");
    for (float l : logits)
      if (std::isnan(l)) throw std::invalid_argument("luminal: sampler: the logits hold NaN");
    if (options_.temperature == 0) return greedy(logits);
    // Candidates: the top_k largest logits, largest first (ties: lower id first).
    candidates_.resize(logits.size());
    std::iota(candidates_.begin(), candidates_.end(), 0);
    auto larger = [&](std::int32_t a, std::int32_t b) {
      return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
    };
    std::size_t keep = options_.top_k == 0 ? logits.size() : std::min<std::size_t>(std::size_t(options_.top_k), logits.size());
    std::partial_sort(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(keep), candidates_.end(), larger);
    candidates_.resize(keep);
    // Softmax at the temperature, in double.
    probabilities_.resize(keep);
    const double top = logits[std::size_t(candidates_[0])];
    double total = 0;
    for (std::size_t i = 0; i < keep; ++i) {
      probabilities_[i] = std::exp((double(logits[std::size_t(candidates_[i])]) - top) / options_.temperature);
      total += probabilities_[i];
    }
    // Top-p: the fewest candidates whose probability reaches top_p.
    double cumulative = 0;
    std::size_t nucleus = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += probabilities_[i] / total;
      if (cumulative >= options_.top_p) {
        nucleus = i + 1;
        break;
      }
    }
    double mass = 0;
    for (std::size_t i = 0; i < nucleus; ++i) mass += probabilities_[i];
    double u = uniform() * mass;
    for (std::size_t i = 0; i < nucleus; ++i) {
      u -= probabilities_[i];
      if (u < 0) return candidates_[i];
    }
    return candidates_[nucleus - 1];
  }

  /// The largest logit's id (the lowest on ties).
  static std::int32_t greedy(std::span<const float> logits) {
    return std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }

 private:
  /// A uniform double in [0, 1) from splitmix64.
  double uniform() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) * 0x1.0p-53;
  }

  sampling_options options_;
  std::uint64_t state_;
  std::vector<std::int32_t> candidates_;
  std::vector<double> probabilities_;
};

}  // namespace luminal::nn
