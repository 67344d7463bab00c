// Rotary position embedding (RoPE) as a composite of views and maps, so that it fuses into
// the kernel that reads it and has its gradient from the primitives' rules. Each pair of a
// head's elements is rotated by the angle of its position and frequency:
//
//     y[a] = x[a] cos t - x[b] sin t,   y[b] = x[b] cos t + x[a] sin t
//
// where the pairs (a, b) are, for pair i of a head of D = 2 * Half elements:
//  - rope_pairs::interleaved: (2i, 2i + 1), GGUF's layout of Llama's query and key weights
//    (llama.cpp's "normal" RoPE);
//  - rope_pairs::halves: (i, i + Half), Hugging Face's rotate_half (GPT-NeoX style).
//
//     auto angles = rope_angles(positions, inv_freq);   // [Seq], [Half] -> [Seq, Half]
//     auto q = rope<rope_pairs::interleaved>(x, cos(angles), sin(angles));   // x [Seq, Heads, 2 * Half]
#pragma once
#include "composite.hpp"
#include "concat.hpp"
#include "reshape.hpp"
#include "slice.hpp"
#include "squeeze.hpp"

namespace luminal {

/// Which elements of a head RoPE rotates together (see the top of this file).
enum class rope_pairs { interleaved, halves };

/// The angles positions[s] * inv_freq[i] of RoPE: [S] and [Half] to [S, Half], in f32 as
/// Hugging Face computes them.
template <expression P, expression F>
constexpr auto rope_angles(P positions, F inv_freq) {
  static_assert(rank_v<P> == 1 && rank_v<F> == 1, "luminal: rope_angles takes positions [S] and frequencies [Half]");
  return unsqueeze<1>(positions) * unsqueeze<0>(inv_freq);
}

/// x [S, H, D] rotated pairwise by the angles whose cosines and sines are cos and sin
/// [S, D / 2] (the same angle for every head). D is static and even, or a symbolic 2*Half
/// whose Half is cos's last extent.
template <rope_pairs Pairs, expression X, expression C, expression Sn>
constexpr auto rope(X x, C cos_t, Sn sin_t) {
  using SX = shape_t<X>;
  using SC = shape_t<C>;
  static_assert(SX::rank == 3 && SC::rank == 2, "luminal: rope takes x [S, H, D] and cos, sin [S, D / 2]");
  static_assert(std::is_same_v<SC, shape_t<Sn>>, "luminal: rope's cos and sin must have one shape");
  static_assert(SX::dims[0] == SC::dims[0], "luminal: rope needs one angle row per position of x");
  static_assert(SX::dims[2] == Dim{2} * SC::dims[1], "luminal: rope needs heads of twice the angles' extent");
  constexpr Dim S = SX::dims[0], H = SX::dims[1], D = SX::dims[2], Half = SC::dims[1];
  if constexpr (Pairs == rope_pairs::interleaved) {
    auto pairs = reshape(x, shape<S, H, Half, 2>);
    auto a = slice<3, 0, 1>(pairs);
    auto b = slice<3, 1, 2>(pairs);
    auto c = reshape(cos_t, shape<S, 1, Half, 1>);
    auto s = reshape(sin_t, shape<S, 1, Half, 1>);
    return reshape(concat<3>(a * c - b * s, b * c + a * s), shape<S, H, D>);
  } else {
    auto halves = reshape(x, shape<S, H, 2, Half>);
    auto a = slice<2, 0, 1>(halves);
    auto b = slice<2, 1, 2>(halves);
    auto c = reshape(cos_t, shape<S, 1, 1, Half>);
    auto s = reshape(sin_t, shape<S, 1, 1, Half>);
    return reshape(concat<2>(a * c - b * s, b * c + a * s), shape<S, H, D>);
  }
}

}  // namespace luminal
