// expect: the_input_shape_does_not_fit_the_module<.*"fc3".*\(Batch, 128\).*\(\.\.\., 100\)
// at most 20 lines of at most 400 characters
// A training script of the size of issue 17's model A (three Linear, LayerNorm, GELU,
// cross-entropy, AdamW) whose last layer is declared for 100 features where 128 arrive:
// the error is one sentence at this file's line, with the shape and the module's size,
// however deep the graph that feeds the layer.
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 784>);
  auto labels = input<"labels", i32>(shape<Batch>);
  nn::Linear<"fc1", 784, 256> fc1;
  nn::LayerNorm<"ln", 256> ln;
  nn::Linear<"fc2", 256, 128> fc2;
  nn::Linear<"fc3", 100, 10> fc3;
  auto h = gelu(fc2(gelu(ln(fc1(x)))));
  auto logits = fc3(h);  // error here: fc2 gives 128 features
  auto step = compile_train_step(nn::cross_entropy(logits, labels), adamw{.lr = 1e-3f});
  (void)step;
}
