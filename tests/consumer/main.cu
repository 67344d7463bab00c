// The installed luminal::cuda, used from an outside project (install.consumer builds this
// when luminal was built with CUDA). Without a GPU it has been compiled and linked, which
// is what the test can check; with one it also runs a program on the device.
#include <luminal/backends/cuda.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/luminal.hpp>
#include <xtensor/xarray.hpp>
#include <iostream>
using namespace luminal;
constexpr Dim N{"N"};
int main() {
  if (cuda::device_count() == 0) {
    std::cout << "consumer cuda: no CUDA device; compiled and linked\n";
    return 0;
  }
  auto x = input<"x", f32>(shape<N, 3>);
  auto prog = compile<cuda>(x * x + 1.0_c);
  prog.bind("x", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  prog.run();
  xt::xarray<float> out = prog.output<0>();
  if (out.shape()[0] != 2 || out(1, 2) != 37.0f) { std::cerr << "wrong result on the GPU\n"; return 1; }
  std::cout << "consumer cuda ok\n";
}
