// The gradient of a simulation: a 1-D heat equation with a learned source term, run for a
// number of time steps chosen at run time, differentiated through every step with a tape.
//
//     u[t+1] = u[t] + dt (alpha laplacian(u[t]) + source),   u = 0 at both ends
//     loss   = mean((u[N] - observed)^2)
//
// "observed" comes from a hidden source; gradient descent on the source, with gradients
// through all N steps, recovers it. One step is a block compiled once; N calls of it are
// recorded per evaluation, so N may change from run to run (or step to step) without
// recompiling. Before training the program checks the tape's gradient against central
// finite differences.
//
//     heat_source --steps 200 --iterations 300
#include <cmath>
#include <cstdio>
#include <iostream>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/tape/tape.hpp>
#include <string>

#include "example_options.hpp"

using namespace luminal;

namespace {
constexpr std::int64_t points = 64;
constexpr double dt = 0.2, alpha = 1.0;  // dt alpha / dx^2 <= 1/2 (dx = 1): stable

// One explicit Euler step; the boundary values are held at zero by the padding.
auto heat_step() {
  auto u = input<"u", f64>(shape<points>);
  auto source = param<"source", f64>(shape<points>);
  auto padded = pad<0, 1, 1>(u);
  auto laplacian = slice<0, 0, points>(padded) + slice<0, 2, points + 2>(padded) - u * c<2.0>;
  return compile_block<"">(u + c<dt> * (c<alpha> * laplacian + source), u);
}

auto misfit() {
  auto u = input<"u", f64>(shape<points>);
  auto observed = input<"observed", f64>(shape<points>);
  return compile_block<"">(mean(square(u - observed)), u);
}

xt::xarray<double> bump(double center, double width, double height) {
  xt::xarray<double> s = xt::zeros<double>({std::size_t(points)});
  for (std::int64_t i = 0; i < points; ++i) s(i) = height * std::exp(-std::pow((double(i) - center) / width, 2));
  return s;
}

// The tape holds every step's values for the backward: about 1.5 kB per step here, so
// --steps is bounded to keep a run's memory bounded (100000 steps: some 150 MB).
constexpr int max_steps = 100000;
constexpr int max_iterations = 1000000;

const char* const usage_text =
    "usage: heat_source [--steps N] [--iterations K]\n"
    "  --steps       time steps of the simulation, 1 to 100000 (run time; default 200)\n"
    "  --iterations  gradient-descent iterations on the source, 1 to 1000000 (default 300)\n"
    "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread).\n";
}  // namespace

int main(int argc, char** argv) try {
  int steps = 200, iterations = 300;
  examples::command_line args("heat_source", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("--help") || args.is("-h")) args.help();
    else if (args.is("--steps")) steps = args.integer(1, max_steps);
    else if (args.is("--iterations")) iterations = args.integer(1, max_iterations);
    else args.unknown();
  }
  examples::check_environment("heat_source");
  auto step = heat_step();
  auto loss_of = misfit();

  // Forward N steps from u = 0 and the misfit; with gradients if asked.
  const xt::xarray<double> hidden = bump(20, 4, 0.05) + bump(44, 6, 0.03);
  auto simulate = [&](const tensor_store& params, const xt::xarray<double>& observed, tensor_store* gradients) {
    tape<> t(params);
    auto u = t.constant(xt::xarray<double>(xt::zeros<double>({std::size_t(points)})));
    for (int n = 0; n < steps; ++n) u = t.call(*step, "", {{"u", u}});
    auto loss = t.call(*loss_of, "", {{"u", u}, {"observed", t.constant(observed)}});
    if (gradients) {
      t.backward(loss);
      *gradients = t.gradients();
    }
    return std::pair{t.item<double>(loss), t.value<double>(u)};
  };
  tensor_store truth;
  truth.set("source", hidden);
  const xt::xarray<double> observed = simulate(truth, xt::zeros<double>({std::size_t(points)}), nullptr).second;

  tensor_store params;
  params.set("source", xt::xarray<double>(xt::zeros<double>({std::size_t(points)})));
  // The tape's gradient against central differences at a few points.
  tensor_store grads;
  simulate(params, observed, &grads);
  const xt::xarray<double> dsource = grads.get<double>("source");
  double worst = 0;
  for (std::size_t i : {5u, 20u, 33u, 44u, 60u}) {
    const double h = 1e-4;
    tensor_store plus = params, minus = params;
    reinterpret_cast<double*>(plus.at("source").data.data())[i] += h;
    reinterpret_cast<double*>(minus.at("source").data.data())[i] -= h;
    const double fd = (simulate(plus, observed, nullptr).first - simulate(minus, observed, nullptr).first) / (2 * h);
    worst = std::max(worst, std::abs(fd - dsource(i)) / std::max(std::abs(fd), 1e-12));
  }
  std::printf("heat_source: %d time steps of %lld points; gradient vs finite differences: max relative error %.2e\n",
              steps, (long long)points, worst);
  if (!(worst < 1e-5)) {
    std::cerr << "heat_source: the tape's gradient disagrees with finite differences\n";
    return 1;
  }

  // Recover the source. The misfit is quadratic in the source; Adam copes with its scale.
  parameter_optimizer<adam, f64> optimizer({.lr = 2e-3f});
  double first = 0, last = 0;
  for (int k = 0; k < iterations; ++k) {
    tensor_store g;
    last = simulate(params, observed, &g).first;
    if (k == 0) first = last;
    optimizer.step(params, g);
    if ((k + 1) % std::max(1, iterations / 10) == 0)
      std::printf("iteration %4d  misfit %.3e  source error %.3e\n", k + 1, last,
                  double(xt::amax(xt::abs(params.get<double>("source") - hidden))()));
  }
  std::printf("misfit %.3e -> %.3e (%.0fx lower)\n", first, last, first / std::max(last, 1e-300));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "heat_source: error: " << e.what() << "\n";
  return 1;
}
