// libFuzzer harness: any bytes loaded as a checkpoint into a compiled training step
// (train_step::load_state) and into a parameter_optimizer (load_state, then one step) must
// either be refused with checkpoint_error (or input_error for gradients that do not fit,
// run_error for non-finite values), or train: no crash, leak or undefined behaviour.
//
//     ./fuzz_checkpoint -max_len=65536 corpus/checkpoint
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>

#include "fuzz_input_file.hpp"

namespace {
using namespace luminal;
constexpr Dim Batch{"Batch"};
nn::Linear<"fc", 4, 3> fc;

auto make_step() {
  auto x = input<"x", f32>(shape<Batch, 4>);
  auto labels = input<"labels", i32>(shape<Batch>);
  return compile_train_step(nn::cross_entropy(fc(x), labels), adamw{.lr = 1e-2f});
}

/// One training step from `saved`; returns normally when it is refused as it should be.
void train_from(const tensor_store& saved) {
  static auto step = make_step();
  tensor_store initial;
  fc.initialize(initial, 1);
  step.store().assign(initial);
  step.set_step_count(0);
  try {
    step.load_state(saved, "the fuzz input");
  } catch (const checkpoint_error&) {
    return;
  }
  const xt::xarray<float> x = {{1, 2, 3, 4}, {-1, 0, 1, 2}};
  const xt::xarray<std::int32_t> y = {0, 2};
  step.bind("x", x);
  step.bind("labels", y);
  try {
    (void)step.run();
  } catch (const run_error&) {  // a NaN or infinite loss from the loaded values
  }
}

/// parameter_optimizer over the checkpoint's F32 tensors (its "optimizer.*" state loaded).
void optimize_from(const tensor_store& saved) {
  parameter_optimizer<adamw> optimizer({.lr = 1e-2f});
  try {
    optimizer.load_state(saved);
  } catch (const checkpoint_error&) {
    return;
  }
  tensor_store parameters, gradients;
  for (const auto& [name, entry] : saved) {
    if (name.starts_with("optimizer.") || entry.dtype != dtype_tag::f32) continue;
    parameters.insert(name, entry);
    tensor_store::entry ones = entry;
    for (std::size_t i = 0; i < ones.data.size() / 4; ++i) {
      const float one = 1.0f;
      std::memcpy(ones.data.data() + 4 * i, &one, 4);
    }
    gradients.insert(name, std::move(ones));
  }
  try {
    (void)optimizer.step(parameters, gradients);
  } catch (const checkpoint_error&) {  // state of another shape than its parameter
  } catch (const run_error&) {         // a non-finite gradient norm
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tensor_store saved;
  try {
    saved = load_safetensors(fuzz::input_file(data, size));
  } catch (const checkpoint_error&) {
    return 0;
  }
  train_from(saved);
  optimize_from(saved);
  return 0;
}
