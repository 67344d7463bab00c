// The compiled training step: optimizer updates against reference implementations of
// torch.optim's formulas (fed the gradients of a separately compiled grad program),
// gradient clipping, the parameter store shared with an evaluation program, NaN losses,
// checkpoints and resuming.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <luminal/train/train.hpp>
#include <luminal/backends/host.hpp>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

// A linear regression: pred = x w^T + b, loss = mean((pred - y)^2), in f64.
auto x = input<"x", f64>(shape<Batch, 3>);
auto y = input<"y", f64>(shape<Batch, 2>);
auto w = param<"w", f64>(shape<2, 3>);
auto b = param<"b", f64>(shape<2>);
auto pred = matmul(x, transpose(w)) + b;
auto loss = mean(square(pred - y));

using arr = xt::xarray<double>;

struct reference_state {
  arr w, b, w_state1, b_state1, w_state2, b_state2;
};

/// The gradients of `loss` at (w, b) from an ordinary grad program.
std::pair<arr, arr> gradients(const arr& xs, const arr& ys, const arr& wv, const arr& bv) {
  static auto prog = [] {
    auto [value, dw, db] = value_and_grad(loss, w, b);
    return compile(value, dw, db);
  }();
  prog.bind("x", xs);
  prog.bind("y", ys);
  prog.bind("w", wv);
  prog.bind("b", bv);
  prog.run();
  return {prog.output<1>(), prog.output<2>()};
}

/// torch.optim.SGD's update of one tensor (dampening 0), with the step's hyperparameters
/// as it binds them: floats widened to double.
void sgd_reference(arr& p, arr& buffer, const arr& g, const sgd& options) {
  const double lr = options.lr, mu = options.momentum, wd = options.weight_decay;
  arr d = g + wd * p;
  buffer = mu * buffer + d;
  p = p - lr * (options.nesterov ? arr(d + mu * buffer) : buffer);
}

tensor_store initial_values() {
  tensor_store values;
  values.set("w", arr(test::random_array<double>({2, 3}, 1)));
  values.set("b", arr(test::random_array<double>({2}, 2)));
  return values;
}

const arr xs = test::random_array<double>({5, 3}, 3);
const arr ys = test::random_array<double>({5, 2}, 4);
}  // namespace

TEST_CASE("train step: sgd with momentum, nesterov and weight decay follows torch.optim.SGD", "[train]") {
  for (bool nesterov : {false, true}) {
    INFO("nesterov = " << nesterov);
    sgd options{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = nesterov};
    auto step = compile_train_step(loss, options);
    step.store().assign(initial_values());
    step.bind("x", xs);
    step.bind("y", ys);
    arr wv = initial_values().get<double>("w"), bv = initial_values().get<double>("b");
    arr wbuf = xt::zeros<double>({2, 3}), bbuf = xt::zeros<double>({2});
    for (int t = 1; t <= 4; ++t) {
      auto [gw, gb] = gradients(xs, ys, wv, bv);
      sgd_reference(wv, wbuf, gw, options);
      sgd_reference(bv, bbuf, gb, options);
      step.run();
      test::require_close(step.store().get<double>("w"), wv, 1e-6, 1e-7);
      test::require_close(step.store().get<double>("b"), bv, 1e-6, 1e-7);
      test::require_close(step.store().get<double>("optimizer.momentum_buffer.w"), wbuf, 1e-6, 1e-7);
    }
    REQUIRE(step.step_count() == 4);
  }
}

