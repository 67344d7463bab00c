// Model A of issue 17: the training script a PyTorch user ports first, as the program
// whose compile time `compile_time.sh` measures (and a run of it, so the program is real).
// A residual MLP with LayerNorm and GELU, cross-entropy, AdamW; 20 steps on random data.
//
//     ./build/benchmarks/model_a            # prints the loss every 5 steps
#include <cstdio>
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>
#include <random>

using namespace luminal;
constexpr Dim Batch{"Batch"};

int main() {
  nn::Linear<"fc1", 784, 256> fc1;
  nn::LayerNorm<"ln", 256> ln;
  nn::Linear<"fc2", 256, 256> fc2;
  nn::Linear<"fc3", 256, 10> fc3;
  auto x = input<"x", f32>(shape<Batch, 784>);
  auto labels = input<"labels", i32>(shape<Batch>);
  auto h = gelu(ln(fc1(x)));
  auto residual = h + gelu(fc2(h));
  auto loss = nn::cross_entropy(fc3(residual), labels);
  auto step = compile_train_step(loss, adamw{.lr = 1e-3f, .weight_decay = 0.01f});

  tensor_store init;
  fc1.initialize(init, 1);
  ln.initialize(init, 1);
  fc2.initialize(init, 1);
  fc3.initialize(init, 1);
  step.store().assign(init);

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  xt::xarray<f32> images = xt::xarray<f32>::from_shape({64, 784});
  xt::xarray<i32> classes = xt::xarray<i32>::from_shape({64});
  for (auto& v : images) v = normal(rng);
  for (std::size_t i = 0; i < classes.size(); ++i) classes(i) = static_cast<i32>(i % 10);
  step.bind("x", images);
  step.bind("labels", classes);
  for (int k = 1; k <= 20; ++k) {
    float value = step.run();
    if (k % 5 == 0) std::printf("step %2d  loss %.4f\n", k, value);
  }
}
