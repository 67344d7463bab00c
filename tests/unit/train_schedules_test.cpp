// Learning-rate schedules (train/schedules.hpp): lr_at(t) against torch.optim.lr_scheduler's
// sequences, which tests/fixtures/make_lr_schedule_fixtures.py wrote to
// tests/fixtures/lr_schedules.json; a compiled training step and a parameter_optimizer
// driven by a schedule (the rate each step used, read back from an SGD update); and
// checkpoints, which resume the curve exactly and refuse another schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <luminal/backends/host.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/train/train.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>
#include <xtensor/xarray.hpp>

#include "fixture_dir.hpp"

using namespace luminal;
using json = nlohmann::json;
using arr = xt::xarray<double>;

namespace {
/// The schedule a fixture case describes, built from its kind and parameters.
lr_schedule schedule_of(const json& c) {
  const json& p = c.at("params");
  const std::string kind = c.at("kind");
  if (kind == "constant") return constant_lr{.lr = p.at("lr")};
  if (kind == "step_decay") return step_lr{.lr = p.at("lr"), .step_size = p.at("step_size"), .gamma = p.at("gamma")};
  if (kind == "warmup_cosine")
    return warmup_cosine_lr{.lr = p.at("lr"), .warmup_steps = p.at("warmup_steps"),
                            .start_factor = p.at("start_factor"), .t_max = p.at("t_max"), .eta_min = p.at("eta_min")};
  if (kind == "one_cycle")
    return one_cycle_lr{.max_lr = p.at("max_lr"), .total_steps = p.at("total_steps"), .pct_start = p.at("pct_start"),
                        .div_factor = p.at("div_factor"), .final_div_factor = p.at("final_div_factor")};
  throw std::runtime_error("unknown schedule kind " + kind);
}

// The smallest model: loss = sum(p * z), whose gradient is z, so SGD without momentum
// moves p by exactly -lr z and each step's rate can be read back from p.
auto p = param<"p", f64>(shape<4>);
auto z = input<"z", f64>(shape<4>);
auto loss = sum(p * z);
const arr zs = {1.0, 2.0, -3.0, 0.5};
const arr p0 = {0.25, -1.0, 0.5, 2.0};

auto make_step(float momentum = 0.0f) {
  auto step = compile_train_step(loss, sgd{.lr = 123.0f, .momentum = momentum});
  tensor_store start;
  start.set("p", p0);
  step.store().assign(start);
  step.bind("z", zs);
  return step;
}

/// The rate an SGD step without momentum used, from p before and after it.
double rate_from(const arr& before, const arr& after) {
  const arr rates = (before - after) / zs;
  for (double r : rates) REQUIRE(std::abs(r - rates(0)) <= 1e-9 * std::abs(rates(0)));
  return rates(0);
}

const warmup_cosine_lr warmup{.lr = 0.1, .warmup_steps = 3, .start_factor = 0.25, .t_max = 10, .eta_min = 1e-3};
}  // namespace

TEST_CASE("lr schedules: lr_at(t) follows torch.optim.lr_scheduler", "[train][schedule][torch]") {
  std::ifstream in(test::fixture_dir() / "lr_schedules.json");
  REQUIRE(in.good());
  const json cases = json::parse(in).at("cases");
  std::set<std::string> names, kinds;
  for (const auto& [name, c] : cases.items()) {
    INFO(name);
    names.insert(name);
    kinds.insert(c.at("kind").get<std::string>());
    const lr_schedule schedule = schedule_of(c);
    const auto& lrs = c.at("lrs");
    REQUIRE(lrs.size() >= 288);
    for (std::size_t t = 0; t < lrs.size(); ++t) {
      const double expected = lrs[t], got = schedule.lr_at(std::int64_t(t));
      INFO("t = " << t << ": torch " << expected << ", luminal " << got);
      REQUIRE(std::abs(got - expected) <= 1e-6 * std::abs(expected));
    }
  }
  REQUIRE(names.size() == 8);
  REQUIRE(kinds == std::set<std::string>{"constant", "step_decay", "warmup_cosine", "one_cycle"});
}

