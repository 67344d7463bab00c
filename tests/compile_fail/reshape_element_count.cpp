// expect: reshape_must_keep_the_number_of_elements<.*\(Batch, 2, 3\).*\(Batch, 5\)
// at most 20 lines of at most 400 characters
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Batch{"Batch"};
int main() {
  auto x = input<"x", f32>(shape<Batch, 2, 3>);
  auto y = reshape(x, shape<Batch, 5>);  // error here
  (void)y;
}
