// expect: matmul_needs_shapes_like_m_by_k_and_k_by_n<.*\(Batch, 3\).*\(4, 5\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 3>);
  auto w = param<"w", f32>(shape<4, 5>);
  auto y = matmul(x, w);  // error here: 3 != 4
  (void)y;
}
