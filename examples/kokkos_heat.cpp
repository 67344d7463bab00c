// A Kokkos application that trains a luminal network online, as the closure of its own
// solver. The application owns its fields in Kokkos::Views and steps them with its own
// parallel_for kernels; luminal reads and writes those Views in place (bind_view,
// write_output_to), on the application's execution space (luminal::kokkos<Space>).
//
// The physics: 1-D reaction-diffusion, u_t = alpha u_xx + r(u) on [0, 1], u = 0 at both
// ends. A reference solver knows the reaction r(u) = 3 u (1 - u); a coarse model does not,
// and uses a small network r_theta(u) in its place. At every time step the reference
// advances, the reaction it implies, (u_next - u) / dt - alpha u_xx, is the target of one
// training step of r_theta on the reference's field, and the model advances with the
// network's reaction. As the network learns, the model's field follows the reference's;
// a third field, stepped with no reaction at all, shows how far it would drift without.
//
//     kokkos_heat [--steps 3000] [--train-every 1] [--report-every 500] [--seed 1]
//
// It runs on Kokkos' default execution space: Serial with Debian's Trilinos Kokkos, OpenMP
// or CUDA with a Kokkos built for them (Kokkos::initialize reads --kokkos-* options).
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <luminal/backends/kokkos.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>
#include <string>

#include "example_options.hpp"

using namespace luminal;

namespace {
using backend = kokkos<Kokkos::DefaultExecutionSpace>;
using field = Kokkos::View<float**, Kokkos::LayoutRight>;  // [points, 1]: one feature per point

constexpr std::int64_t points = 128;
constexpr float alpha = 0.01f;  // slow diffusion: the reaction grows u towards 1
constexpr float dx = 1.0f / float(points - 1);
constexpr float dt = 0.4f * dx * dx / alpha;  // below the explicit scheme's limit of 1/2

KOKKOS_INLINE_FUNCTION float reaction(float u) { return 3.0f * u * (1.0f - u); }

struct options {
  long steps = 3000, train_every = 1, report_every = 500;
  std::uint64_t seed = 1;
};

const char* const usage_text =
    "usage: kokkos_heat [--steps N] [--train-every K] [--report-every R] [--seed S] [--kokkos-* options]\n\n"
    "  --steps         time steps of both solvers, 1 to 10000000 (default 3000)\n"
    "  --train-every   a training step of the network every K time steps, 1 to 1000000 (default 1)\n"
    "  --report-every  a line of progress every R time steps, 1 to 10000000 (default 500)\n"
    "  --seed          the network's initialization, 0 to 2^64-1 (default 1)\n";

options parse(int argc, char** argv) {
  options o;
  examples::command_line args("kokkos_heat", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("--help") || args.is("-h")) args.help();
    else if (args.is("--steps")) o.steps = args.integer(1L, 10000000L);
    else if (args.is("--train-every")) o.train_every = args.integer(1L, 1000000L);
    else if (args.is("--report-every")) o.report_every = args.integer(1L, 10000000L);
    else if (args.is("--seed")) o.seed = args.integer(std::uint64_t(0), std::numeric_limits<std::uint64_t>::max());
    else args.unknown();
  }
  return o;
}

/// One explicit Euler step of u_t = alpha u_xx + r: next = u + dt (alpha lap(u) + r), with
/// the ends held at zero; `r` is the reaction at each point.
void advance(const field& u, const field& r, const field& next) {
  Kokkos::parallel_for(
      "kokkos_heat::advance", points, KOKKOS_LAMBDA(const int i) {
        if (i == 0 || i == points - 1) {
          next(i, 0) = 0.0f;
          return;
        }
        const float laplacian = (u(i - 1, 0) - 2.0f * u(i, 0) + u(i + 1, 0)) / (dx * dx);
        next(i, 0) = u(i, 0) + dt * (alpha * laplacian + r(i, 0));
      });
}

/// The sum over the points of (a - b)^2, in double.
double squared_distance(const field& a, const field& b) {
  double sum = 0;
  Kokkos::parallel_reduce(
      "kokkos_heat::squared_distance", points,
      KOKKOS_LAMBDA(const int i, double& partial) {
        const double d = double(a(i, 0)) - double(b(i, 0));
        partial += d * d;
      },
      sum);
  return sum;
}