TEST_CASE("lr schedules: bad parameters and steps past the schedule are refused", "[train][schedule]") {
  REQUIRE_THROWS_WITH(lr_schedule(step_lr{.lr = 0.1, .step_size = 0}), Catch::Contains("needs step_size >= 1"));
  REQUIRE_THROWS_WITH(lr_schedule(warmup_cosine_lr{.lr = 0.1, .warmup_steps = 5, .start_factor = 0.0, .t_max = 10}),
                      Catch::Contains("0 < start_factor <= 1"));
  REQUIRE_THROWS_WITH(lr_schedule(one_cycle_lr{.max_lr = 0.1, .total_steps = 10, .pct_start = 0.1}),
                      Catch::Contains("a phase of no steps"));
  const lr_schedule cycle = one_cycle_lr{.max_lr = 0.1, .total_steps = 10};
  REQUIRE(cycle.describe() ==
          "one_cycle_lr{max_lr=0.1, total_steps=10, pct_start=0.3, div_factor=25, final_div_factor=10000}");
  REQUIRE_NOTHROW(cycle.lr_at(10));  // torch allows total_steps calls of scheduler.step()
  REQUIRE_THROWS_WITH(cycle.lr_at(11), Catch::Contains("after 11 steps") && Catch::Contains("total_steps = 10"));
  REQUIRE_THROWS_AS(cycle.lr_at(-1), input_error);
  REQUIRE(lr_schedule(step_lr{.lr = 0.1, .step_size = 30}).lr_at(45) == float(0.1 * 0.1));
}

TEST_CASE("lr schedules: a compiled training step runs each step at the schedule's rate", "[train][schedule]") {
  auto step = make_step();
  step.set_schedule(warmup);
  for (std::int64_t t = 0; t < 15; ++t) {
    const arr before = step.store().get<double>("p");
    step.run();
    INFO("step " << t + 1);
    REQUIRE(step.optimizer().lr == warmup.lr_at(t));
    const double used = rate_from(before, step.store().get<double>("p"));
    REQUIRE(std::abs(used - double(warmup.lr_at(t))) <= 1e-9 * double(warmup.lr_at(t)));
  }
  // Without a schedule the optimizer's own lr applies again.
  step.set_schedule(std::nullopt);
  step.optimizer().lr = 0.5f;
  arr before = step.store().get<double>("p");
  step.run();
  REQUIRE(std::abs(rate_from(before, step.store().get<double>("p")) - 0.5) <= 1e-9);
  // A one-cycle schedule has no rate past its total steps: the step refuses and changes nothing.
  step.set_schedule(one_cycle_lr{.max_lr = 0.1, .total_steps = 10});
  before = step.store().get<double>("p");
  REQUIRE_THROWS_WITH(step.run(), Catch::Contains("total_steps = 10"));
  REQUIRE(step.step_count() == 16);
  REQUIRE(bool(step.store().get<double>("p") == before));
}

