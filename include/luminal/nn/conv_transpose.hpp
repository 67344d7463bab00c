// Transposed convolution, as torch.nn.ConvTranspose2d: the adjoint of Conv2d's map from
// its input to its output (the gradient of a convolution with respect to its input).
//
//     nn::ConvTranspose2d<"up", 16, 8, 3, 2, 1, 1> up;  // up.weight [16, 8, 3, 3], up.bias [8]
//     auto x = input<"x", f32>(shape<Batch, 16, 7, 7>);
//     auto y = up(x);                                  // Shape<Batch, 8, 14, 14>
//
// It is built in the GEMM-then-col2im form: one batched GEMM, weight^T [Cout K K, Cin]
// times the input [Cin, H W] per image, gives every input pixel's contribution to its
// K x K output window; fold (ops/unfold.hpp, views and one sum) adds the windows into
// the output plane. The other form, a convolution of the zero-stuffed input with the
// flipped kernel, would multiply Stride^2 times as many zeros as values and needs a
// kernel flip, which luminal has no view for; here the GEMM does only the useful
// products, and the backward is an ordinary im2col convolution.
#pragma once
#include <algorithm>

#include "conv.hpp"

namespace luminal::nn {

namespace detail {
/// Folds the window pairs J - 1, ..., 0 of x ([..., I1, K, ..., ID, K] from axis Lead),
/// pair j on axes Lead + 2 j and Lead + 2 j + 1, into the full extents
/// (I - 1) S + Dil (K - 1) + 1: the last pair first, so the earlier ones keep their axes.
template <int Lead, int J, std::int64_t S, std::int64_t Dil, expression X>
constexpr auto fold_spatial(X x) {
  if constexpr (J == 0) {
    return x;
  } else {
    constexpr int a = Lead + 2 * (J - 1);
    using Sh = shape_t<X>;
    constexpr std::int64_t length = (Sh::dims[a].offset - 1) * S + Dil * (Sh::dims[a + 1].offset - 1) + 1;
    return fold_spatial<Lead, J - 1, S, Dil>(fold<a, length, S, Dil>(x));
  }
}
/// Axes First, ..., First + Count - 1 of x without P elements at either end, and then
/// OutputPadding more at the end: a transposed convolution's output out of the full
/// extent. Where OutputPadding > P the extra elements are zeros (no window reaches them).
template <int First, int Count, std::int64_t P, std::int64_t OutputPadding, expression X>
constexpr auto crop_axes(X x) {
  if constexpr (Count == 0 || (P == 0 && OutputPadding == 0)) {
    return x;
  } else {
    auto inner = crop_axes<First, Count - 1, P, OutputPadding>(x);
    constexpr int a = First + Count - 1;
    constexpr std::int64_t length = shape_t<decltype(inner)>::dims[a].offset;
    auto front = [&] {
      if constexpr (P == 0) return inner;
      else if constexpr (OutputPadding <= P) return slice<a, P, length - P + OutputPadding>(inner);
      else return slice<a, P, length>(inner);
    }();
    if constexpr (OutputPadding > P) return pad<a, 0, OutputPadding - P>(front);
    else return front;
  }
}
/// [..., K1, ..., KD, I1, ..., ID] (from axis Lead) -> [..., I1, K1, ..., ID, KD].
template <int Lead, int D, expression X>
constexpr auto interleave_windows(X x) {
  return [&]<int... A, int... J>(std::integer_sequence<int, A...>, std::integer_sequence<int, J...>) {
    return permute<A..., ((J % 2 == 0 ? Lead + D + J / 2 : Lead + J / 2))...>(x);
  }(std::make_integer_sequence<int, Lead>{}, std::make_integer_sequence<int, 2 * D>{});
}
}  // namespace detail

/// Transposed convolution over the last D axes of [N, Cin, I1, ..., ID], as
/// torch.nn.ConvTranspose1d / 2d / 3d(Cin, Cout, K, stride=Stride, padding=Padding,
/// output_padding=OutputPadding, groups=Groups, bias=Bias, dilation=Dilation): weight
/// [Cin, Cout / Groups, K, ..., K], bias [Cout], output [N, Cout, O1, ..., OD] with
/// O = (I - 1) Stride - 2 Padding + Dilation (K - 1) + OutputPadding + 1. The spatial
/// extents must be static; N may be symbolic. Use it through ConvTranspose2d.
///
/// With Groups > 1 the group axis is a batch axis of the one GEMM, as in ConvNd.
template <int D, fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, std::int64_t OutputPadding = 0, bool Bias = true, element_type T = f32,
          std::int64_t Dilation = 1, std::int64_t Groups = 1>
struct ConvTransposeNd {
  static_assert(D >= 1 && D <= 3, "luminal: ConvTransposeNd is 1-, 2- or 3-dimensional");
  static_assert(Cin >= 1 && Cout >= 1 && K >= 1, "luminal: a transposed convolution needs Cin, Cout and K >= 1");
  static_assert(Stride >= 1 && Padding >= 0 && Dilation >= 1 && OutputPadding >= 0,
                "luminal: a transposed convolution needs Stride >= 1, Padding >= 0, OutputPadding >= 0 and "
                "Dilation >= 1");
  static_assert(OutputPadding < Stride || OutputPadding < Dilation,
                "luminal: a transposed convolution's output_padding must be smaller than its stride or its "
                "dilation, as in torch");
  static_assert(Groups >= 1, "luminal: a transposed convolution's Groups must be >= 1");
  static_assert(Cin % (Groups >= 1 ? Groups : 1) == 0,
                "luminal: a transposed convolution's in_channels (Cin) must be divisible by groups, as in torch");
  static_assert(Cout % (Groups >= 1 ? Groups : 1) == 0,
                "luminal: a transposed convolution's out_channels (Cout) must be divisible by groups, as in torch");
  static constexpr std::int64_t group_in = Cin / (Groups >= 1 ? Groups : 1);
  static constexpr std::int64_t group_out = Cout / (Groups >= 1 ? Groups : 1);
  static constexpr std::int64_t window = detail::power(K, D);
  /// The channels split into the groups (else the static_asserts above have said why not).
  static constexpr bool groups_fit = Groups >= 1 && Cin % Groups == 0 && Cout % Groups == 0;

