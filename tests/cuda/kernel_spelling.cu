// Compiled by kernel_spelling.cmake (CTest: cuda.kernel_types_spelled_exactly) through
// nvcc's front ends only; nothing runs. Its kernels hold constants that no 6-digit decimal
// spells exactly (exp's log2(e), 0.1, GELU's sqrt(2 / pi)) and a pad of 0.1, so the check
// sees how nvcc writes them into the host code it generates.
#include <luminal/backends/cuda.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/luminal.hpp>

using namespace luminal;
constexpr Dim N{"N"};

template <class B>
int run() {
  auto x = input<"x", f32>(shape<N, 3>);
  auto y = exp(x) * 0.1_c + gelu(x) + sum<1>(pad<1, 1, 1, 0.1>(x), keepdim);
  auto prog = compile<B>(y);
  prog.bind("x", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  prog.run();
  return 0;
}

int main() { return run<cuda>(); }
