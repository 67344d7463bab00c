// expect: shapes_cannot_be_broadcast_together<.*\(Batch, 16, 64\).*\(Batch, 16, 32\)
// at most 20 lines of at most 400 characters
// A residual connection deep in a model that adds two widths: one error at this line
// naming both shapes, not the operands' types (each spells the whole graph under it).
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 16, 64>);
  nn::LayerNorm<"ln1", 64> ln1;
  nn::Linear<"up", 64, 256> up;
  nn::Linear<"proj", 256, 64> proj;
  nn::Linear<"down", 256, 32> down;
  auto h = x + proj(gelu(up(ln1(x))));
  auto y = h + down(gelu(up(ln1(h))));  // error here: 64 + 32
  (void)y;
}
