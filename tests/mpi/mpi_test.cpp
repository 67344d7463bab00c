// Data parallelism over MPI (distributed/mpi.hpp), run by CTest under
// `mpirun -np 2`, for a compiled training step (compile_train_step with data_parallel) and
// for named tensors (a tape's): gradients averaged over ranks that each hold half a batch
// equal the whole batch's gradient; after 20 AdamW steps on different shards every
// parameter is bit-identical on every rank; models that differ are refused naming the
// parameter and the ranks.
// With --rank-1-dies it runs the dying-rank scenario of the mpi.rank_dies test instead;
// --rank-0-returns-early, --rank-0-hangs and --settings-differ run the scenarios of the
// mpi.* tests of that name under run_on_mpi_world (see main).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include <luminal/distributed/mpi.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/luminal.hpp>
#include <luminal/tape/tape.hpp>
#include <luminal/train/train.hpp>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
// Softmax regression, 5 features to 3 classes, mean cross-entropy over the batch.
const auto x = input<"x", f32>(shape<Batch, 5>);
const auto labels = input<"labels", i32>(shape<Batch>);
const auto w = param<"fc.weight", f32>(shape<3, 5>);
const auto b = param<"fc.bias", f32>(shape<3>);
const auto logits = matmul(x, transpose(w)) + b;
const auto z = logits - max<1>(logits, keepdim);
const auto loss = mean(log(sum<1>(exp(z))) - sum<1>(z * cast<f32>(equal(iota<1, i32>(shape<Batch, 3>), reshape(labels, shape<Batch, 1>)))));

/// The gradients of the mean loss over rows [first, last) of (xs, ys), by name.
tensor_store gradients(const tensor_store& params, const xt::xarray<float>& xs, const xt::xarray<int>& ys,
                       std::size_t first, std::size_t last) {
  static auto prog = [] {
    auto [dw, db] = grad(loss, w, b);
    return compile(dw, db);
  }();
  params.bind(prog);
  prog.bind("x", xt::xarray<float>(xt::view(xs, xt::range(first, last))));
  prog.bind("labels", xt::xarray<int>(xt::view(ys, xt::range(first, last))));
  prog.run();
  tensor_store out;
  out.set("fc.weight", xt::xarray<float>(prog.output<0>()));
  out.set("fc.bias", xt::xarray<float>(prog.output<1>()));
  return out;
}

tensor_store initial(unsigned seed) {
  std::mt19937 rng(seed);
  tensor_store p;
  p.set("fc.weight", xt::xarray<float>(xt::random::randn<float>({3, 5}, 0.0f, 1.0f, rng)));
  p.set("fc.bias", xt::xarray<float>(xt::random::randn<float>({3}, 0.0f, 1.0f, rng)));
  return p;
}

void data(unsigned seed, std::size_t rows, xt::xarray<float>& xs, xt::xarray<int>& ys) {
  std::mt19937 rng(seed);
  xs = xt::random::randn<float>({rows, std::size_t(5)}, 0.0f, 1.0f, rng);
  ys = xt::xarray<int>::from_shape({rows});
  for (auto& v : ys) v = int(rng() % 3);
}

/// A hash of every parameter's bytes, gathered from every rank.
std::vector<std::uint64_t> hashes(const tensor_store& params, const mpi_communicator& comm);

/// Rows [first, last) of the data as the step's inputs.
template <class Step>
void bind_rows(Step& step, const xt::xarray<float>& xs, const xt::xarray<int>& ys, std::size_t first,
               std::size_t last) {
  step.bind("x", xt::xarray<float>(xt::view(xs, xt::range(first, last))));
  step.bind("labels", xt::xarray<int>(xt::view(ys, xt::range(first, last))));
}
}  // namespace