TEST_CASE("train step: adam and adamw follow torch.optim.Adam and AdamW", "[train]") {
  for (bool decoupled : {false, true}) {
    INFO((decoupled ? "adamw" : "adam"));
    // Adam and AdamW share one update graph: both steps below are the same program type.
    const float lr = 0.05f, b1 = 0.8f, b2 = 0.95f, eps = 1e-6f, wd = 0.1f;
    auto run_with = [&](auto options) {
      auto step = compile_train_step(loss, options);
      step.store().assign(initial_values());
      step.bind("x", xs);
      step.bind("y", ys);
      arr p[2] = {initial_values().get<double>("w"), initial_values().get<double>("b")};
      arr m[2] = {xt::zeros<double>({2, 3}), xt::zeros<double>({2})};
      arr v[2] = {xt::zeros<double>({2, 3}), xt::zeros<double>({2})};
      for (int t = 1; t <= 5; ++t) {
        auto [gw, gb] = gradients(xs, ys, p[0], p[1]);
        arr g[2] = {gw, gb};
        for (int k = 0; k < 2; ++k) {
          if (decoupled) p[k] = p[k] * (1.0 - double(lr) * wd);
          else g[k] = g[k] + double(wd) * p[k];
          m[k] = double(b1) * m[k] + (1.0 - double(b1)) * g[k];
          v[k] = double(b2) * v[k] + (1.0 - double(b2)) * g[k] * g[k];
          double c1 = 1.0 - std::pow(double(b1), t), c2 = 1.0 - std::pow(double(b2), t);
          p[k] = p[k] - double(lr) / c1 * m[k] / (xt::sqrt(v[k]) / std::sqrt(c2) + double(eps));
        }
        double value = step.run();
        REQUIRE(std::isfinite(value));
        test::require_close(step.store().template get<double>("w"), p[0], 1e-5, 1e-7);
        test::require_close(step.store().template get<double>("b"), p[1], 1e-5, 1e-7);
        test::require_close(step.store().template get<double>("optimizer.exp_avg_sq.w"), v[0], 1e-5, 1e-9);
      }
    };
    if (decoupled) run_with(adamw{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd});
    else run_with(adam{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd});
  }
}

TEST_CASE("train step: global-norm clipping scales the gradients to max_grad_norm", "[train]") {
  auto step = compile_train_step<host, retention_policy::store_all, gradient_clipping::global_norm>(loss, sgd{.lr = 1.0f});
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  arr w0 = step.store().get<double>("w"), b0 = step.store().get<double>("b");
  auto [gw, gb] = gradients(xs, ys, w0, b0);
  const double norm = std::sqrt(xt::sum(gw * gw)() + xt::sum(gb * gb)());
  REQUIRE(norm > 0.2);
  step.max_grad_norm = 0.1;  // clips: the update is g * 0.1 / norm
  step.run();
  const double scale = 0.1 / (norm + 1e-6);
  test::require_close(step.store().get<double>("w"), arr(w0 - scale * gw), 1e-9, 1e-12);
  step.max_grad_norm = 1e9;  // does not clip
  arr w1 = step.store().get<double>("w"), b1 = step.store().get<double>("b");
  auto [gw1, gb1] = gradients(xs, ys, w1, b1);
  step.run();
  test::require_close(step.store().get<double>("b"), arr(b1 - gb1), 1e-9, 1e-12);
}

TEST_CASE("train step: an evaluation program shares the parameter store", "[train]") {
  auto step = compile_train_step(loss, sgd{.lr = 0.2f});
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  auto eval = compile(pred);
  eval.bind("x", xs);
  double first = step.run(), last = first;
  for (int i = 0; i < 30; ++i) last = step.run();
  REQUIRE(last < 0.5 * first);
  step.store().bind(eval);
  eval.run();
  arr wv = step.store().get<double>("w"), bv = step.store().get<double>("b");
  arr expected = xt::zeros<double>({5, 2});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t o = 0; o < 2; ++o) {
      expected(i, o) = bv(o);
      for (std::size_t k = 0; k < 3; ++k) expected(i, o) += xs(i, k) * wv(o, k);
    }
  test::require_close(eval.output<0>(), expected, 1e-12, 1e-12);
}

TEST_CASE("program profile: per-kernel times over the profiled runs, slowest first", "[train][profile]") {
  auto step = compile_train_step(loss, sgd{.lr = 0.2f});
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  step.run();  // not profiled
  step.set_profiling(true);
  step.run();
  step.run();
  const std::string report = step.profile();
  INFO(report);
  REQUIRE(report.find("2 runs") != std::string::npos);
  REQUIRE(report.find(" matmul f64 (Batch, 2)") != std::string::npos);
  std::size_t lines = 0;
  for (char ch : report) lines += ch == '\n';
  REQUIRE(lines == 1 + std::size_t(decltype(step)::kernel_count()));
}

