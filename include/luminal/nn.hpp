// luminal::nn: modules, losses and initializers with torch.nn's names and layouts.
//
//     #include <luminal/nn.hpp>
//     using namespace luminal;
//     constexpr Dim Batch{"Batch"};
//     nn::Conv2d<"conv1", 1, 8, 3, 1, 1> conv1;
//     nn::MaxPool2d<2> pool;
//     nn::Flatten flatten;
//     nn::Linear<"fc1", 8 * 14 * 14, 10> fc1;
//     auto x = input<"x", f32>(shape<Batch, 1, 28, 28>);
//     auto logits = fc1(flatten(pool(relu(conv1(x)))));
//     auto loss = nn::cross_entropy(logits, input<"labels", i32>(shape<Batch>));
//     tensor_store store;
//     conv1.initialize(store, 42);
//     fc1.initialize(store, 42);
//
// Also here: nn::causal_mask and the attention modules (nn/attention.hpp). The Llama
// decoder from GGUF files is nn/llama.hpp, included on its own.
#pragma once

#include "luminal.hpp"
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/batch_norm.hpp"
#include "nn/conv.hpp"
#include "nn/conv_transpose.hpp"
#include "nn/dropout.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/losses.hpp"
#include "nn/module.hpp"
#include "nn/norm.hpp"
#include "nn/pool.hpp"
#include "nn/rnn.hpp"
