// expect: concat along a symbolic axis needs extents that add up to one extent
// at most 30 lines of at most 600 characters
// Past + Seq is no single extent, so a concat of (Past, 4) and (Seq, 4) is refused with
// one sentence saying which joins are supported.
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
using namespace luminal;
constexpr Dim Past{"Past"};
constexpr Dim Seq{"Seq"};
int main() {
  auto y = concat<0>(input<"a", f32>(shape<Past, 4>), input<"b", f32>(shape<Seq, 4>));
  (void)y;
}
