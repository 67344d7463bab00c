// expect: both operands must have the same element type.*f32.*f64
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<3>);
  auto y = input<"y", f64>(shape<3>);
  auto z = x + y;
  (void)z;
}