int run(const options& opt) {
  // The network: the reaction as a function of the local value, [points, 1] -> [points, 1].
  static constexpr nn::Linear<"fc1", 1, 32> fc1{};
  static constexpr nn::Linear<"fc2", 32, 32> fc2{};
  static constexpr nn::Linear<"fc3", 32, 1> fc3{};
  constexpr auto u = input<"u", f32>(shape<points, 1>);
  constexpr auto target = input<"target", f32>(shape<points, 1>);
  constexpr auto closure = fc3(tanh(fc2(tanh(fc1(u)))));
  auto step = compile_train_step<backend>(mean(square(closure - target)), adamw{.lr = 3e-3f});
  auto model_reaction = compile<backend>(closure);
  tensor_store initial;
  fc1.initialize(initial, opt.seed);
  fc2.initialize(initial, opt.seed);
  fc3.initialize(initial, opt.seed);
  step.store().assign(initial);

  // The application's fields, in its own memory space.
  field reference("reference", points, 1), reference_next("reference_next", points, 1);
  field model("model", points, 1), model_next("model_next", points, 1);
  field true_reaction("true_reaction", points, 1), implied("implied", points, 1), learned("learned", points, 1);
  field plain("plain", points, 1), plain_next("plain_next", points, 1), zero("zero", points, 1);
  Kokkos::parallel_for(
      "kokkos_heat::initial", points, KOKKOS_LAMBDA(const int i) {
        const float x = float(i) * dx;
        reference(i, 0) = model(i, 0) = plain(i, 0) = 2.0f * x * (1.0f - x);  // 0 at the ends, 0.5 in the middle
        zero(i, 0) = 0.0f;
      });

  // luminal reads the Views where they lie: the step trains on the reference's field and
  // the reaction it implies, the model's program reads the model's field and writes the
  // network's reaction into `learned`.
  bind_view(step, "u", reference);
  bind_view(step, "target", implied);
  bind_view(model_reaction, "u", model);
  model_reaction.write_output_to<0>(learned.data());

  std::printf("kokkos_heat on Kokkos::%s: %lld points, dt %.3g, %ld steps, a training step every %ld\n",
              Kokkos::DefaultExecutionSpace::name(), (long long)points, double(dt), opt.steps, opt.train_every);
  float loss = 0;
  double worst_closure = 0, model_error = 0, plain_error = 0;
  for (long t = 1; t <= opt.steps; ++t) {
    // The reference, and the reaction its step implies at each point.
    Kokkos::parallel_for(
        "kokkos_heat::reaction", points, KOKKOS_LAMBDA(const int i) { true_reaction(i, 0) = reaction(reference(i, 0)); });
    advance(reference, true_reaction, reference_next);
    Kokkos::parallel_for(
        "kokkos_heat::implied", points, KOKKOS_LAMBDA(const int i) {
          if (i == 0 || i == points - 1) {
            implied(i, 0) = reaction(0.0f);  // the ends are held, not stepped: r(0)
            return;
          }
          const float laplacian = (reference(i - 1, 0) - 2.0f * reference(i, 0) + reference(i + 1, 0)) / (dx * dx);
          implied(i, 0) = (reference_next(i, 0) - reference(i, 0)) / dt - alpha * laplacian;
        });
    Kokkos::fence();
    if (t % opt.train_every == 0) loss = step.run();  // reads `reference` and `implied` in place
    // The model, with the network's reaction written into `learned`.
    step.store().bind(model_reaction);  // the parameters where the step keeps them: no copy
    model_reaction.run();
    advance(model, learned, model_next);
    advance(plain, zero, plain_next);
    Kokkos::fence();
    Kokkos::deep_copy(reference, reference_next);
    Kokkos::deep_copy(model, model_next);
    Kokkos::deep_copy(plain, plain_next);
    if (t % opt.report_every == 0 || t == opt.steps) {
      // The network's error against the true reaction on the model's own values, and the
      // model's field against the reference's (relative L2).
      double closure_error = 0;
      Kokkos::parallel_reduce(
          "kokkos_heat::closure_error", points,
          KOKKOS_LAMBDA(const int i, double& worst) {
            const double d = double(learned(i, 0)) - double(reaction(model(i, 0)));
            const double e = d < 0 ? -d : d;
            if (i > 0 && i < points - 1 && e > worst) worst = e;
          },
          Kokkos::Max<double>(closure_error));
      const double norm = squared_distance(reference, zero);
      worst_closure = closure_error;
      model_error = std::sqrt(squared_distance(model, reference) / norm);
      plain_error = std::sqrt(squared_distance(plain, reference) / norm);
      std::printf("step %6ld  t %.2f  loss %.3e  closure error %.4f (max |r_theta(u) - r(u)|)  model vs reference %.4f"
                  " (no reaction: %.4f)\n",
                  t, double(t) * double(dt), double(loss), closure_error, model_error, plain_error);
      std::fflush(stdout);
    }
  }
  std::printf("final closure error %.4f, model vs reference %.4f (with no reaction term: %.4f)\n", worst_closure,
              model_error, plain_error);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);  // takes its --kokkos-* options out of argv
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "kokkos_heat: " << e.what() << "\n";
    return 1;
  }
}