TEST_CASE("program describe: each kernel's loop, reads and bytes, with times once profiled", "[train][profile]") {
  auto step = compile_train_step(loss, sgd{.lr = 0.2f});
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  REQUIRE_THROWS_AS(step.describe(), input_error);  // no extents before a run
  step.run();
  std::string text = step.describe();
  INFO(text);
  std::size_t kernels = 0;
  for (std::size_t at = text.find("kernel "); at != std::string::npos; at = text.find("\nkernel ", at + 1)) ++kernels;
  REQUIRE(kernels == std::size_t(decltype(step)::kernel_count()));
  REQUIRE(text.find("GEMM ") != std::string::npos);
  REQUIRE(text.find("reads input x f64 (Batch, 3) (5, 3)") != std::string::npos);
  REQUIRE(text.find("writing 4 of 4 tensors over their current values") != std::string::npos);
  REQUIRE(text.find(" GB/s") == std::string::npos);  // not profiled yet
  step.set_profiling(true);
  step.run();
  text = step.describe();
  REQUIRE(text.find(" GB/s") != std::string::npos);
  REQUIRE(text.find(" GFLOP/s") != std::string::npos);
}

TEST_CASE("program describe: kernels run as one loop or launch are timed and counted as a group", "[train][profile]") {
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto step = compile_train_step(loss, adam{.lr = 0.05f});  // Adam's moment and parameter updates share loops
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  step.set_profiling(true);
  step.run();
  const std::string text = step.describe();
  INFO(text);
  // Adam's updates of w and b run side by side: one launch of two loops.
  REQUIRE(count(text, "; one launch with kernels 1 to 5, as 2 loops over their own elements") == 1);
  REQUIRE(count(text, "; a loop of its own in the launch of kernel 0") == 1);
  const std::size_t groups = count(text, "; one loop with kernels ") + count(text, "; one launch with kernels "),
                    members = count(text, "; in the loop of the kernel before") + count(text, "; a loop of its own");
  REQUIRE(groups > 0);
  CHECK(count(text, ", the group ") == groups);         // each group's bytes, after its first kernel's
  CHECK(count(text, "; timed with kernel ") == members);  // the others print no time of their own
  CHECK(count(text, " per run") == std::size_t(decltype(step)::kernel_count()) - members);
  CHECK(text.find("inf GB/s") == std::string::npos);
}

TEST_CASE("train step: a NaN loss throws and leaves the parameters as they were", "[train]") {
  auto step = compile_train_step(loss, sgd{.lr = 0.2f});
  step.store().assign(initial_values());
  step.bind("y", ys);
  arr bad = xs;
  bad(2, 1) = std::numeric_limits<double>::quiet_NaN();
  step.bind("x", bad);
  REQUIRE_THROWS_WITH(step.run(), Catch::Contains("NaN at step 1") && Catch::Contains("left as they were"));
  REQUIRE(step.step_count() == 0);
  test::require_close(step.store().get<double>("w"), initial_values().get<double>("w"), 0, 0);
  REQUIRE_THROWS_WITH(step.bind("w", xs), Catch::Contains("'w' is bound by the training step"));
  REQUIRE_THROWS_AS(step.bind("optim.lr", xs), input_error);
}

TEST_CASE("train step: a model of one parameter, whose gradient reads it through a view", "[train]") {
  // One parameter: the step's outputs are the loss, the update and its one state tensor.
  auto W = param<"W", f64>(shape<3, 3>);
  auto X = input<"X", f64>(shape<3, 3>);
  auto twisted = sum(W * transpose(W) * X);  // its gradient, X W^T + (X W)^T elementwise, reads W transposed
  const sgd options{.lr = 0.1f, .momentum = 0.5f};
  auto step = compile_train_step(twisted, options);
  STATIC_REQUIRE(decltype(step)::slot_count == 2);
  auto gradient = compile(grad(twisted, W));
  arr wv = test::random_array<double>({3, 3}, 5), xv = test::random_array<double>({3, 3}, 6);
  arr velocity = xt::zeros<double>({3, 3});
  tensor_store values;
  values.set("W", wv);
  step.store().assign(values);
  step.bind("X", xv);
  gradient.bind("X", xv);
  for (int t = 0; t < 3; ++t) {
    step.run();
    gradient.bind("W", wv);
    gradient.run();
    sgd_reference(wv, velocity, gradient.output(), options);
  }
  test::require_close(step.store().get<double>("W"), wv, 1e-10, 1e-10);
}

