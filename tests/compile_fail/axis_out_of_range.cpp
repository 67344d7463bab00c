// expect: axis is out of range for this shape.*\(Batch, 3\)
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto s = sum<2>(x);
  (void)s;
}
