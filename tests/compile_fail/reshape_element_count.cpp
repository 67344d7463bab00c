// expect: reshape must keep the number of elements.*\(Batch, 2, 3\).*\(Batch, 5\)
#include <luminal/luminal.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 2, 3>);
  auto y = reshape(x, shape<Batch, 5>);
  (void)y;
}