TEST_CASE("train step: Adam and SGD update every tensor in place, and a NaN step in between changes nothing",
          "[train]") {
  STATIC_REQUIRE(std::ranges::all_of(decltype(compile_train_step(loss, adam{}))::in_place, std::identity{}));
  STATIC_REQUIRE(std::ranges::all_of(decltype(compile_train_step(loss, sgd{}))::in_place, std::identity{}));
  arr bad = xs;
  bad(0, 0) = std::numeric_limits<double>::infinity();
  auto steady = compile_train_step(loss, adam{.lr = 0.05f});
  auto interrupted = compile_train_step(loss, adam{.lr = 0.05f});
  for (auto* step : {&steady, &interrupted}) {
    step->store().assign(initial_values());
    step->bind("x", xs);
    step->bind("y", ys);
  }
  for (int t = 0; t < 4; ++t) {
    if (t == 2) {
      interrupted.bind("x", bad);
      REQUIRE_THROWS_WITH(interrupted.run(), Catch::Contains("infinite at step 3"));
      interrupted.bind("x", xs);
    }
    REQUIRE(interrupted.run() == steady.run());
  }
  for (const char* name : {"w", "b", "optimizer.exp_avg.w", "optimizer.exp_avg_sq.b"})
    test::require_close(interrupted.store().get<double>(name), steady.store().get<double>(name), 0, 0);
}

namespace {
/// p -= lr |p|^2 g: an update that reads each parameter through a reduction, so it cannot
/// write the parameter over its current value.
struct norm_scaled_sgd {
  float lr = 0.1f;
  static constexpr std::string_view name = "norm_scaled_sgd";
  template <class P>
  using states = boost::mp11::mp_list<>;
  template <class P, class G>
  static constexpr auto update(P p, G g) {
    hyperparameter<"optim.lr", value_t<P>> rate;
    return boost::mp11::mp_list<decltype(p - rate * sum(square(p)) * g)>{};
  }
  template <class Set>
  void hyperparameters(std::int64_t, Set&& set) const {
    set("optim.lr", lr);
  }
};
}  // namespace

TEST_CASE("train step: an update that reads a parameter through a reduction writes a second buffer", "[train]") {
  auto step = compile_train_step(loss, norm_scaled_sgd{.lr = 0.1f});
  STATIC_REQUIRE(!decltype(step)::in_place[0]);
  STATIC_REQUIRE(!decltype(step)::in_place[1]);
  step.store().assign(initial_values());
  step.bind("x", xs);
  step.bind("y", ys);
  arr wv = initial_values().get<double>("w"), bv = initial_values().get<double>("b");
  for (int t = 0; t < 3; ++t) {
    auto [gw, gb] = gradients(xs, ys, wv, bv);
    const double nw = xt::sum(wv * wv)(), nb = xt::sum(bv * bv)();
    wv = wv - double(0.1f) * nw * gw;
    bv = bv - double(0.1f) * nb * gb;
    step.run();
  }
  test::require_close(step.store().get<double>("w"), wv, 1e-12, 1e-12);
  test::require_close(step.store().get<double>("b"), bv, 1e-12, 1e-12);
  // The one-parameter model above recomputes its gradient, which reads W transposed, in
  // the update: W is not written in place there either.
  auto W = param<"W", f64>(shape<3, 3>);
  auto X = input<"X", f64>(shape<3, 3>);
  STATIC_REQUIRE(!decltype(compile_train_step(sum(W * transpose(W) * X), sgd{}))::in_place[0]);
}

