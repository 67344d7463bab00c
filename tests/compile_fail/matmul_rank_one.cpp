// expect: matmul_needs_shapes_like_m_by_k_and_k_by_n<.*\(3\).*\(3, 5\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<3>);
  auto w = param<"w", f32>(shape<3, 5>);
  auto y = matmul(x, w);  // error here
  (void)y;
}
