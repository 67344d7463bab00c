// The reference models of the training-step benchmarks, defined once so that every
// benchmark measures the same graph: inputs "x" [Batch, 784] (f32) and "labels" [Batch]
// (i32), nn::cross_entropy as the loss.
//
//     bench::cnn model;
//     auto step = compile_train_step(model.loss(), adam{.lr = 1e-3f});
//     model.initialize(store, 1);
#pragma once
#include <cstdint>
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>

namespace bench {

inline constexpr luminal::Dim Batch{"Batch"};

/// MLP 784-512-512-10 with ReLU.
struct mlp {
  luminal::nn::Linear<"fc1", 784, 512> fc1;
  luminal::nn::Linear<"fc2", 512, 512> fc2;
  luminal::nn::Linear<"fc3", 512, 10> fc3;

  auto loss() const {
    using namespace luminal;
    auto x = input<"x", f32>(shape<Batch, 784>);
    return nn::cross_entropy(fc3(relu(fc2(relu(fc1(x))))), input<"labels", i32>(shape<Batch>));
  }
  void initialize(luminal::tensor_store& store, std::uint64_t seed) const {
    fc1.initialize(store, seed), fc2.initialize(store, seed), fc3.initialize(store, seed);
  }
};

/// The CNN of examples/fashion_mnist.cpp: Conv2d(1, 32, 3, 1, 1) ReLU MaxPool2d(2)
/// Conv2d(32, 64, 3, 1, 1) ReLU MaxPool2d(2) flatten Linear(3136, 128) ReLU Linear(128, 10),
/// on x reshaped to [Batch, 1, 28, 28].
struct cnn {
  luminal::nn::Conv2d<"conv1", 1, 32, 3, 1, 1> conv1;
  luminal::nn::Conv2d<"conv2", 32, 64, 3, 1, 1> conv2;
  luminal::nn::MaxPool2d<2> pool;
  luminal::nn::Linear<"fc1", 64 * 7 * 7, 128> fc1;
  luminal::nn::Linear<"fc2", 128, 10> fc2;

  auto loss() const {
    using namespace luminal;
    auto x = reshape(input<"x", f32>(shape<Batch, 784>), shape<Batch, 1, 28, 28>);
    auto features = pool(relu(conv2(pool(relu(conv1(x))))));  // [Batch, 64, 7, 7]
    auto logits = fc2(relu(fc1(reshape(features, shape<Batch, 64 * 7 * 7>))));
    return nn::cross_entropy(logits, input<"labels", i32>(shape<Batch>));
  }
  void initialize(luminal::tensor_store& store, std::uint64_t seed) const {
    conv1.initialize(store, seed), conv2.initialize(store, seed), fc1.initialize(store, seed), fc2.initialize(store, seed);
  }
};

}  // namespace bench