TEST_CASE("a compiled data-parallel step on part of a batch per rank takes the whole batch's step") {
  mpi_communicator comm(MPI_COMM_WORLD);
  xt::xarray<float> xs;
  xt::xarray<int> ys;
  const std::size_t per_rank = 16, rows = per_rank * std::size_t(comm.size());
  data(11, rows, xs, ys);  // the same global batch on every rank
  // 32-byte buckets: each of the two gradients travels on its own.
  auto parallel = compile_train_step(loss, sgd{.lr = 1.0f}, data_parallel<32>{comm});
  auto whole = compile_train_step(loss, sgd{.lr = 1.0f});
  parallel.store().assign(initial(7));
  whole.store().assign(initial(7));
  for (int s = 0; s < 3; ++s) {
    bind_rows(parallel, xs, ys, per_rank * std::size_t(comm.rank()), per_rank * std::size_t(comm.rank() + 1));
    bind_rows(whole, xs, ys, 0, rows);
    parallel.run();
    whole.run();
  }
  for (const char* name : {"fc.weight", "fc.bias"}) {
    INFO(name);
    const auto a = parallel.store().get<float>(name), e = whole.store().get<float>(name);
    for (std::size_t k = 0; k < e.size(); ++k) REQUIRE(a.flat(k) == Approx(e.flat(k)).margin(1e-5));
  }
}

TEST_CASE("after 20 steps of a compiled data-parallel step on different shards the ranks' parameters are bit-identical") {
  mpi_communicator comm(MPI_COMM_WORLD);
  auto step = compile_train_step(loss, adamw{.lr = 1e-2f}, data_parallel{comm});
  step.store().assign(initial(unsigned(comm.rank()) + 1));  // different on each rank: rank 0's win
  REQUIRE(hashes(step.store().to_tensors(), comm)[0] != hashes(step.store().to_tensors(), comm)[1]);
  for (int s = 0; s < 20; ++s) {
    xt::xarray<float> xs;
    xt::xarray<int> ys;
    data(unsigned(1000 * s + comm.rank()), 8, xs, ys);  // each rank its own shard
    bind_rows(step, xs, ys, 0, 8);
    step.run();
  }
  auto after = hashes(step.store().to_tensors(), comm);
  for (auto h : after) CHECK(h == after[0]);
  tensor_store start = initial(1);
  CHECK(hashes(start, comm)[0] != after[0]);  // the steps did change the parameters
  REQUIRE(step.step_count() == 20);
}

TEST_CASE("ranks whose compiled models differ are refused at the first step, naming the parameter and the ranks") {
  mpi_communicator comm(MPI_COMM_WORLD);
  const auto w4 = param<"fc.weight", f32>(shape<4, 5>);
  const auto b4 = param<"fc.bias", f32>(shape<4>);
  const auto other = mean(square(matmul(x, transpose(w4)) + b4));
  auto check = [&](auto& step, bool has_labels) {
    xt::xarray<float> xs;
    xt::xarray<int> ys;
    data(5, 4, xs, ys);
    step.bind("x", xs);
    if (has_labels) step.bind("labels", ys);
    REQUIRE_THROWS_WITH(step.run(), Catch::Matchers::Contains("rank 0 has 'fc.bias: f32 [3]', rank 1 'fc.bias: f32 [4]'"));
  };
  if (comm.rank() == 1) {
    auto step = compile_train_step(other, sgd{.lr = 0.1f}, data_parallel{comm});
    check(step, false);
  } else {
    auto step = compile_train_step(loss, sgd{.lr = 0.1f}, data_parallel{comm});
    check(step, true);
  }
}

namespace {
std::vector<std::uint64_t> hashes(const tensor_store& params, const mpi_communicator& comm) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const auto& [name, e] : params)
    for (std::byte byte : e.data) h = (h ^ std::uint64_t(byte)) * 1099511628211ull;
  std::vector<std::uint64_t> all(std::size_t(comm.size()));
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.get());
  return all;
}
}  // namespace

TEST_CASE("gradients averaged over ranks that each hold part of a batch equal the whole batch's gradient") {
  mpi_communicator comm(MPI_COMM_WORLD);
  REQUIRE(comm.size() >= 2);
  tensor_store params = initial(7);
  xt::xarray<float> xs;
  xt::xarray<int> ys;
  const std::size_t per_rank = 16, rows = per_rank * std::size_t(comm.size());
  data(11, rows, xs, ys);  // the same global batch on every rank
  tensor_store mine = gradients(params, xs, ys, per_rank * std::size_t(comm.rank()), per_rank * std::size_t(comm.rank() + 1));
  average_gradients(mine, comm, /*bucket_bytes=*/32);  // small buckets: several allreduces
  tensor_store whole = gradients(params, xs, ys, 0, rows);
  for (const char* name : {"fc.weight", "fc.bias"}) {
    INFO(name);
    const auto a = mine.get<float>(name), e = whole.get<float>(name);
    for (std::size_t k = 0; k < e.size(); ++k) REQUIRE(a.flat(k) == Approx(e.flat(k)).margin(1e-6));
  }
}

