// What every instruction set's quantized-matmul kernels share, written once: the loop that
// runs activation rows in tiles of up to Max rows (the last tile has the rest; each tile
// size is its own instantiation, so that a kernel's accumulators stay in registers), the
// dispatch from a runtime weight format to the kernel instantiated for it, and the GCC
// warnings that its own intrinsics set off.
//
//     using namespace quant_kernels;
//     with_block_format(f, [&]<quant_format F>(format_constant<F>) {
//       for_each_tile<4>(M, [&]<int R>(rows_constant<R>, std::int64_t m) {
//         row_group<F, R>(w, a, m, y + m * ldy, ldy);   // rows m .. m + R
//       });
//     });
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../core/quant_format.hpp"

// GCC 12 reports its own intrinsics' undefined-vector idiom as (maybe) uninitialized: each
// kernel file opens with LUMINAL_QUANT_KERNELS_BEGIN and closes with LUMINAL_QUANT_KERNELS_END.
#if defined(__GNUC__) && !defined(__clang__)
#define LUMINAL_QUANT_KERNELS_BEGIN                                 \
  _Pragma("GCC diagnostic push")                                    \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")      \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define LUMINAL_QUANT_KERNELS_END _Pragma("GCC diagnostic pop")
#else
#define LUMINAL_QUANT_KERNELS_BEGIN
#define LUMINAL_QUANT_KERNELS_END
#endif

namespace luminal::quant_kernels {

template <int N>
using rows_constant = std::integral_constant<int, N>;

/// Calls tile(rows_constant<R>{}, m) over rows [0, count): R = Max for every full tile, then
/// once with the remaining 1 .. Max - 1 rows, if any.
template <int Max, class Tile>
[[gnu::always_inline]] inline void for_each_tile(std::int64_t count, Tile&& tile) {
  static_assert(Max >= 1);
  std::int64_t m = 0;
  for (; m + Max <= count; m += Max) tile(rows_constant<Max>{}, m);
  const std::int64_t rest = count - m;
  [&]<int... R>(std::integer_sequence<int, R...>) {
    (void)((rest == R + 1 && (tile(rows_constant<R + 1>{}, m), true)) || ...);
  }(std::make_integer_sequence<int, Max - 1>{});
}

template <quant_format F>
using format_constant = std::integral_constant<quant_format, F>;

/// Calls kernel(format_constant<f>{}) for a block format (Q4_0, Q4_1, Q8_0); nothing for another.
template <class Kernel>
[[gnu::always_inline]] inline void with_block_format(quant_format f, Kernel&& kernel) {
  switch (f) {
    case quant_format::q4_0: return kernel(format_constant<quant_format::q4_0>{});
    case quant_format::q4_1: return kernel(format_constant<quant_format::q4_1>{});
    case quant_format::q8_0: return kernel(format_constant<quant_format::q8_0>{});
    default: return;
  }
}

/// Calls kernel(format_constant<f>{}) for any weight format.
template <class Kernel>
[[gnu::always_inline]] inline void with_format(quant_format f, Kernel&& kernel) {
  switch (f) {
    case quant_format::f32: return kernel(format_constant<quant_format::f32>{});
    case quant_format::f16: return kernel(format_constant<quant_format::f16>{});
    case quant_format::bf16: return kernel(format_constant<quant_format::bf16>{});
    default: return with_block_format(f, kernel);
  }
}

}  // namespace luminal::quant_kernels
