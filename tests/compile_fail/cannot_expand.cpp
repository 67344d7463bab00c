// expect: expand_can_only_stretch_extents_of_size_1<.*\(2, 3\).*\(4, 3\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<2, 3>);
  auto y = expand(x, shape<4, 3>);  // error here
  (void)y;
}
