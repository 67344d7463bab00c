// expect: reshape_must_keep_the_number_of_elements<.*\(T\+1, 4\).*\(T, 4\)
// at most 20 lines of at most 400 characters
// Element counts of symbolic shapes compare as polynomials: (T+1)*4 is 1*(T+1)*4 and
// 4*T+4, never T*4, so a reshape that drops the padded row is refused at the caller.
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim T{"T"};
int main() {
  auto padded = pad<0, 0, 1>(input<"x", f32>(shape<T, 4>));
  auto y = reshape(padded, shape<T, 4>);  // error here
  (void)y;
}
