// expect: cumulative ops .*do not take bf16 or f16 yet.*cast<f32>
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
int main() {
  auto x = input<"x", bf16>(shape<3, 4>);
  auto y = cumsum<1>(x);
  (void)y;
}