TEST_CASE("after 20 AdamW steps on different shards every parameter is bit-identical on every rank") {
  mpi_communicator comm(MPI_COMM_WORLD);
  tensor_store params = initial(unsigned(comm.rank()) + 1);  // different on each rank
  REQUIRE(hashes(params, comm)[0] != hashes(params, comm)[1]);
  broadcast_parameters(params, comm);
  auto after_broadcast = hashes(params, comm);
  for (auto h : after_broadcast) REQUIRE(h == after_broadcast[0]);
  parameter_optimizer<adamw> optimizer({.lr = 1e-2f});
  for (int step = 0; step < 20; ++step) {
    xt::xarray<float> xs;
    xt::xarray<int> ys;
    data(unsigned(1000 * step + comm.rank()), 8, xs, ys);  // each rank its own shard
    tensor_store grads = gradients(params, xs, ys, 0, 8);
    average_gradients(grads, comm);
    optimizer.step(params, grads);
  }
  auto after = hashes(params, comm);
  for (auto h : after) CHECK(h == after[0]);
  CHECK(after[0] != after_broadcast[0]);  // the steps did change the parameters
}

TEST_CASE("ranks whose models differ are refused on every rank, naming the parameter and the ranks") {
  mpi_communicator comm(MPI_COMM_WORLD);
  tensor_store params = initial(3);
  if (comm.rank() == 1) params.set("fc.weight", xt::xarray<float>(xt::zeros<float>({4, 5})));
  REQUIRE_THROWS_WITH(broadcast_parameters(params, comm),
                      Catch::Matchers::Contains("rank 0 has 'fc.weight: f32 [3, 5]', rank 1 'fc.weight: f32 [4, 5]'"));
  tensor_store named = initial(3);
  if (comm.rank() == 1) named.insert("fc.extra", named.at("fc.bias"));
  REQUIRE_THROWS_WITH(average_gradients(named, comm), Catch::Matchers::Contains("rank 1 'fc.extra: f32 [3]'"));
}

namespace {
/// A tape of three calls of one layer block ("h.0" to "h.2") and a head, on this rank's
/// rows: backward, then the gradients' mean over the ranks, overlapped or after the fact.
tensor_store tape_gradients(communicator& comm, bool overlapped, bool swapped = false) {
  static const auto xin = input<"x", f32>(shape<Batch, 4>);
  static auto layer = compile_block<"layer">(tanh(matmul(xin, transpose(param<"layer.w", f32>(shape<4, 4>))) +
                                                  param<"layer.b", f32>(shape<4>)), xin);
  static auto head = compile_block<"head">(mean(square(matmul(xin, param<"head.w", f32>(shape<4, 1>)))), xin);
  tensor_store params;
  std::mt19937 rng(5);  // the same parameters on every rank
  for (int i = 0; i < 3; ++i) {
    params.set("h." + std::to_string(i) + ".w", xt::xarray<float>(xt::random::randn<float>({4, 4}, 0.0f, 0.5f, rng)));
    params.set("h." + std::to_string(i) + ".b", xt::xarray<float>(xt::random::randn<float>({4}, 0.0f, 0.5f, rng)));
  }
  params.set("head.w", xt::xarray<float>(xt::random::randn<float>({4, 1}, 0.0f, 1.0f, rng)));
  std::mt19937 data_rng(100 + unsigned(comm.rank()));  // each rank its own rows
  tape<> t(params);
  auto h = t.constant(xt::xarray<float>(xt::random::randn<float>({6, 4}, 0.0f, 1.0f, data_rng)));
  for (int i : swapped ? std::vector<int>{1, 0, 2} : std::vector<int>{0, 1, 2})
    h = t.call(*layer, "h." + std::to_string(i), {{"x", h}});
  auto loss = t.call(*head, "", {{"x", h}});
  if (overlapped) {
    overlapped_gradient_mean exchange(comm, /*bucket_bytes=*/64);  // small: several buckets
    t.backward(loss, &exchange);
    exchange.finish();
  } else {
    t.backward(loss);
    average_gradients(t.gradients(), comm, 64);
  }
  return t.gradients();
}
}  // namespace

