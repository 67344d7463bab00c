// luminal: typed tensor expressions with compile-time shapes, compiled to fused kernels.
//
//     #include <luminal/luminal.hpp>
//     #include <luminal/backends/host.hpp>   // a backend: host threads + OpenBLAS (or kokkos.hpp, cuda.hpp)
//     using namespace luminal;
//     constexpr Dim Batch{"Batch"};
//     auto x = input<"x", f32>(shape<Batch, 784>);
//     auto w = param<"w", f32>(shape<784, 10>);
//     auto y = softmax<-1>(matmul(x, w));
//     auto prog = compile(y);          // host threads + OpenBLAS
//     prog.bind("x", images); prog.bind("w", weights);
//     prog.run();
//     xt::xarray<float> probabilities = prog.output<0>();
#pragma once

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "runtime/dot.hpp"
#include "grad/forward.hpp"
#include "grad/reverse.hpp"
#include "ops/all.hpp"
#include "runtime/program.hpp"