TEST_CASE("lr schedules: a checkpoint resumes the curve exactly and refuses another schedule",
          "[train][schedule][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("luminal_schedules_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "resume.safetensors").string();
  const lr_schedule schedule = warmup;
  std::vector<float> straight_lrs, resumed_lrs;
  arr straight_p;
  {
    auto step = make_step(0.9f);  // momentum: the resumed step must continue its buffer too
    step.set_schedule(schedule);
    for (int t = 0; t < 12; ++t) {
      step.run();
      straight_lrs.push_back(step.optimizer().lr);
      if (t == 5) step.save(path);
    }
    straight_p = step.store().get<double>("p");
  }
  {
    auto step = make_step(0.9f);
    step.set_schedule(schedule);
    step.load(path);
    REQUIRE(step.step_count() == 6);
    for (int t = 6; t < 12; ++t) {
      step.run();
      resumed_lrs.push_back(step.optimizer().lr);
    }
    REQUIRE(bool(step.store().get<double>("p") == straight_p));
  }
  REQUIRE(resumed_lrs == std::vector<float>(straight_lrs.begin() + 6, straight_lrs.end()));

  const tensor_store saved = load_safetensors(path);
  REQUIRE(saved.metadata.at("luminal.lr_schedule") == schedule.describe());

  SECTION("another schedule, or none, is refused naming both, and changes nothing") {
    const lr_schedule other = step_lr{.lr = 0.1, .step_size = 4, .gamma = 0.5};
    auto step = make_step(0.9f);
    step.set_schedule(other);
    REQUIRE_THROWS_WITH(step.load(path), Catch::Contains("saved with the learning-rate schedule " + schedule.describe()) &&
                                             Catch::Contains("this step has the learning-rate schedule " + other.describe()));
    REQUIRE(step.step_count() == 0);
    REQUIRE(bool(step.store().get<double>("p") == p0));
    step.set_schedule(std::nullopt);
    REQUIRE_THROWS_WITH(step.load_state(saved), Catch::Contains("this step has no learning-rate schedule"));
    // Without the schedule entry (PyTorch's checkpoints, or a deliberate change) it loads.
    tensor_store unrecorded = saved;
    unrecorded.metadata.erase("luminal.lr_schedule");
    step.set_schedule(other);
    step.load_state(unrecorded);
    REQUIRE(step.step_count() == 6);
  }
  SECTION("parameters alone restart the step count, under any schedule") {
    tensor_store params_only;
    params_only.insert("p", saved.at("p"));
    params_only.metadata = saved.metadata;
    auto step = make_step();
    step.set_schedule(constant_lr{.lr = 0.01});
    step.load_state(params_only);
    REQUIRE(step.step_count() == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("lr schedules: parameter_optimizer follows its schedule and checkpoints it", "[train][schedule][tape]") {
  const lr_schedule schedule = step_lr{.lr = 0.2, .step_size = 2, .gamma = 0.5};
  auto run_steps = [&](parameter_optimizer<sgd, f64>& opt, tensor_store& params, int from, int to) {
    for (int t = from; t < to; ++t) {
      tensor_store gradients;
      gradients.set("p", zs);
      const arr before = params.get<double>("p");
      opt.step(params, gradients);
      INFO("step " << t + 1);
      REQUIRE(opt.options().lr == schedule.lr_at(t));
      REQUIRE(std::abs(rate_from(before, params.get<double>("p")) - double(schedule.lr_at(t))) <= 1e-9);
    }
  };
  parameter_optimizer<sgd, f64> opt({.lr = 123.0f});
  opt.set_schedule(schedule);
  tensor_store params;
  params.set("p", p0);
  run_steps(opt, params, 0, 3);
  const tensor_store checkpoint = opt.checkpoint(params);
  REQUIRE(checkpoint.metadata.at("luminal.lr_schedule") == schedule.describe());

  parameter_optimizer<sgd, f64> resumed({.lr = 123.0f});
  resumed.set_schedule(schedule);
  resumed.load_state(checkpoint);
  REQUIRE(resumed.step_count() == 3);
  tensor_store resumed_params = params;
  run_steps(opt, params, 3, 6);
  run_steps(resumed, resumed_params, 3, 6);
  REQUIRE(bool(resumed_params.get<double>("p") == params.get<double>("p")));

  parameter_optimizer<sgd, f64> mismatched;
  mismatched.set_schedule(constant_lr{.lr = 0.2});
  REQUIRE_THROWS_WITH(mismatched.load_state(checkpoint),
                      Catch::Contains(schedule.describe()) && Catch::Contains("constant_lr{lr=0.2}"));
  REQUIRE(mismatched.step_count() == 0);
}