TEST_CASE("a tape's gradients averaged during its backward equal their mean taken after it") {
  mpi_communicator comm(MPI_COMM_WORLD);
  const tensor_store after = tape_gradients(comm, false), during = tape_gradients(comm, true);
  REQUIRE(after.size() == 7);
  REQUIRE(during.size() == after.size());
  for (const auto& name : after.names()) {
    INFO(name);
    REQUIRE(during.at(name).data == after.at(name).data);  // bit for bit
  }
  const auto h = hashes(during, comm);
  for (auto v : h) REQUIRE(v == h[0]);  // the same means on every rank
}

TEST_CASE("ranks whose tapes record different calls are refused before the backward, on every rank") {
  mpi_communicator comm(MPI_COMM_WORLD);
  // Rank 1 calls h.1 before h.0: its gradients become final in another order, so the
  // ranks would sum different tensors together.
  REQUIRE_THROWS_WITH(tape_gradients(comm, true, comm.rank() == 1),
                      Catch::Matchers::Contains("the ranks' models differ") && Catch::Matchers::Contains("rank 1"));
}

TEST_CASE("a parameter_store of gradients (a tape's device_gradients) averages as a tensor_store does") {
  mpi_communicator comm(MPI_COMM_WORLD);
  tensor_store named = initial(unsigned(comm.rank()) + 5);  // different on each rank
  parameter_store<> store;
  store.add_all(named);
  average_gradients(named, comm, /*bucket_bytes=*/32);
  average_gradients(store, comm, /*bucket_bytes=*/32);
  for (const char* name : {"fc.weight", "fc.bias"}) {
    INFO(name);
    REQUIRE(bool(store.get<float>(name) == named.get<float>(name)));
  }
  auto all = hashes(named, comm);
  for (auto h : all) CHECK(h == all[0]);  // every rank holds the mean
}

TEST_CASE("a communicator is the caller's: its rank and size, not a duplicate") {
  mpi_communicator comm(MPI_COMM_WORLD);
  int level = 0;
  MPI_Query_thread(&level);
  REQUIRE(comm.progress_thread() == (level == MPI_THREAD_MULTIPLE && mpi_communicator::progress_thread_wanted()));
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  REQUIRE(comm.rank() == rank);
  REQUIRE(comm.get() == MPI_COMM_WORLD);
}

TEST_CASE("ranks whose settings differ are refused on every rank naming the setting and both values") {
  mpi_communicator comm(MPI_COMM_WORLD);
  run_settings same("--");
  same.set("model", "mlp");
  same.set("lr", 1e-3f);
  check_same_settings(same, comm);  // the same everywhere: no error
  run_settings run = same;
  run.set("epochs", comm.rank() + 1);
  REQUIRE_THROWS_WITH(check_same_settings(run, comm),
                      Catch::Matchers::Contains("--epochs is 1 on rank 0, 2 on rank 1"));
  run_settings lr = same;
  lr.set("lr", comm.rank() == 1 ? 5.0f : 1e-3f);
  REQUIRE_THROWS_WITH(check_same_settings(lr, comm), Catch::Matchers::Contains("--lr is 0.001 on rank 0, 5 on rank 1"));
  run_settings extra = same;
  if (comm.rank() == 1) extra.set("resume", true);
  REQUIRE_THROWS_WITH(check_same_settings(extra, comm),
                      Catch::Matchers::Contains("--resume is (not set) on rank 0, true on rank 1"));
}

