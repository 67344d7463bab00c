// A data-parallel training step (compile_train_step with data_parallel) without MPI: on
// one rank it takes the plain step's steps; against a recording communicator its buckets
// travel while the backward runs, the first run broadcasts rank 0's state and checks the
// ranks' models, and a loss that is not finite on another rank stops this one too.
// (tests/mpi/mpi_test.cpp runs it on two MPI ranks.)
#include <algorithm>
#include <cmath>
#include <luminal/train/train.hpp>
#include <luminal/backends/host.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

// A two-layer regression in f32: the first layer's weight is read first in the forward,
// the second layer's gradients come first in the backward.
auto x = input<"x", f32>(shape<Batch, 6>);
auto y = input<"y", f32>(shape<Batch, 3>);
auto w1 = param<"w1", f32>(shape<8, 6>);
auto b1 = param<"b1", f32>(shape<8>);
auto w2 = param<"w2", f32>(shape<3, 8>);
auto b2 = param<"b2", f32>(shape<3>);
auto hidden = tanh(matmul(x, transpose(w1)) + b1);
auto loss = mean(square(matmul(hidden, transpose(w2)) + b2 - y));

using arr = xt::xarray<float>;

tensor_store initial_values() {
  tensor_store values;
  values.set("w1", arr(test::random_array<float>({8, 6}, 1)));
  values.set("b1", arr(test::random_array<float>({8}, 2)));
  values.set("w2", arr(test::random_array<float>({3, 8}, 3)));
  values.set("b2", arr(test::random_array<float>({3}, 4)));
  return values;
}

/// A second rank that holds the same gradients: sums double them. Records every call.
class recording_communicator final : public communicator {
 public:
  std::vector<std::string> events;      // "start <elements>", "wait <handle>", "broadcast <bytes>"
  std::string ours, theirs;              // rank 1's model description has `theirs` for `ours`
  bool other_loss_not_finite = false;
  int progress_calls = 0;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::uint64_t start_sum(void* data, std::size_t count, dtype_tag type) override {
    REQUIRE(type == dtype_tag::f32);
    auto* v = static_cast<float*>(data);
    for (std::size_t i = 0; i < count; ++i) v[i] *= 2.0f;
    events.push_back("start " + std::to_string(count));
    return starts++;
  }
  void progress() override { ++progress_calls; }
  void wait(std::uint64_t handle) override { events.push_back("wait " + std::to_string(handle)); }
  void broadcast(void*, std::size_t bytes, int root) override {
    REQUIRE(root == 0);
    events.push_back("broadcast " + std::to_string(bytes));
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    std::string other = text;
    if (const auto at = other.find(ours); !ours.empty() && at != std::string::npos) other.replace(at, ours.size(), theirs);
    return {text, other};
  }
  bool any(bool flag) override {
    ++any_calls;
    return flag || other_loss_not_finite;
  }
  int any_calls = 0;

 private:
  std::uint64_t starts = 0;
};

template <class Step>
void bind_batch(Step& step, unsigned seed) {
  step.bind("x", arr(test::random_array<float>({5, 6}, seed)));
  step.bind("y", arr(test::random_array<float>({5, 3}, seed + 100)));
}

std::size_t position(const std::vector<std::string>& events, const std::string& event) {
  for (std::size_t i = 0; i < events.size(); ++i)
    if (events[i] == event) return i;
  FAIL("no event '" << event << "'");
  return 0;
}
}  // namespace

TEST_CASE("data parallel on one rank (local_communicator) takes the plain step's steps", "[data_parallel]") {
  local_communicator comm;
  auto plain = compile_train_step(loss, adamw{.lr = 1e-2f});
  auto parallel = compile_train_step(loss, adamw{.lr = 1e-2f}, data_parallel{comm});
  plain.store().assign(initial_values());
  parallel.store().assign(initial_values());
  for (unsigned s = 0; s < 3; ++s) {
    bind_batch(plain, s);
    bind_batch(parallel, s);
    REQUIRE(parallel.run() == plain.run());
  }
  for (const char* name : {"w1", "b1", "w2", "b2"}) {
    INFO(name);
    REQUIRE(bool(parallel.store().get<float>(name) == plain.store().get<float>(name)));
  }
  REQUIRE(parallel.step_count() == 3);
}

