// Dynamic loss scaling for f16 mixed precision, as torch.amp.GradScaler does it:
//
//     auto step = compile_train_step(autocast<f16>(loss), adamw{.lr = 1e-3f}, dynamic_loss_scale{});
//     float value = step.run();                 // skipped when a gradient overflowed
//     step.loss_scaling().scale;                // 65536, halved at each overflow
//
// f16's smallest normal is 6e-5: a backward in f16 loses small cotangents to zero. The
// backward therefore starts from S instead of 1 (the reverse pass's seed, a runtime
// scalar), so every cotangent is S times larger, and the update reads each gradient times
// 1/S. When a gradient that the backward computed holds an inf or a NaN, the step is
// skipped: parameters, optimizer state and step count stay as they were, and S is
// multiplied by backoff_factor. After growth_interval steps in a row without one, S is
// multiplied by growth_factor. The scale and the count are saved in checkpoints.
//
// The check is one more output of the gradient program: the sum of every element of every
// gradient it hands to the update, which is finite unless an element is not (or the sum
// itself passes f32's largest, a gradient no step should take either). Gradients
// that the update recomputes from leaves (train_programs.hpp) are maps of inputs, which the
// backward's f16 matmuls cannot overflow, and are not checked.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include <boost/mp11/list.hpp>

#include "../io/safetensors_json.hpp"
#include "../ops/all.hpp"

namespace luminal {

/// GradScaler's settings and defaults; `scale` is the current scale, which the step updates.
struct dynamic_loss_scale {
  double scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  /// Steps since the last overflow, and steps skipped so far.
  std::int64_t good_steps = 0, skipped_steps = 0;

  /// After a step's check: false when the step must be skipped (the scale backs off).
  bool record(bool finite) {
    if (!finite) {
      scale *= backoff_factor;
      good_steps = 0;
      ++skipped_steps;
      return false;
    }
    if (++good_steps == growth_interval) {
      scale *= growth_factor;
      good_steps = 0;
    }
    return true;
  }
};

namespace detail {
inline constexpr const char* loss_scale_metadata = "luminal.loss_scale";
inline constexpr const char* loss_scale_good_steps_metadata = "luminal.loss_scale_good_steps";

/// A training step without loss scaling: the reverse pass starts from 1.
struct no_loss_scaling {
  static constexpr bool dynamic = false;
  static constexpr std::size_t check_outputs = 0;
  template <class Loss>
  using seed = Const<value_t<Loss>, value_t<Loss>(1)>;
  template <class G>
  using unscaled = G;
  template <class Grads>
  using checks = boost::mp11::mp_list<>;
  void record_in(std::map<std::string, std::string, std::less<>>&) const {}
  void restore(const std::map<std::string, std::string, std::less<>>&, const std::string&) {}
};

template <class... G>
constexpr auto finite_check(boost::mp11::mp_list<G...>) {
  if constexpr (sizeof...(G) == 0) return boost::mp11::mp_list<>{};
  else return boost::mp11::mp_list<decltype((sum(G{}) + ...))>{};  // not g * 0: the simplifier folds it
}

/// dynamic_loss_scale's graph: the seed "optim.loss_scale", each gradient the update reads
/// times "optim.inverse_loss_scale", and the check output.
struct scaled_loss : dynamic_loss_scale {
  static constexpr bool dynamic = true;
  static constexpr std::size_t check_outputs = 1;
  template <class Loss>
  using seed = Input<"optim.loss_scale", value_t<Loss>, Shape<>>;
  template <class G>
  using unscaled = decltype(G{} * Input<"optim.inverse_loss_scale", value_t<G>, Shape<>>{});
  template <class Grads>
  using checks = decltype(finite_check(Grads{}));

  void record_in(std::map<std::string, std::string, std::less<>>& metadata) const {
    char text[64];
    const auto written = std::to_chars(text, text + sizeof text, scale);  // the shortest exact spelling
    metadata[loss_scale_metadata] = std::string(text, written.ptr);
    metadata[loss_scale_good_steps_metadata] = std::to_string(good_steps);
  }
  /// The scale and count a checkpoint saved (none: those this step has).
  void restore(const std::map<std::string, std::string, std::less<>>& metadata, const std::string& origin) {
    auto it = metadata.find(loss_scale_metadata);
    if (it == metadata.end()) return;
    char* end = nullptr;
    const double saved = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0' || !std::isfinite(saved) || saved <= 0)
      throw checkpoint_error("luminal: " + origin + " holds the loss scale '" + it->second.substr(0, 40) +
                             "', not a positive finite number");
    scale = saved;
    auto count = metadata.find(loss_scale_good_steps_metadata);
    good_steps = count == metadata.end() ? 0 : std::strtoll(count->second.c_str(), nullptr, 10);
    if (good_steps < 0 || good_steps >= growth_interval) good_steps = 0;
  }
};
}  // namespace detail

}  // namespace luminal
