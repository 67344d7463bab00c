// expect: slice bounds must satisfy.*\(2, 7\)
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<2, 7>);
  auto y = slice<1, 3, 9>(x);
  (void)y;
}
