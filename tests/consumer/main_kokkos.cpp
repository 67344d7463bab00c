// The installed luminal::kokkos component from an outside project: a program on Kokkos'
// default execution space that reads a Kokkos::View in place and writes its output into
// another (bind_view, write_output_to).
#include <Kokkos_Core.hpp>
#include <iostream>
#include <luminal/backends/kokkos.hpp>
#include <luminal/luminal.hpp>
using namespace luminal;
int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Kokkos::View<float**, Kokkos::LayoutRight> x("x", 2, 3), y("y", 2, 3);
  Kokkos::parallel_for("fill", 6, KOKKOS_LAMBDA(const int i) { x(i / 3, i % 3) = float(i + 1); });
  Kokkos::fence();
  auto prog = compile<kokkos<>>(input<"x", f32>(shape<2, 3>) * input<"x", f32>(shape<2, 3>) + 1.0_c);
  bind_view(prog, "x", x);
  prog.write_output_to<0>(y.data());
  prog.run();
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
  if (host(1, 2) != 37.0f) {
    std::cerr << "wrong result: " << host(1, 2) << "\n";
    return 1;
  }
  std::cout << "consumer kokkos ok (" << Kokkos::DefaultExecutionSpace::name() << ")\n";
}
