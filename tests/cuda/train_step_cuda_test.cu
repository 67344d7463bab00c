// GPU-only test of the CUDA backend ([cuda]): a compiled training step on cuda and
// cuda_graph matches the host's, and copies no parameters between host and device. (Split
// from cuda_test.cu: nvcc needed 2.6 GB for the two together.) Run by luminal_cuda_tests,
// which skips (exit 77) without a GPU.
#include "test_support.hpp"

#include <luminal/nn.hpp>
#include <luminal/train.hpp>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

template <class B>
auto make_step() {
  nn::Linear<"fc1", 64, 128> fc1;
  nn::Linear<"fc2", 128, 1> fc2;
  auto x = input<"x", f32>(shape<Batch, 64>);
  auto target = input<"target", f32>(shape<Batch, 1>);
  auto loss = nn::mse(fc2(relu(fc1(x))), target);
  auto step = compile_train_step<B>(loss, adamw{.lr = 1e-2f});
  tensor_store init;
  fc1.initialize(init, 11);
  fc2.initialize(init, 11);
  step.store().assign(init);
  return step;
}
}  // namespace

TEMPLATE_TEST_CASE("cuda: a training step matches the host and moves no parameters", "[cuda]", cuda, cuda_graph) {
  auto gpu = make_step<TestType>();
  auto cpu = make_step<host>();
  auto xv = test::random_array<float>({32, 64}, 12);
  auto tv = test::random_array<float>({32, 1}, 13);
  gpu.bind("x", xv); gpu.bind("target", tv);
  cpu.bind("x", xv); cpu.bind("target", tv);
  REQUIRE(std::abs(gpu.run() - cpu.run()) <= 1e-5f);  // plans and allocates
  const auto& backend = gpu.program().backend();
  const std::size_t to_device = backend.bytes_to_device(), to_host = backend.bytes_to_host();
  std::size_t state_bytes = 0;
  for (const auto& [name, slot] : gpu.store()) state_bytes += slot.bytes;
  constexpr int steps = 6;
  for (int i = 0; i < steps; ++i) {
    float g = gpu.run(), c = cpu.run();
    REQUIRE(std::abs(g - c) <= 1e-4f * (1 + std::abs(c)));
  }
  // Per step the buffer table, the error flag and the optimizer's scalars go down; the
  // loss and the error flag come back. Parameters and optimizer state stay on the GPU.
  const std::size_t down = (backend.bytes_to_device() - to_device) / steps;
  const std::size_t up = (backend.bytes_to_host() - to_host) / steps;
  constexpr std::size_t nodes = decltype(gpu)::program_type::node_count;
  INFO("bytes per step to the device " << down << ", to the host " << up << "; parameters and state "
                                       << state_bytes << "; nodes " << nodes);
  REQUIRE(up == sizeof(float) + sizeof(int));
  REQUIRE(down <= nodes * sizeof(void*) + sizeof(int) + 32 * sizeof(float));
  REQUIRE(down < state_bytes / 10);
  for (auto name : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    test::require_close(gpu.store().template get<float>(name), cpu.store().template get<float>(name), 1e-4, 1e-5);
  if constexpr (TestType::graphs) REQUIRE(backend.graph_launches() >= std::size_t(steps - 2));
}
