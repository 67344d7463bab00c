// Learning-rate schedules: the learning rate as a closed-form function of the number of
// optimizer steps taken so far, t, with PyTorch's numbers (torch.optim.lr_scheduler, whose
// scheduler.step() counts t the same way). A compiled training step (train.hpp) or a
// parameter_optimizer sets its optimizer's lr to lr_at(step_count()) before each step, and
// the lr is a runtime scalar of the update, so nothing is recompiled. Because lr_at holds
// no state, a step resumed from a checkpoint at step k continues the curve exactly; the
// checkpoint records the schedule, and resuming under a different one is refused.
//
//     auto step = compile_train_step(loss, adamw{});
//     step.set_schedule(warmup_cosine_lr{.lr = 3e-4, .warmup_steps = 100, .t_max = 9900});
//     for (...) step.run();        // step k uses lr_at(k - 1)
//     step.save("run.safetensors");  // the schedule goes into the metadata
//
// Kinds (each also usable alone: one_cycle_lr{...}.lr_at(t)):
//   constant_lr       torch ConstantLR(factor=1), or no scheduler
//   step_lr           torch StepLR(step_size, gamma)
//   warmup_cosine_lr  torch SequentialLR([LinearLR(start_factor, total_iters=warmup_steps),
//                     CosineAnnealingLR(T_max=t_max, eta_min)], milestones=[warmup_steps])
//   one_cycle_lr      torch OneCycleLR(max_lr, total_steps, pct_start, anneal_strategy="cos",
//                     div_factor, final_div_factor, three_phase=False, cycle_momentum=False):
//                     the learning rate only; momentum (sgd's, adam's beta1) is not cycled.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <variant>

#include "../core/exceptions.hpp"
#include "../io/safetensors_json.hpp"
#include "../io/tensor_store.hpp"

namespace luminal {

namespace detail {
/// The shortest text that reads back as `v` (so equal texts mean equal values).
inline std::string round_trip_text(double v) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, v);
  return error == std::errc{} ? std::string(buffer, end) : std::string("?");
}
inline void require_schedule(bool ok, const std::string& schedule, const std::string& what) {
  if (!ok) throw input_error("luminal: the learning-rate schedule " + schedule + " " + what);
}
inline void require_steps_taken(std::int64_t t, const std::string& schedule) {
  if (t < 0)
    throw input_error("luminal: the learning-rate schedule " + schedule + " was asked for a negative step count (" +
                      std::to_string(t) + ")");
}
}  // namespace detail

/// The same learning rate at every step (torch ConstantLR with factor 1, or no scheduler).
struct constant_lr {
  double lr = 1e-3;

  float lr_at(std::int64_t t) const {
    detail::require_steps_taken(t, describe());
    return float(lr);
  }
  std::string describe() const { return "constant_lr{lr=" + detail::round_trip_text(lr) + "}"; }
  void validate() const { detail::require_schedule(std::isfinite(lr) && lr >= 0, describe(), "needs lr >= 0"); }
  bool operator==(const constant_lr&) const = default;
};

/// lr * gamma^floor(t / step_size), as torch StepLR.
struct step_lr {
  double lr = 1e-3;
  std::int64_t step_size = 1;
  double gamma = 0.1;

  float lr_at(std::int64_t t) const {
    detail::require_steps_taken(t, describe());
    return float(lr * std::pow(gamma, double(t / step_size)));
  }
  std::string describe() const {
    return "step_lr{lr=" + detail::round_trip_text(lr) + ", step_size=" + std::to_string(step_size) +
           ", gamma=" + detail::round_trip_text(gamma) + "}";
  }
  void validate() const {
    detail::require_schedule(std::isfinite(lr) && lr >= 0, describe(), "needs lr >= 0");
    detail::require_schedule(step_size >= 1, describe(), "needs step_size >= 1");
    detail::require_schedule(std::isfinite(gamma), describe(), "needs a finite gamma");
  }
  bool operator==(const step_lr&) const = default;
};

