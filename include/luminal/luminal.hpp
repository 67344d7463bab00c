// luminal: typed tensor expressions with compile-time shapes, compiled to fused kernels.
//
//     #include <luminal/luminal.hpp>
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

#include "dot.hpp"
#include "grad/forward.hpp"
#include "grad/reverse.hpp"
#include "ops/binary.hpp"
#include "ops/cast.hpp"
#include "ops/composite.hpp"
#include "ops/concat.hpp"
#include "ops/custom.hpp"
#include "ops/expand.hpp"
#include "ops/gather.hpp"
#include "ops/iota.hpp"
#include "ops/matmul.hpp"
#include "ops/permute.hpp"
#include "ops/pow.hpp"
#include "ops/reduce.hpp"
#include "ops/reductions.hpp"
#include "ops/reshape.hpp"
#include "ops/rounding.hpp"
#include "ops/slice.hpp"
#include "ops/special.hpp"
#include "ops/squeeze.hpp"
#include "ops/stop_gradient.hpp"
#include "ops/unfold.hpp"
#include "ops/unary.hpp"
#include "ops/where.hpp"
#include "program.hpp"

#include <luminal/backends/host.hpp>
