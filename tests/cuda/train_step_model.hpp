// The small training step of train_step_cuda_test.cu: a two-layer MLP with SGD and
// momentum. The GPU runs it in that file; the host's reference run is compiled by g++ in
// train_step_host_reference.cpp, so that nvcc never compiles the host program as well.
// (AdamW's update runs on the device in tape_device_test.cpp: in this compiled step it
// would put nvcc's front end over the test build's memory budget.)
#pragma once

#include <map>
#include <string>
#include <vector>
#include <xtensor/xarray.hpp>

#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>

namespace test::train_step_model {

inline constexpr luminal::Dim Batch{"Batch"};

/// The parameter names of the model, in the order they are checked.
inline const std::vector<std::string> parameter_names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

/// The model's two layers, its loss, and its parameters' initial values (seed 11).
using fc1_layer = luminal::nn::Linear<"fc1", 64, 128>;
using fc2_layer = luminal::nn::Linear<"fc2", 128, 1>;
inline auto model_loss() {
  using namespace luminal;
  auto x = input<"x", f32>(shape<Batch, 64>);
  auto target = input<"target", f32>(shape<Batch, 1>);
  return nn::mse(fc2_layer{}(relu(fc1_layer{}(x))), target);
}
inline luminal::tensor_store initial_parameters() {
  luminal::tensor_store init;
  fc1_layer{}.initialize(init, 11);
  fc2_layer{}.initialize(init, 11);
  return init;
}
inline constexpr luminal::sgd optimizer{.lr = 1e-2f, .momentum = 0.9f};

/// The training step on backend B, its parameters initialized from seed 11.
template <class B>
auto make_step() {
  auto step = luminal::compile_train_step<B>(model_loss(), optimizer);
  step.store().assign(initial_parameters());
  return step;
}

/// The same step, data parallel over `comm` (the gradients' mean over its ranks).
template <class B>
auto make_data_parallel_step(luminal::communicator& comm) {
  auto step = luminal::compile_train_step<B>(model_loss(), optimizer, luminal::data_parallel{comm});
  step.store().assign(initial_parameters());
  return step;
}

/// What the host's step gives for the same inputs: the loss of each run, then the parameters.
struct host_run {
  std::vector<float> losses;
  std::map<std::string, xt::xarray<float>> parameters;
};

/// Runs the host's step `runs` times on (x, target). In train_step_host_reference.cpp.
host_run run_on_host(const xt::xarray<float>& x, const xt::xarray<float>& target, int runs);

}  // namespace test::train_step_model