  static constexpr auto weight = param<Prefix + ".weight", T>(shape_from<detail::filter_dims<D>(Cin, group_out, K)>{});
  static constexpr auto bias = [] {
    if constexpr (Bias) return param<Prefix + ".bias", T>(shape<Cout>);
    else return none{};
  }();
  static constexpr auto parameters = [] {
    if constexpr (Bias) return std::tuple{weight, bias};
    else return std::tuple{weight};
  }();

  /// The output extent over an input extent i.
  static constexpr std::int64_t output_extent(std::int64_t i) {
    return (i - 1) * Stride - 2 * Padding + Dilation * (K - 1) + OutputPadding + 1;
  }

  template <expression X>
    requires(shape_t<X>::rank == D + 2 && shape_t<X>::dims[1] == Dim{Cin})
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    if constexpr (!groups_fit || !detail::conv_extents_ok<S, D, 1, 0>()) {
      return x;
    } else {
      constexpr Dim n = S::dims[0];
      constexpr std::int64_t positions = [] {
        std::int64_t p = 1;
        for (int j = 0; j < D; ++j) p *= S::dims[2 + j].offset;
        return p;
      }();
      constexpr auto out_extents = [] {
        std::array<std::int64_t, D> o{};
        for (int j = 0; j < D; ++j) o[j] = output_extent(S::dims[2 + j].offset);
        return o;
      }();
      static_assert(std::ranges::all_of(out_extents, [](std::int64_t o) { return o >= 1; }),
                    "luminal: a transposed convolution's padding leaves no output (see Padding and the input)");
      constexpr auto in_extents = [] {
        std::array<std::int64_t, D> e{};
        for (int j = 0; j < D; ++j) e[j] = S::dims[2 + j].offset;
        return e;
      }();
      // Each input pixel's contribution to its window, for every output channel and window
      // element: weight^T [Cout K^D, Cin] times [Cin, I^D] per image (per group).
      constexpr int lead = Groups == 1 ? 2 : 3;
      auto contributions = [&] {
        if constexpr (Groups == 1) {
          auto y = matmul(transpose(reshape(weight, shape<Cin, Cout * window>)), reshape(x, Shape<n, Cin, positions>{}));
          constexpr auto dims = detail::concat_dims(
              detail::concat_dims(dims_t<2>{n, Dim{Cout}}, detail::repeated<D>(K)), in_extents);
          return reshape(y, shape_from<dims>{});  // [N, Cout, K..., I...]
        } else {
          auto y = matmul(transpose(reshape(weight, shape<Groups, group_in, group_out * window>)),
                          reshape(x, Shape<n, Groups, group_in, positions>{}));
          constexpr auto dims = detail::concat_dims(
              detail::concat_dims(dims_t<3>{n, Dim{Groups}, Dim{group_out}}, detail::repeated<D>(K)), in_extents);
          return reshape(y, shape_from<dims>{});  // [N, G, Cout/G, K..., I...]
        }
      }();
      auto full = detail::fold_spatial<lead, D, Stride, Dilation>(detail::interleave_windows<lead, D>(contributions));
      auto cropped = detail::crop_axes<lead, D, Padding, OutputPadding>(full);
      constexpr auto out_dims = detail::concat_dims(dims_t<2>{n, Dim{Cout}}, out_extents);
      auto y = [&] {
        if constexpr (Groups == 1) return cropped;
        else return reshape(cropped, shape_from<out_dims>{});
      }();
      if constexpr (Bias) return y + reshape(bias, shape_from<detail::concat_dims(dims_t<1>{Dim{Cout}}, detail::repeated<D>(1))>{});
      else return y;
    }
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<detail::conv_input_text(D, Cin)>>
  operator()(const shaped<Input>&) const;

  /// PyTorch's default, with torch's fan_in of a [Cin, Cout / Groups, K...] weight,
  /// Cout / Groups K^D (detail::initialize_conv).
  void initialize(tensor_store& store, std::uint64_t seed) const {
    detail::initialize_conv<Bias>(store, weight, bias, seed, group_out * window);
  }
};

/// torch.nn.ConvTranspose2d over [N, Cin, H, W]: weight [Cin, Cout / Groups, K, K].
///     nn::ConvTranspose2d<"up", 16, 8, 3, 2, 1, 1> up;   // stride 2, padding 1, output_padding 1
template <fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, std::int64_t OutputPadding = 0, bool Bias = true, element_type T = f32,
          std::int64_t Dilation = 1, std::int64_t Groups = 1>
using ConvTranspose2d = ConvTransposeNd<2, Prefix, Cin, Cout, K, Stride, Padding, OutputPadding, Bias, T, Dilation, Groups>;

}  // namespace luminal::nn
