// GPU-only tests of the NCCL communicator ([nccl]), run by luminal_nccl_tests (which skips,
// exit 77, without a GPU). One rank on one GPU: every sum is NCCL's (its kernels, the
// events that order them against the program's stream, their capture into a CUDA Graph),
// and the mean over one rank must leave the step exactly the plain step.
#include <cuda_runtime.h>

#include <luminal/backends/cuda.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/distributed/nccl.hpp>

#include "test_support.hpp"
#include "train_step_model.hpp"

using namespace luminal;
using namespace test::train_step_model;

TEST_CASE("nccl: one rank sums device and host memory, broadcasts and gathers", "[nccl]") {
  nccl_communicator comm(nccl_communicator::one_rank);
  REQUIRE(comm.rank() == 0);
  REQUIRE(comm.size() == 1);
  REQUIRE(comm.sums_device_memory());

  std::vector<float> values(1000);
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = 0.5f * float(k) - 3.0f;
  cuda gpu;
  auto* on_device = static_cast<float*>(gpu.allocate(values.size() * sizeof(float)));
  gpu.to_device(on_device, values.data(), values.size() * sizeof(float));
  const std::uint64_t handle = comm.start_device_sum(on_device, values.size(), dtype_tag::f32, gpu.stream());
  REQUIRE(handle != 0);
  comm.wait_on_stream(handle, gpu.stream());
  std::vector<float> back(values.size(), -1.0f);
  gpu.to_host(back.data(), on_device, back.size() * sizeof(float));  // after the sum, on the stream
  REQUIRE(back == values);

  double host_value = 2.5;
  comm.wait(comm.start_sum(&host_value, 1, dtype_tag::f64));
  REQUIRE(host_value == 2.5);
  std::int64_t step = 42;
  comm.broadcast(&step, sizeof step, 0);
  REQUIRE(step == 42);
  comm.broadcast(on_device, values.size() * sizeof(float), 0);  // device memory in place
  gpu.to_host(back.data(), on_device, back.size() * sizeof(float));
  REQUIRE(back == values);
  REQUIRE(comm.all_gather("fc.weight: f32 [4, 3]\n") == std::vector<std::string>{"fc.weight: f32 [4, 3]\n"});
  REQUIRE(comm.all_gather("") == std::vector<std::string>{""});
  REQUIRE(comm.any(true));
  REQUIRE_FALSE(comm.any(false));
  gpu.deallocate(on_device);
}

TEMPLATE_TEST_CASE("nccl: a data-parallel step over one rank matches the host's step", "[nccl]", cuda,
                   cuda_graph) {
  constexpr int steps = 6;
  nccl_communicator comm(nccl_communicator::one_rank);
  auto gpu = make_data_parallel_step<TestType>(comm);
  auto xv = test::random_array<float>({32, 64}, 12);
  auto tv = test::random_array<float>({32, 1}, 13);
  const host_run cpu = run_on_host(xv, tv, 1 + steps);
  gpu.bind("x", xv);
  gpu.bind("target", tv);
  for (int i = 0; i <= steps; ++i) {
    const float g = gpu.run(), c = cpu.losses[std::size_t(i)];
    INFO("step " << i);
    REQUIRE(std::abs(g - c) <= 1e-4f * (1 + std::abs(c)));
  }
  for (const auto& name : parameter_names)
    test::require_close(gpu.store().template get<float>(name), cpu.parameters.at(name), 1e-4, 1e-5);
  if constexpr (TestType::graphs) REQUIRE(gpu.gradient_program().backend().graph_launches() >= std::size_t(steps - 2));
}

TEST_CASE("nccl: a GPU step refuses a communicator that sums host memory", "[nccl]") {
  local_communicator host_only;
  REQUIRE_THROWS_WITH(make_data_parallel_step<cuda>(host_only),
                      Catch::Matchers::Contains("needs a communicator that sums device memory"));
}
