// expect: shapes cannot be broadcast together.*\(2, 3\).*\(4, 3\)
#include <luminal/luminal.hpp>
using namespace luminal;
int main() {
  auto a = input<"a", f32>(shape<2, 3>);
  auto b = input<"b", f32>(shape<4, 3>);
  auto c = a + b;  // must not compile
  (void)c;
}
