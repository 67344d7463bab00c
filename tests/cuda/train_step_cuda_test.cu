// GPU-only test of the CUDA backend ([cuda]): a compiled training step on cuda and
// cuda_graph matches the host's, and copies no parameters between host and device. The
// host's run is compiled by g++ (train_step_host_reference.cpp): nvcc needed 2.4 GB for
// both programs in one file. Run by luminal_cuda_tests, which skips (exit 77) without a GPU.
#include "test_support.hpp"
#include "train_step_model.hpp"

using namespace luminal;
using namespace test::train_step_model;

TEMPLATE_TEST_CASE("cuda: a training step matches the host and moves no parameters", "[cuda]", cuda, cuda_graph) {
  constexpr int steps = 6;
  auto gpu = make_step<TestType>();
  auto xv = test::random_array<float>({32, 64}, 12);
  auto tv = test::random_array<float>({32, 1}, 13);
  const host_run cpu = run_on_host(xv, tv, 1 + steps);
  gpu.bind("x", xv); gpu.bind("target", tv);
  REQUIRE(std::abs(gpu.run() - cpu.losses[0]) <= 1e-5f);  // plans and allocates
  // A step is two programs (the gradients, then the update), each on a backend object of its own.
  const auto& gradients = gpu.gradient_program().backend();
  const auto& update = gpu.update_program().backend();
  auto bytes_to_device = [&] { return gradients.bytes_to_device() + update.bytes_to_device(); };
  auto bytes_to_host = [&] { return gradients.bytes_to_host() + update.bytes_to_host(); };
  const std::size_t to_device = bytes_to_device(), to_host = bytes_to_host();
  std::size_t state_bytes = 0;
  for (const auto& [name, slot] : gpu.store()) state_bytes += slot.bytes;
  for (int i = 1; i <= steps; ++i) {
    float g = gpu.run(), c = cpu.losses[std::size_t(i)];
    REQUIRE(std::abs(g - c) <= 1e-4f * (1 + std::abs(c)));
  }
  // Per step the optimizer's scalars (and a buffer table, if one changed) go down, and the
  // loss comes back; a program that gathers also sends and reads an error flag.
  // Parameters and optimizer state stay on the GPU.
  const std::size_t down = (bytes_to_device() - to_device) / steps;
  const std::size_t up = (bytes_to_host() - to_host) / steps;
  using step_type = decltype(gpu);
  constexpr std::size_t nodes =
      step_type::gradient_program_type::node_count + step_type::update_program_type::node_count;
  constexpr std::size_t flag = step_type::gradient_program_type::checks_indices ? sizeof(int) : 0;
  INFO("bytes per step to the device " << down << ", to the host " << up << "; parameters and state "
                                       << state_bytes << "; nodes " << nodes);
  REQUIRE(up == sizeof(float) + flag);
  REQUIRE(down <= nodes * sizeof(void*) + flag + 32 * sizeof(float));
  REQUIRE(down < state_bytes / 10);
  for (const auto& name : parameter_names)
    test::require_close(gpu.store().template get<float>(name), cpu.parameters.at(name), 1e-4, 1e-5);
  if constexpr (TestType::graphs) REQUIRE(gradients.graph_launches() >= std::size_t(steps - 2));
}
