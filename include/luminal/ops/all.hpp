// Every op of the library, for headers and programs that build graphs from any of them
// (modules, blocks, the umbrella luminal.hpp):
//
//     #include <luminal/ops/all.hpp>
//     auto y = softmax<-1>(matmul(x, w));
#pragma once

#include "binary.hpp"
#include "cached_attention.hpp"
#include "cast.hpp"
#include "composite.hpp"
#include "concat.hpp"
#include "cumulative.hpp"
#include "custom.hpp"
#include "einsum.hpp"
#include "expand.hpp"
#include "flip.hpp"
#include "gather.hpp"
#include "iota.hpp"
#include "matmul.hpp"
#include "permute.hpp"
#include "pow.hpp"
#include "quantized.hpp"
#include "reduce.hpp"
#include "reductions.hpp"
#include "reshape.hpp"
#include "rope.hpp"
#include "rounding.hpp"
#include "scan.hpp"
#include "scatter.hpp"
#include "slice.hpp"
#include "sort.hpp"
#include "special.hpp"
#include "squeeze.hpp"
#include "stop_gradient.hpp"
#include "take_along.hpp"
#include "unfold.hpp"
#include "unary.hpp"
#include "where.hpp"