TEST_CASE("data parallel: buckets travel while the backward computes the next, last layers first",
          "[data_parallel]") {
  recording_communicator comm;
  // 64-byte buckets: b2 (3 floats) and w2 (24) fill the first, b1 (8) and w1 (48) the second.
  auto parallel = compile_train_step(loss, sgd{.lr = 0.1f}, data_parallel<64>{comm});
  auto plain = compile_train_step(loss, sgd{.lr = 0.1f});
  parallel.store().assign(initial_values());
  plain.store().assign(initial_values());
  bind_batch(parallel, 7);
  bind_batch(plain, 7);
  plain.run();
  parallel.run();
  // Both ranks held the same gradients: their mean is this rank's, exactly.
  for (const char* name : {"w1", "b1", "w2", "b2"}) {
    INFO(name);
    REQUIRE(bool(parallel.store().get<float>(name) == plain.store().get<float>(name)));
  }
  const auto& e = comm.events;
  INFO([&] {
    std::string all;
    for (const auto& s : e) all += s + "; ";
    return all;
  }());
  // The first run took rank 0's parameters, optimizer state and step count before any exchange.
  REQUIRE(std::count_if(e.begin(), e.end(), [](const std::string& s) { return s.starts_with("broadcast"); }) ==
          decltype(parallel)::slot_count + 1);
  REQUIRE(position(e, "broadcast 8") < position(e, "start 27"));
  // Two buckets, the second layer's first, and the second sent before the first is waited for.
  REQUIRE(std::count_if(e.begin(), e.end(), [](const std::string& s) { return s.starts_with("start"); }) == 2);
  REQUIRE(position(e, "start 27") < position(e, "start 56"));
  REQUIRE(position(e, "start 56") < position(e, "wait 0"));
  REQUIRE(comm.progress_calls > 0);
  REQUIRE(parallel.exchange_wait_seconds() >= 0.0);
  const std::string text = parallel.describe();
  REQUIRE(text.find("the op's own kernel: exchange") != std::string::npos);
  REQUIRE(text.find("exchange start (sends the bucket)") != std::string::npos);

  // A second step exchanges again, and broadcasts nothing.
  comm.events.clear();
  bind_batch(parallel, 8);
  parallel.run();
  REQUIRE(std::count_if(e.begin(), e.end(), [](const std::string& s) { return s.starts_with("broadcast"); }) == 0);
  REQUIRE(std::count_if(e.begin(), e.end(), [](const std::string& s) { return s.starts_with("wait"); }) == 2);
}

TEST_CASE("data parallel: ranks whose models differ are refused at the first step, naming the tensor",
          "[data_parallel]") {
  recording_communicator comm;
  auto step = compile_train_step(loss, sgd{.lr = 0.1f}, data_parallel{comm});
  step.store().assign(initial_values());
  comm.ours = "w1: f32 [8, 6]", comm.theirs = "w1: f32 [9, 6]";
  bind_batch(step, 1);
  REQUIRE_THROWS_WITH(step.run(), Catch::Matchers::Contains("the ranks' models differ") &&
                                      Catch::Matchers::Contains("rank 0 has 'w1: f32 [8, 6]', rank 1 'w1: f32 [9, 6]'"));
  REQUIRE(step.step_count() == 0);
}

TEST_CASE("data parallel: a loss that is not finite on another rank stops this rank too", "[data_parallel]") {
  recording_communicator comm;
  auto step = compile_train_step(loss, sgd{.lr = 0.1f}, data_parallel{comm});
  step.store().assign(initial_values());
  bind_batch(step, 1);
  step.run();
  const arr before = step.store().get<float>("w1");
  comm.other_loss_not_finite = true;
  REQUIRE_THROWS_AS(step.run(), run_error);
  REQUIRE_THROWS_WITH(step.run(), Catch::Matchers::Contains("not finite on another rank at step 2"));
  REQUIRE(bool(step.store().get<float>("w1") == before));
  REQUIRE(step.step_count() == 1);

  // A NaN here: this rank still tells the others (they would wait for it otherwise).
  comm.other_loss_not_finite = false;
  const int asked = comm.any_calls;
  arr not_a_number = test::random_array<float>({5, 6}, 1);
  not_a_number.fill(std::nanf(""));
  step.bind("x", not_a_number);
  REQUIRE_THROWS_WITH(step.run(), Catch::Matchers::Contains("the loss is NaN at step 2"));
  REQUIRE(comm.any_calls == asked + 1);
  REQUIRE(step.step_count() == 1);
}

TEST_CASE("a program with exchange nodes refuses to run without a communicator", "[data_parallel]") {
  auto bind_all = [](auto& p) {
    p.bind("x", arr(test::random_array<float>({5, 6}, 1)));
    p.bind("y", arr(test::random_array<float>({5, 3}, 2)));
    const tensor_store values = initial_values();
    for (const std::string& name : values.names()) p.bind(name, values.get<float>(name));
  };
  auto [dw2] = std::apply([](auto, auto... g) { return std::tuple{g...}; }, value_and_grad(loss, w2));
  auto prog = compile(std::get<0>(all_reduce_mean<1024>(std::tuple{dw2})));
  STATIC_REQUIRE(decltype(prog)::exchanges);
  bind_all(prog);
  REQUIRE_THROWS_WITH(prog.run(), Catch::Matchers::Contains("set_communicator()"));
  local_communicator comm;
  prog.set_communicator(comm);
  prog.run();
  auto reference = compile(dw2);
  bind_all(reference);
  reference.run();
  REQUIRE(bool(prog.output<0>() == reference.output<0>()));
}

TEST_CASE("bucket layout: gradients fill buckets in order, each closing once it holds the bucket size",
          "[data_parallel]") {
  constexpr auto layout = detail::make_bucket_layout<64, 4>({3, 24, 8, 48}, 4);
  STATIC_REQUIRE(layout.bucket_count == 2);
  STATIC_REQUIRE(layout.bucket == std::array<int, 4>{0, 0, 1, 1});
  STATIC_REQUIRE(layout.offset == std::array<std::size_t, 4>{0, 3, 0, 8});
  STATIC_REQUIRE(layout.closes == std::array<bool, 4>{false, true, false, true});
  STATIC_REQUIRE(layout.opens == std::array<bool, 4>{true, false, true, false});
  STATIC_REQUIRE(layout.bucket_elements[0] == 27);
  STATIC_REQUIRE(layout.bucket_elements[1] == 56);
  constexpr auto one = detail::make_bucket_layout<(1 << 20), 3>({10, 20, 30}, 4);
  STATIC_REQUIRE(one.bucket_count == 1);
  STATIC_REQUIRE(one.closes == std::array<bool, 3>{false, false, true});
}
