// expect: shapes_cannot_be_broadcast_together<.*\(Batch, 3\).*\(4, 3\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto y = input<"y", f32>(shape<4, 3>);
  auto z = x * y;  // error here: Batch is not known to be 4 at compile time
  (void)z;
}