/// A linear warmup from lr * start_factor to lr over warmup_steps steps, then a cosine from
/// lr to eta_min over t_max steps: for t < warmup_steps, lr (start_factor + (1 -
/// start_factor) t / warmup_steps); after, eta_min + (lr - eta_min) (1 + cos(pi (t -
/// warmup_steps) / t_max)) / 2. That is torch's SequentialLR of LinearLR and
/// CosineAnnealingLR (see the file comment), whose recursive numbers it equals to 1e-9
/// relative. Past warmup_steps + t_max the cosine rises again, as torch's does: set t_max
/// to the run's length less the warmup.
struct warmup_cosine_lr {
  double lr = 1e-3;
  std::int64_t warmup_steps = 0;
  double start_factor = 1.0 / 3.0;  // torch LinearLR's default
  std::int64_t t_max = 1;
  double eta_min = 0.0;

  float lr_at(std::int64_t t) const {
    detail::require_steps_taken(t, describe());
    if (t < warmup_steps) return float(lr * (start_factor + (1.0 - start_factor) * double(t) / double(warmup_steps)));
    const double cosine = std::cos(std::numbers::pi * double(t - warmup_steps) / double(t_max));
    return float(eta_min + (lr - eta_min) * (1.0 + cosine) / 2.0);
  }
  std::string describe() const {
    return "warmup_cosine_lr{lr=" + detail::round_trip_text(lr) + ", warmup_steps=" + std::to_string(warmup_steps) +
           ", start_factor=" + detail::round_trip_text(start_factor) + ", t_max=" + std::to_string(t_max) +
           ", eta_min=" + detail::round_trip_text(eta_min) + "}";
  }
  void validate() const {
    detail::require_schedule(std::isfinite(lr) && lr >= 0, describe(), "needs lr >= 0");
    detail::require_schedule(warmup_steps >= 0, describe(), "needs warmup_steps >= 0");
    detail::require_schedule(warmup_steps == 0 || (start_factor > 0 && start_factor <= 1), describe(),
                             "needs 0 < start_factor <= 1 (torch LinearLR's bounds)");
    detail::require_schedule(t_max >= 1, describe(), "needs t_max >= 1");
    detail::require_schedule(std::isfinite(eta_min) && eta_min >= 0, describe(), "needs eta_min >= 0");
  }
  bool operator==(const warmup_cosine_lr&) const = default;
};

/// torch OneCycleLR's learning rate (two phases, cosine annealing): from max_lr /
/// div_factor up to max_lr until step pct_start * total_steps - 1, then down to max_lr /
/// div_factor / final_div_factor at step total_steps - 1. Like torch, it has a rate for at
/// most total_steps steps taken (t <= total_steps) and refuses later ones. Momentum is not
/// cycled (torch's cycle_momentum=False).
struct one_cycle_lr {
  double max_lr = 1e-3;
  std::int64_t total_steps = 1;
  double pct_start = 0.3;
  double div_factor = 25.0;
  double final_div_factor = 1e4;

  float lr_at(std::int64_t t) const {
    detail::require_steps_taken(t, describe());
    if (t > total_steps)
      throw input_error("luminal: the learning-rate schedule " + describe() + " was asked for its rate after " +
                        std::to_string(t) + " steps; it has rates for at most total_steps = " +
                        std::to_string(total_steps) + " steps taken (torch's OneCycleLR refuses to step further)");
    const double initial = max_lr / div_factor, final_lr = initial / final_div_factor;
    const double peak = pct_start * double(total_steps) - 1.0, last = double(total_steps - 1);
    const auto anneal = [](double start, double end, double pct) {
      return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
    };
    const double step = double(t);
    if (step <= peak) return float(anneal(initial, max_lr, step / peak));
    return float(anneal(max_lr, final_lr, (step - peak) / (last - peak)));
  }
  std::string describe() const {
    return "one_cycle_lr{max_lr=" + detail::round_trip_text(max_lr) + ", total_steps=" + std::to_string(total_steps) +
           ", pct_start=" + detail::round_trip_text(pct_start) + ", div_factor=" + detail::round_trip_text(div_factor) +
           ", final_div_factor=" + detail::round_trip_text(final_div_factor) + "}";
  }
  void validate() const {
    detail::require_schedule(std::isfinite(max_lr) && max_lr >= 0, describe(), "needs max_lr >= 0");
    detail::require_schedule(total_steps >= 2, describe(), "needs total_steps >= 2");
    detail::require_schedule(pct_start > 0 && pct_start < 1, describe(), "needs 0 < pct_start < 1");
    const double peak = pct_start * double(total_steps) - 1.0;
    detail::require_schedule(peak != 0.0 && peak != double(total_steps - 1), describe(),
                             "has a phase of no steps (pct_start * total_steps is 1 or total_steps), "
                             "where torch's OneCycleLR divides by zero");
    detail::require_schedule(div_factor > 0 && final_div_factor > 0 && std::isfinite(div_factor) &&
                                 std::isfinite(final_div_factor),
                             describe(), "needs positive div_factor and final_div_factor");
  }
  bool operator==(const one_cycle_lr&) const = default;
};

