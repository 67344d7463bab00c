// The models of examples/fashion_mnist.cpp, as functions of the graph mode (dropout and
// BatchNorm's batch statistics are on only in training): a 784-512-256-10 MLP, a CNN (two
// 3x3 convolutions with max-pooling, two linear layers) and, with LUMINAL_EXAMPLE_RESNET, a
// small ResNet. Parameter names are those of the torch twins in fashion_mnist_torch.py.
//
//     auto logits = fashion::cnn(nn::train);   // [Batch, 10] from input<"images"> [Batch, 784]
#pragma once
#include <luminal/nn.hpp>

namespace fashion {
using namespace luminal;

inline constexpr Dim Batch{"Batch"};


inline nn::Linear<"fc1", 784, 512> mlp_fc1;
inline nn::Linear<"fc2", 512, 256> mlp_fc2;
inline nn::Linear<"fc3", 256, 10> mlp_fc3;
inline nn::Dropout<0.2, 1> mlp_drop1;
inline nn::Dropout<0.2, 2> mlp_drop2;

template <nn::mode M>
auto mlp(M mode) {
  auto x = input<"images", f32>(shape<Batch, 784>);
  return mlp_fc3(mlp_drop2(relu(mlp_fc2(mlp_drop1(relu(mlp_fc1(x)), mode))), mode));
}

inline nn::Conv2d<"conv1", 1, 32, 3, 1, 1> cnn_conv1;
inline nn::Conv2d<"conv2", 32, 64, 3, 1, 1> cnn_conv2;
inline nn::MaxPool2d<2> cnn_pool;
inline nn::Linear<"fc1", 64 * 7 * 7, 128> cnn_fc1;
inline nn::Linear<"fc2", 128, 10> cnn_fc2;

template <nn::mode M>
auto cnn(M) {
  auto x = reshape(input<"images", f32>(shape<Batch, 784>), shape<Batch, 1, 28, 28>);
  auto features = cnn_pool(relu(cnn_conv2(cnn_pool(relu(cnn_conv1(x))))));  // [Batch, 64, 7, 7]
  return cnn_fc2(relu(cnn_fc1(reshape(features, shape<Batch, 64 * 7 * 7>))));
}

#ifdef LUMINAL_EXAMPLE_RESNET
// torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)). The
// shortcut is x itself, or, where the block changes the channels or (Stride 2) halves the
// plane, a strided 1x1 convolution and a BatchNorm under torchvision's names
// ("downsample.0", "downsample.1"). BatchNorm normalizes with the batch's statistics and
// updates its running statistics in training (nn::train), and reads them in evaluation.
template <fixed_string P, std::int64_t Cin, std::int64_t Cout, std::int64_t Stride>
struct basic_block {
  static constexpr bool projects = Stride != 1 || Cin != Cout;
  nn::Conv2d<P + ".conv1", Cin, Cout, 3, Stride, 1, false> conv1;
  nn::BatchNorm2d<P + ".bn1", Cout> bn1;
  nn::Conv2d<P + ".conv2", Cout, Cout, 3, 1, 1, false> conv2;
  nn::BatchNorm2d<P + ".bn2", Cout> bn2;
  nn::Conv2d<P + ".downsample.0", Cin, Cout, 1, Stride, 0, false> projection;
  nn::BatchNorm2d<P + ".downsample.1", Cout> projection_bn;

  template <expression X, nn::mode M>
  auto operator()(X x, M mode) const {
    auto y = bn2(conv2(relu(bn1(conv1(x), mode))), mode);
    if constexpr (projects) return relu(y + projection_bn(projection(x), mode));
    else return relu(y + x);
  }
  void initialize(tensor_store& store, std::uint64_t seed) const {
    conv1.initialize(store, seed), bn1.initialize(store, seed), conv2.initialize(store, seed);
    bn2.initialize(store, seed);
    if constexpr (projects) projection.initialize(store, seed), projection_bn.initialize(store, seed);
  }
};

// A small ResNet: a 3x3 stem of 16 channels, two downsampling BasicBlocks of 32 and 64
// channels (stride 2: 28x28 -> 14x14 -> 7x7), a depthwise 3x3 convolution (groups =
// channels) with a BatchNorm, a global average pool and a linear head; PyTorch's twin is
// ResNet in fashion_mnist_torch.py.
inline nn::Conv2d<"conv1", 1, 16, 3, 1, 1, false> rn_stem;
inline nn::BatchNorm2d<"bn1", 16> rn_stem_bn;
inline basic_block<"layer1.0", 16, 32, 2> rn_layer1;
inline basic_block<"layer2.0", 32, 64, 2> rn_layer2;
inline nn::Conv2d<"depthwise", 64, 64, 3, 1, 1, false, f32, 1, 64> rn_depthwise;
inline nn::BatchNorm2d<"depthwise_bn", 64> rn_depthwise_bn;
inline nn::AdaptiveAvgPool2d<1, 1> rn_pool;
inline nn::Linear<"fc", 64, 10> rn_fc;

template <nn::mode M>
auto resnet(M mode) {
  auto x = reshape(input<"images", f32>(shape<Batch, 784>), shape<Batch, 1, 28, 28>);
  auto stem = relu(rn_stem_bn(rn_stem(x), mode));                // [Batch, 16, 28, 28]
  auto features = rn_layer2(rn_layer1(stem, mode), mode);        // [Batch, 64, 7, 7]
  auto mixed = relu(rn_depthwise_bn(rn_depthwise(features), mode));
  return rn_fc(reshape(rn_pool(mixed), shape<Batch, 64>));
}
#endif  // LUMINAL_EXAMPLE_RESNET

}  // namespace fashion
