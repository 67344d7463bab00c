// expect: matmul needs operands of rank 2 or more.*\(3\).*\(3, 5\)
#include <luminal/luminal.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<3>);
  auto w = param<"w", f32>(shape<3, 5>);
  auto y = matmul(x, w);
  (void)y;
}
