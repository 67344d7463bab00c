// expect: shapes_cannot_be_broadcast_together<.*\(2, 3\).*\(4, 3\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
int main() {
  auto a = input<"a", f32>(shape<2, 3>);
  auto b = input<"b", f32>(shape<4, 3>);
  auto c = a + b;  // error here
  (void)c;
}
