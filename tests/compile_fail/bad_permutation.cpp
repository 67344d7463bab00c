// expect: permute needs each axis exactly once.*\(2, 3, 4\).*order \(0, 0, 1\)
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<2, 3, 4>);
  auto y = permute<0, 0, 1>(x);
  (void)y;
}
