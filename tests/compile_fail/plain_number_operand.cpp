// expect: a plain number is not an expression.*2.0_c or c<2.0>
// x * 2.0 with a plain double: refused with one message naming the spellings that work.
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
int main() {
  auto x = input<"x", f32>(shape<3>);
  auto y = x * 2.0;
  (void)y;
}
