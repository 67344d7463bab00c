// expect: this op needs a floating-point element type.*log2.*i32
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", i32>(shape<3>);
  auto y = log(x);
  (void)y;
}
