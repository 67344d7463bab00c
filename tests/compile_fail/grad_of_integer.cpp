// expect: a gradient exists only with respect to f32 or f64 leaves.*ids.*i32
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  // An integer input reaches the loss through a cast, but has no gradient.
  auto ids = input<"ids", i32>(shape<Batch, 3>);
  auto w = param<"w", f32>(shape<3>);
  auto loss = sum(cast<f32>(ids) * w);
  auto d = grad(loss, ids);
  (void)d;
}
