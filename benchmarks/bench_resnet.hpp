// The ResNet of examples/fashion_mnist.cpp (examples/fashion_models.hpp, compiled in there
// with LUMINAL_EXAMPLE_RESNET) as a model of train_step_bench: `--model resnet`. Its
// training step is heavy to compile (benchmarks/RESULTS.md has the figure), so
// train_step_bench compiles it only with LUMINAL_BENCH_RESNET (CMake: -DLUMINAL_BENCH_RESNET=ON).
//
// The graph is the example's own: input "images" [Batch, 784] (reshaped to
// [Batch, 1, 28, 28]), BatchNorm in training mode (the batch's statistics, and the running
// statistics updated in the step: buffers in step.store(), initialized by the modules'
// initialize()), nn::cross_entropy on "labels" [Batch] (i32). Its PyTorch twin is ResNet in
// examples/fashion_mnist_torch.py, under the same parameter names.
//
//     bench::resnet model;
//     auto step = compile_train_step(model.loss(), adam{.lr = 1e-3f});
//     model.initialize(store, 1);
//     step.bind(bench::resnet::images, x);
#pragma once
#include <cstdint>
#include <luminal/nn.hpp>

#ifndef LUMINAL_EXAMPLE_RESNET
#define LUMINAL_EXAMPLE_RESNET 1
#endif
#include "../examples/fashion_models.hpp"

namespace bench {

/// conv3x3(1->16) BN ReLU, BasicBlock(16->32, stride 2), BasicBlock(32->64, stride 2),
/// depthwise conv3x3(64, groups 64) BN ReLU, global average pool, Linear(64, 10).
struct resnet {
  static constexpr const char* images = "images";  // the name of its [Batch, 784] input

  auto loss() const {
    using namespace luminal;
    return nn::cross_entropy(fashion::resnet(nn::train), input<"labels", i32>(shape<fashion::Batch>));
  }
  /// Parameters and BatchNorm's buffers (running_mean 0, running_var 1, num_batches_tracked 0).
  void initialize(luminal::tensor_store& store, std::uint64_t seed) const {
    using namespace fashion;
    rn_stem.initialize(store, seed), rn_stem_bn.initialize(store, seed), rn_layer1.initialize(store, seed);
    rn_layer2.initialize(store, seed), rn_depthwise.initialize(store, seed);
    rn_depthwise_bn.initialize(store, seed), rn_fc.initialize(store, seed);
  }
};

}  // namespace bench
