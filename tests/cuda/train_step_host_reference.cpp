// The host's run of train_step_model.hpp's training step, compiled by g++ into
// luminal_cuda_tests: the reference train_step_cuda_test.cu compares the GPU against.
#include "train_step_model.hpp"

namespace test::train_step_model {

host_run run_on_host(const xt::xarray<float>& x, const xt::xarray<float>& target, int runs) {
  auto step = make_step<luminal::host>();
  step.bind("x", x);
  step.bind("target", target);
  host_run out;
  for (int i = 0; i < runs; ++i) out.losses.push_back(step.run());
  for (const auto& name : parameter_names) out.parameters[name] = step.store().template get<float>(name);
  return out;
}

}  // namespace test::train_step_model
