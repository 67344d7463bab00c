// expect: expand can only stretch extents of size 1.*\(2, 3\).*\(4, 3\)
#include <luminal/luminal.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<2, 3>);
  auto y = expand(x, shape<4, 3>);
  (void)y;
}