/// One of the schedules above, checked when made (input_error naming what is wrong).
///     lr_schedule s = step_lr{.lr = 0.1, .step_size = 30, .gamma = 0.1};
///     float lr = s.lr_at(45);   // 0.01
class lr_schedule {
 public:
  using kinds = std::variant<constant_lr, step_lr, warmup_cosine_lr, one_cycle_lr>;

  template <class Kind>
    requires(std::is_same_v<Kind, constant_lr> || std::is_same_v<Kind, step_lr> ||
             std::is_same_v<Kind, warmup_cosine_lr> || std::is_same_v<Kind, one_cycle_lr>)
  lr_schedule(Kind kind) : kind_(std::move(kind)) {  // implicit: set_schedule(step_lr{...})
    std::visit([](const auto& k) { k.validate(); }, kind_);
  }

  /// The learning rate of the step taken after `t` steps (t >= 0).
  float lr_at(std::int64_t t) const {
    return std::visit([t](const auto& k) { return k.lr_at(t); }, kind_);
  }
  /// The kind and every parameter, e.g. "step_lr{lr=0.1, step_size=30, gamma=0.1}";
  /// checkpoints store it, and equal texts mean equal schedules.
  std::string describe() const {
    return std::visit([](const auto& k) { return k.describe(); }, kind_);
  }
  const kinds& kind() const { return kind_; }
  bool operator==(const lr_schedule&) const = default;

 private:
  kinds kind_;
};

namespace detail {
/// Whether optimizer Opt has a learning rate a schedule can set (sgd, adam, adamw).
template <class Opt>
concept has_learning_rate = requires(Opt& o) { o.lr = 1.0f; };

/// The checkpoint metadata entry that records the schedule a step ran under.
inline constexpr const char* schedule_metadata = "luminal.lr_schedule";

/// The schedule's text for checkpoint metadata: describe(), or "none".
inline std::string schedule_text(const std::optional<lr_schedule>& schedule) {
  return schedule ? schedule->describe() : std::string("none");
}

/// Refuses to resume `checkpoint`'s step count under a schedule other than the one it was
/// saved with (its metadata "luminal.lr_schedule"; checkpoints without it, such as
/// PyTorch's, are accepted).
inline void require_same_schedule(const tensor_store& checkpoint, const std::optional<lr_schedule>& schedule,
                                  const std::string& origin) {
  const auto it = checkpoint.metadata.find(schedule_metadata);
  if (it == checkpoint.metadata.end() || it->second == schedule_text(schedule)) return;
  auto name = [](const std::string& text) {
    return text == "none" ? std::string("no learning-rate schedule (the optimizer's own lr)")
                          : "the learning-rate schedule " + text;
  };
  throw checkpoint_error("luminal: " + origin + " was saved with " + name(it->second) +
                         ", but this step has " + name(schedule_text(schedule)) +
                         "; call set_schedule() with the checkpoint's schedule before loading to resume its "
                         "curve, or erase the metadata \"luminal.lr_schedule\" to change schedules on purpose");
}
}  // namespace detail

}  // namespace luminal
