#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <xtensor/xarray.hpp>
#include <iostream>
using namespace luminal;
constexpr Dim N{"N"};
int main() {
  auto x = input<"x", f32>(shape<N, 3>);
  auto y = x * x + 1.0_c;
  auto prog = compile(y);
  prog.bind("x", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  prog.run();
  xt::xarray<float> out = prog.output<0>();
  if (out.shape()[0] != 2 || out(1, 2) != 37.0f) { std::cerr << "wrong result\n"; return 1; }
  std::cout << "consumer ok\n";
}