TEST_CASE("train step: gradients that are an input, or one node for two parameters", "[train]") {
  // d/dp sum(p * X) is X itself: the update reads the input, which it is bound too.
  auto P = param<"P", f64>(shape<5, 3>);
  auto Z = input<"z", f64>(shape<5, 3>);
  auto leaf_step = compile_train_step(sum(P * Z), sgd{.lr = 0.5f});
  STATIC_REQUIRE(decltype(leaf_step)::gradient_program_type::output_ids.size() == 1);  // the loss alone
  tensor_store start;
  start.set("P", arr(test::random_array<double>({5, 3}, 7)));
  leaf_step.store().assign(start);
  leaf_step.bind("z", xs);
  leaf_step.run();
  leaf_step.run();
  test::require_close(leaf_step.store().get<double>("P"), arr(start.get<double>("P") - 1.0 * xs), 1e-12, 1e-12);
  // Two weights whose gradients are the same expression (x^T times ones): one output, read twice.
  auto a = param<"a", f64>(shape<3, 2>);
  auto c = param<"c", f64>(shape<3, 2>);
  auto twin_step = compile_train_step(sum(matmul(x, a)) + sum(matmul(x, c)), sgd{.lr = 0.25f});
  using twin_gradients = decltype(twin_step)::gradient_program_type;
  STATIC_REQUIRE(twin_gradients::output_ids[1] == twin_gradients::output_ids[2]);
  tensor_store twins;
  twins.set("a", arr(test::random_array<double>({3, 2}, 8)));
  twins.set("c", arr(test::random_array<double>({3, 2}, 9)));
  twin_step.store().assign(twins);
  twin_step.bind("x", xs);
  twin_step.run();
  arr column_sums = xt::sum(xs, {0});
  arr g = xt::zeros<double>({3, 2});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) g(i, j) = column_sums(i);
  test::require_close(twin_step.store().get<double>("a"), arr(twins.get<double>("a") - 0.25 * g), 1e-12, 1e-12);
  test::require_close(twin_step.store().get<double>("c"), arr(twins.get<double>("c") - 0.25 * g), 1e-12, 1e-12);
}

TEST_CASE("train step: resuming from a checkpoint reproduces the uninterrupted run", "[train][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("luminal_train_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "resume.safetensors";
  auto make = [] {
    auto step = compile_train_step(loss, adam{.lr = 0.03f});
    step.store().assign(initial_values());
    return step;
  };
  auto feed = [](auto& step, int t) {  // a different batch every step
    step.bind("x", test::random_array<double>({4, 3}, 100 + t));
    step.bind("y", test::random_array<double>({4, 2}, 200 + t));
  };
  std::vector<double> straight, resumed;
  {
    auto step = make();
    for (int t = 0; t < 12; ++t) {
      feed(step, t);
      straight.push_back(step.run());
      if (t == 5) step.save(path);
    }
  }
  {
    auto step = make();
    step.load(path);
    REQUIRE(step.step_count() == 6);
    for (int t = 6; t < 12; ++t) {
      feed(step, t);
      resumed.push_back(step.run());
    }
  }
  for (int t = 6; t < 12; ++t) REQUIRE(resumed[t - 6] == straight[t]);

  // The file is safetensors: parameters by name, optimizer state, the step count.
  tensor_store saved = load_safetensors(path);
  REQUIRE(saved.contains("w"));
  REQUIRE(saved.contains("optimizer.exp_avg.b"));
  REQUIRE(saved.metadata.at("luminal.step") == "6");
  REQUIRE(saved.metadata.at("luminal.optimizer") == "adam");

  SECTION("parameters alone (as PyTorch writes them) load with fresh optimizer state") {
    tensor_store params_only;
    params_only.insert("w", saved.at("w"));
    params_only.insert("b", saved.at("b"));
    auto step = make();
    step.load_state(params_only);
    REQUIRE(step.step_count() == 0);
    REQUIRE(xt::all(xt::equal(step.store().get<double>("optimizer.exp_avg.w"), 0.0)));
    REQUIRE(bool(step.store().get<double>("w") == saved.get<double>("w")));
  }
  SECTION("bad checkpoints are refused with the reason, and change nothing") {
    auto step = make();
    const arr before = step.store().get<double>("w");
    tensor_store missing = saved;
    missing.erase("b");
    REQUIRE_THROWS_WITH(step.load_state(missing), Catch::Contains("no tensor 'b'"));
    tensor_store wrong_shape = saved;
    wrong_shape.set("w", arr(xt::zeros<double>({3, 2})));
    REQUIRE_THROWS_WITH(step.load_state(wrong_shape), Catch::Contains("'w' as f64 (3, 2)") && Catch::Contains("f64 (2, 3)"));
    tensor_store partial = saved;
    partial.erase("optimizer.exp_avg_sq.w");
    REQUIRE_THROWS_WITH(step.load_state(partial), Catch::Contains("only some parameters"));
    tensor_store bad_step = saved;
    bad_step.metadata["luminal.step"] = "six";
    REQUIRE_THROWS_WITH(step.load_state(bad_step), Catch::Contains("bad step count 'six'"));
    REQUIRE(bool(step.store().get<double>("w") == before));
    REQUIRE_THROWS_AS(step.load(dir / "absent.safetensors"), checkpoint_error);
  }
  std::filesystem::remove_all(dir);
}
