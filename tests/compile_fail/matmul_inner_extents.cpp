// expect: matmul needs the last extent of the left operand.*\(Batch, 3\).*\(4, 5\)
#include <luminal/luminal.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = param<"w", f32>(shape<4, 5>);
  auto y = matmul(x, w);  // 3 != 4: must not compile
  (void)y;
}