TEST_CASE("a sum that another rank never joins fails after the timeout and sleeps while it waits") {
  // On a communicator of its own: the abandoned sum stays there, not on MPI_COMM_WORLD.
  MPI_Comm own = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &own);
  {
    mpi_communicator comm(own, std::chrono::milliseconds(1500));
    static double value = 1;  // the abandoned sum may still write here
    if (comm.rank() == 1) {
      rusage before{}, after{};
      getrusage(RUSAGE_SELF, &before);
      const auto start = std::chrono::steady_clock::now();
      const std::uint64_t handle = comm.start_sum(&value, 1, dtype_tag::f64);
      REQUIRE_THROWS_WITH(comm.wait(handle), Catch::Matchers::Contains("rank 1 waited 1.5 s for the other ranks in a "
                                                                      "sum of 1 f64 values"));
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      getrusage(RUSAGE_SELF, &after);
      auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
      const double cpu = seconds(after.ru_utime) - seconds(before.ru_utime) + seconds(after.ru_stime) -
                         seconds(before.ru_stime);
      CHECK(wall >= 1.4);
      CHECK(wall < 5);
      CHECK(cpu < 0.5 * wall);  // it slept while it waited
      CHECK(comm.abandoned());
      REQUIRE_THROWS_WITH(comm.broadcast(&value, sizeof value, 0), Catch::Matchers::Contains("given up"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm.rank() == 0) {  // joins late (nonblocking, as rank 1's), so that rank 1's abandoned sum can complete
      double mine = 2;
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Iallreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_SUM, own, &request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("LUMINAL_MPI_TIMEOUT is read strictly") {
  auto with = [](const char* value) {
    setenv("LUMINAL_MPI_TIMEOUT", value, 1);
    auto t = mpi_timeout_from_environment();
    unsetenv("LUMINAL_MPI_TIMEOUT");
    return t;
  };
  CHECK(with("7") == std::chrono::seconds(7));
  for (const char* bad : {"", "0", "-1", "abc", "1e3", "2.5", "604801"}) {
    INFO(bad);
    CHECK_THROWS_WITH(with(bad), Catch::Matchers::Contains("LUMINAL_MPI_TIMEOUT must be a whole number of seconds"));
    unsetenv("LUMINAL_MPI_TIMEOUT");
  }
  CHECK(mpi_timeout_from_environment() == default_mpi_timeout);
}

namespace {
/// The scenarios of the mpi.rank_0_returns_early, mpi.rank_0_hangs and mpi.settings_differ
/// tests, each under run_on_mpi_world; CTest checks the job's output and status.
int scenario(const std::string& name, int argc, char** argv) {
  return run_on_mpi_world(argc, argv, "mpi_test", [&](communicator& comm) {
    if (name == "--settings-differ") {
      run_settings run("--");
      run.set("epochs", comm.rank() + 1);
      check_same_settings(run, comm);
      return 0;
    }
    if (comm.rank() == 0) {
      if (name == "--rank-0-hangs") std::this_thread::sleep_for(std::chrono::seconds(30));
      return 0;  // --rank-0-returns-early: rank 1 waits for a sum that rank 0 never starts
    }
    const auto start = std::chrono::steady_clock::now();
    double value = 1;
    try {
      comm.wait(comm.start_sum(&value, 1, dtype_tag::f64));
    } catch (...) {
      std::fprintf(stderr, "rank 1 gave up after %.1f s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      throw;
    }
    std::puts("rank 1 went on without rank 0");
    return 0;
  });
}
}  // namespace

int main(int argc, char** argv) {
  for (const char* name : {"--rank-0-returns-early", "--rank-0-hangs", "--settings-differ"})
    if (argc > 1 && std::strcmp(argv[1], name) == 0) return scenario(name, argc, argv);
  // --thread-single: MPI_THREAD_SINGLE, where a step advances its sums between kernels;
  // otherwise MPI_THREAD_MULTIPLE with LUMINAL_MPI_PROGRESS_THREAD=1, where the
  // communicator's progress thread does.
  const bool single = argc > 1 && std::strcmp(argv[1], "--thread-single") == 0;
  if (single) {
    MPI_Init(&argc, &argv);
    for (int a = 1; a + 1 < argc; ++a) argv[a] = argv[a + 1];
    --argc;
  } else {
    setenv("LUMINAL_MPI_PROGRESS_THREAD", "1", 1);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  if (argc > 1 && std::strcmp(argv[1], "--rank-1-dies") == 0) {
    // mpi.rank_dies: rank 1 exits in the middle of training; rank 0 waits in the
    // allreduce. MPI's error handling must end the job (CTest checks mpiexec's report).
    mpi_communicator comm(MPI_COMM_WORLD);
    tensor_store g = initial(1);
    if (comm.rank() == 1) std::_Exit(3);
    average_gradients(g, comm);
    std::puts("rank 0 went on after rank 1 died");
    MPI_Finalize();
    return 0;
  }
  Catch::Session session;
  int failed = session.run(argc, argv);  // every rank reports; the job fails if any rank fails
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
