// Convolutions and pooling on NC... tensors, as torch.nn.Conv1d, Conv2d, Conv3d, MaxPool2d
// and AvgPool2d (ConvTranspose2d: nn/conv_transpose.hpp). All are views plus one kernel
// boundary: sliding windows are unfold views (ops/unfold.hpp; a dilation is a window with
// a step), so a convolution is im2col (pad, unfold each spatial axis, permute, reshape)
// followed by one batched GEMM, whose batch axes are the images and the groups (a
// depthwise convolution, one input channel per group, a reduction instead); an average
// pool is a mean over each window's elements and a max pool the pairwise max of the
// windows' strided slices.
//
//     nn::Conv2d<"conv1", 1, 16, 3, 1, 1> conv1;        // conv1.weight [16, 1, 3, 3], conv1.bias [16]
//     nn::MaxPool2d<2> pool;
//     auto x = input<"x", f32>(shape<Batch, 1, 28, 28>);
//     auto y = pool(relu(conv1(x)));                    // Shape<Batch, 16, 14, 14>
//     nn::Conv2d<"dw", 16, 16, 3, 1, 2, true, f32, 2, 16> dw;  // depthwise, dilation 2
#pragma once
#include <cmath>
#include <limits>

#include "../ops/custom.hpp"
#include "../ops/reductions.hpp"
#include "linear.hpp"

namespace luminal::nn {

namespace detail {
/// Pads the last two axes by P on each side with Value (nothing when P = 0).
template <std::int64_t P, double Value, expression X>
constexpr auto pad_spatial(X x) {
  constexpr int R = int(rank_v<X>);
  if constexpr (P == 0) return x;
  else return pad<R - 1, P, P, Value>(pad<R - 2, P, P, Value>(x));
}
/// Windows of K x K every S over the last two axes: [..., H, W] -> [..., Ho, K, Wo, K].
/// Windows that tile the plane (S = K dividing H and W, as in most pooling) are a plain
/// reshape, whose index mapping is the identity: much cheaper to read through, in the
/// forward and the backward kernels alike, than two unfolds.
template <std::int64_t K, std::int64_t S, expression X>
constexpr auto windows(X x) {
  constexpr int R = int(rank_v<X>);
  using In = shape_t<X>;
  constexpr std::int64_t h = In::dims[R - 2].offset, w = In::dims[R - 1].offset;
  if constexpr (S == K && h % K == 0 && w % K == 0) {
    constexpr auto tiled = [] {
      dims_t<R + 2> dims{};
      for (int k = 0; k < R - 2; ++k) dims[k] = In::dims[k];
      dims[R - 2] = Dim{h / K};
      dims[R - 1] = Dim{K};
      dims[R] = Dim{w / K};
      dims[R + 1] = Dim{K};
      return dims;
    }();
    return reshape(x, shape_from<tiled>{});
  } else {
    return unfold<R, K, S>(unfold<R - 2, K, S>(x));
  }
}
/// The K x K elements of each window as one axis before the output's plane: [..., Ho, K,
/// Wo, K] -> [..., K K, Ho, Wo]. An average pool is then one reduction over one axis,
/// instead of a chain of two. With the window before the plane, the reduction loops over
/// rows of Wo outputs (a step of the window at a time), not over rows of K K elements.
template <expression W>
constexpr auto window_first(W w) {
  constexpr int R = int(rank_v<W>);  // the input's rank + 2
  using In = shape_t<W>;
  auto moved = [&]<int... A>(std::integer_sequence<int, A...>) {
    return permute<A..., R - 3, R - 1, R - 4, R - 2>(w);
  }(std::make_integer_sequence<int, R - 4>{});
  constexpr auto merged = [] {
    dims_t<R - 1> dims{};
    for (int k = 0; k < R - 4; ++k) dims[k] = In::dims[k];  // leading axes
    dims[R - 4] = Dim{In::dims[R - 3].offset * In::dims[R - 1].offset};
    dims[R - 3] = In::dims[R - 4];  // Ho
    dims[R - 2] = In::dims[R - 2];  // Wo
    return dims;
  }();
  return reshape(moved, shape_from<merged>{});
}
/// The maximum over each K x K window of windows()'s [..., Ho, K, Wo, K], with
/// torch.nn.MaxPool2d's gradient: each window's whole cotangent goes to its first maximal
/// element, in row-major window order, where max() would share it among tied elements.
/// After a ReLU whole windows tie at 0, and the first-element rule is K K - 1 comparisons
/// per window and one per element, where sharing needs a tie mask, its count and a division.
///
/// Each window row's maximum is the pairwise max of K strided slices along the row
/// ([..., Ho, K, Wo, 1]), and the window's maximum that of K slices of those along the
/// column: elementwise loops that read the input through one strided layout. A reduction
/// over a window axis would read the windows through a reshape that merges two strided
/// axes (an index division per element), and make a pass per window element.
template <std::int64_t K>
struct window_max {
  /// Element I of each window row (Axis = -1) or of each window column (Axis = -3).
  template <int Axis, int I, class W>
  static constexpr auto at(W w) {
    constexpr int R = int(rank_v<W>);
    return slice<R + Axis, I, I + 1>(w);
  }
  template <int Axis, int I, class W, class M>
  static constexpr auto running_max(W w, M m) {
    if constexpr (I == K) return m;
    else return running_max<Axis, I + 1>(w, max(m, at<Axis, I>(w)));
  }
  template <int Axis, class W>
  static constexpr auto max_along(W w) { return running_max<Axis, 1>(w, at<Axis, 0>(w)); }
  /// [..., Ho, Wo]: windows()'s shape without its two window axes.
  template <class W>
  static constexpr auto pooled_dims() {
    constexpr int R = int(rank_v<W>);
    dims_t<R - 2> dims{};
    for (int k = 0; k < R - 3; ++k) dims[k] = shape_t<W>::dims[k];
    dims[R - 3] = shape_t<W>::dims[R - 2];
    return dims;
  }

  static constexpr auto forward(auto w) {
    using W = decltype(w);
    return reshape(max_along<-3>(max_along<-1>(w)), shape_from<pooled_dims<W>()>{});
  }
  /// The place (row * K + column) of the first element of each window not less than m,
  /// counting down from place I (where m is NaN every comparison fails: place 0).
  template <int I, class W, class M, class F>
  static constexpr auto first_maximal_place(W w, M m, F first) {
    if constexpr (I < 0) return first;
    else
      return first_maximal_place<I - 1>(w, m, where(less_than(at<-1, I % int(K)>(at<-3, I / int(K)>(w)), m), first,
                                                    c<double(I)>));
  }
  /// The cotangent goes to each window's first maximal element in row-major order, as in
  /// torch; a window holding a NaN sends it to its first element (torch: its last NaN).
  /// That element's place is found once per window, in the forward's loop over the
  /// windows (the planner stores it: each of the window's elements reads it), so the
  /// gradient's loop over the elements only compares it with each element's own place.
  static constexpr auto vjp(auto g, auto y, auto w) {
    using W = decltype(w);
    constexpr int R = int(rank_v<W>);
    using One = shape_t<decltype(at<-1, 0>(at<-3, 0>(w)))>;  // [..., Ho, 1, Wo, 1]
    auto m = reshape(y, One{});
    auto last = iota<R - 1, i32>(One{}) + c<double(K * K - 1)>;
    auto first = first_maximal_place<int(K * K) - 2>(w, m, last);
    auto place = iota<R - 3, i32>(shape_t<W>{}) * c<double(K)> + iota<R - 1, i32>(shape_t<W>{});
    return where(equal(place, first), reshape(g, One{}), c<0.0>);
  }
};

/// The output extent of a window K, stride S, padding P over an extent N.
constexpr std::int64_t window_count(std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t p) {
  return (n + 2 * p - k) / s + 1;
}
/// Checks that X has rank >= 2 and static, large enough H and W for the windows.
template <auto Module, class S, std::int64_t K, std::int64_t P>
constexpr bool spatial_ok() {
  if constexpr (S::rank < 2) {
    (void)error::module_input_rank<Module, S::text, 4>{};
    return false;
  } else {
    constexpr Dim h = S::dims[S::rank - 2], w = S::dims[S::rank - 1];
    if constexpr (!h.is_static() || !w.is_static()) {
      (void)error::unfold_needs_static_extent<S::text, int(S::rank) - 2>{};
      return false;
    } else if constexpr (h.offset + 2 * P < K) {
      (void)error::unfold_window_too_large<S::text, int(S::rank) - 2, K>{};
      return false;
    } else if constexpr (w.offset + 2 * P < K) {
      (void)error::unfold_window_too_large<S::text, int(S::rank) - 1, K>{};
      return false;
    } else {
      return true;
    }
  }
}
}  // namespace detail

namespace detail {
/// The output extent of a window of K elements Dil apart, stride S, padding P over an
/// extent N, as torch's: (N + 2 P - Dil (K - 1) - 1) / S + 1.
constexpr std::int64_t conv_output_extent(std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t p,
                                          std::int64_t dil) {
  return (n + 2 * p - (dil * (k - 1) + 1)) / s + 1;
}
/// Axes First, ..., First + Count - 1 of x padded by P zeros on each side, the first of
/// them innermost (as pad_spatial: pad_axes<R - 2, 2, P>(x) is pad_spatial<P, 0.0>(x)).
template <int First, int Count, std::int64_t P, expression X>
constexpr auto pad_axes(X x) {
  if constexpr (P == 0 || Count == 0) return x;
  else return pad<First + Count - 1, P, P>(pad_axes<First, Count - 1, P>(x));
}
/// Unfolds axes R - D + 2 J, ... of x: the spatial axes of a rank-R input, each shifted
/// by the window axes already inserted before it.
template <int R, int D, int J, std::int64_t K, std::int64_t S, std::int64_t Dil, expression X>
constexpr auto unfold_spatial(X x) {
  if constexpr (J == D) return x;
  else return unfold_spatial<R, D, J + 1, K, S, Dil>(unfold<R - D + 2 * J, K, S, Dil>(x));
}
/// Windows of K elements, Dil apart, every S along each of the last D axes:
/// [..., L1, ..., LD] -> [..., O1, K, ..., OD, K]. Dense windows that tile every axis
/// are a reshape, as in windows() (which it is for D = 2).
template <int D, std::int64_t K, std::int64_t S, std::int64_t Dil, expression X>
constexpr auto windows_nd(X x) {
  constexpr int R = int(rank_v<X>);
  using In = shape_t<X>;
  constexpr bool tiles = [] {
    for (int j = R - D; j < R; ++j)
      if (In::dims[j].offset % K != 0) return false;
    return S == K && Dil == 1;
  }();
  if constexpr (D == 2 && Dil == 1) {
    return windows<K, S>(x);
  } else if constexpr (tiles) {
    constexpr auto tiled = [] {
      dims_t<R + D> dims{};
      for (int k = 0; k < R - D; ++k) dims[k] = In::dims[k];
      for (int j = 0; j < D; ++j) {
        dims[R - D + 2 * j] = Dim{In::dims[R - D + j].offset / K};
        dims[R - D + 2 * j + 1] = Dim{K};
      }
      return dims;
    }();
    return reshape(x, shape_from<tiled>{});
  } else {
    return unfold_spatial<R, D, 0, K, S, Dil>(x);
  }
}
/// [..., Lead..., O1, K1, ..., OD, KD] -> [..., K1, ..., KD, O1, ..., OD]: the window
/// elements before the output's positions, over the last 2 D axes of x.
template <int D, expression X>
constexpr auto windows_first(X x) {
  constexpr int lead = int(rank_v<X>) - 2 * D;
  return [&]<int... A, int... J>(std::integer_sequence<int, A...>, std::integer_sequence<int, J...>) {
    return permute<A..., (lead + 2 * J + 1)..., (lead + 2 * J)...>(x);
  }(std::make_integer_sequence<int, lead>{}, std::make_integer_sequence<int, D>{});
}
/// dims with `more` appended: the shape of a reshape's target.
template <std::size_t R, std::size_t M>
constexpr dims_t<R + M> concat_dims(const dims_t<R>& head, const std::array<std::int64_t, M>& more) {
  dims_t<R + M> out{};
  for (std::size_t k = 0; k < R; ++k) out[k] = head[k];
  for (std::size_t k = 0; k < M; ++k) out[R + k] = Dim{more[k]};
  return out;
}
/// The first of the last D axes of S that is not static, or -1.
template <class S, int D>
constexpr int first_symbolic_spatial_axis() {
  for (int k = int(S::rank) - D; k < int(S::rank); ++k)
    if (!S::dims[k].is_static()) return k;
  return -1;
}
/// The first of the last D axes of S shorter than Span after padding by P, or -1.
template <class S, int D, std::int64_t Span, std::int64_t P>
constexpr int first_too_short_spatial_axis() {
  for (int k = int(S::rank) - D; k < int(S::rank); ++k)
    if (S::dims[k].offset + 2 * P < Span) return k;
  return -1;
}
/// Whether the last D axes of S are static and hold a window of Span after padding by P;
/// if not, the error names the first axis that does not.
template <class S, int D, std::int64_t Span, std::int64_t P>
constexpr bool conv_extents_ok() {
  constexpr int symbolic = first_symbolic_spatial_axis<S, D>();
  if constexpr (symbolic >= 0) {
    (void)error::unfold_needs_static_extent<S::text, symbolic>{};
    return false;
  } else if constexpr (first_too_short_spatial_axis<S, D, Span, P>() >= 0) {
    (void)error::unfold_window_too_large<S::text, first_too_short_spatial_axis<S, D, Span, P>(), Span>{};
    return false;
  } else {
    return true;
  }
}
/// The input a convolution over D axes and C channels needs, for its error text.
constexpr text<48> conv_input_text(int d, std::int64_t c) {
  return d == 1 ? needed_shape("(N, ", c, ", L)") : d == 2 ? needs_channels(c) : needed_shape("(N, ", c, ", D, H, W)");
}
/// D copies of v.
template <int D>
constexpr std::array<std::int64_t, D> repeated(std::int64_t v) {
  std::array<std::int64_t, D> out{};
  for (auto& e : out) e = v;
  return out;
}
/// A convolution's weight [Out, In, K, ..., K] (D window axes).
template <int D>
constexpr dims_t<D + 2> filter_dims(std::int64_t out, std::int64_t in, std::int64_t k) {
  return concat_dims(dims_t<2>{Dim{out}, Dim{in}}, repeated<D>(k));
}
constexpr std::int64_t power(std::int64_t base, int exponent) {
  std::int64_t out = 1;
  for (int k = 0; k < exponent; ++k) out *= base;
  return out;
}
/// PyTorch's default for a convolution's parameters: weight kaiming_uniform(a = sqrt(5)),
/// i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and bias with the same bound (fan_in as torch
/// computes it from the weight's second axis and the window).
template <bool Bias, class W, class BiasLeaf>
void initialize_conv(tensor_store& store, W weight, BiasLeaf bias, std::uint64_t seed, std::int64_t fan_in) {
  using T = value_t<W>;
  store_param(store, weight,
              init::kaiming_uniform<T>(extents_of(shape_t<W>{}), init::stream_seed(seed, W::name.view()), std::sqrt(5.0)));
  if constexpr (Bias) store_uniform(store, bias, seed, 1.0 / std::sqrt(double(fan_in)));
}
}  // namespace detail

/// Convolution over the last D axes of [N, Cin, L1, ..., LD] with Cout filters of K in
/// every axis, as torch.nn.Conv1d / Conv2d / Conv3d(Cin, Cout, K, stride=Stride,
/// padding=Padding, dilation=Dilation, groups=Groups, bias=Bias): weight
/// [Cout, Cin / Groups, K, ..., K], bias [Cout], output [N, Cout, O1, ..., OD] with
/// O = (L + 2 Padding - Dilation (K - 1) - 1) / Stride + 1. The spatial extents must be
/// static; N may be symbolic. Use it through the aliases Conv1d, Conv2d and Conv3d.
///
/// im2col and one GEMM: the zero-padded input's windows (unfold views, a window's
/// elements Dilation apart) become columns [N, Cin K^D, O^D], and weight [Cout, Cin K^D]
/// times them is the output, in NCHW already. With Groups > 1 the channels split into a
/// group axis that is a batch axis of the same GEMM: [G, Cout/G, Cin/G K^D] times
/// [N, G, Cin/G K^D, O^D] (a depthwise convolution is Groups = Cin: one K^D-long filter
/// per channel).
template <int D, fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, bool Bias = true, element_type T = f32, std::int64_t Dilation = 1,
          std::int64_t Groups = 1>
struct ConvNd {
  static_assert(D >= 1 && D <= 3, "luminal: ConvNd is 1-, 2- or 3-dimensional (Conv1d, Conv2d, Conv3d)");
  static_assert(Cin >= 1 && Cout >= 1 && K >= 1, "luminal: a convolution needs Cin, Cout and K >= 1");
  static_assert(Stride >= 1 && Padding >= 0 && Dilation >= 1,
                "luminal: a convolution needs Stride >= 1, Padding >= 0 and Dilation >= 1");
  static_assert(Groups >= 1, "luminal: a convolution's Groups must be >= 1");
  static_assert(Cin % (Groups >= 1 ? Groups : 1) == 0,
                "luminal: a convolution's in_channels (Cin) must be divisible by groups, as in torch");
  static_assert(Cout % (Groups >= 1 ? Groups : 1) == 0,
                "luminal: a convolution's out_channels (Cout) must be divisible by groups, as in torch");
  static constexpr std::int64_t group_in = Cin / (Groups >= 1 ? Groups : 1);
  static constexpr std::int64_t group_out = Cout / (Groups >= 1 ? Groups : 1);
  static constexpr std::int64_t window = detail::power(K, D);  // K^D elements per channel
  /// The channels split into the groups (else the static_asserts above have said why not).
  static constexpr bool groups_fit = Groups >= 1 && Cin % Groups == 0 && Cout % Groups == 0;

  static constexpr auto weight = param<Prefix + ".weight", T>(shape_from<detail::filter_dims<D>(Cout, group_in, K)>{});
  static constexpr auto bias = [] {
    if constexpr (Bias) return param<Prefix + ".bias", T>(shape<Cout>);
    else return none{};
  }();
  static constexpr auto parameters = [] {
    if constexpr (Bias) return std::tuple{weight, bias};
    else return std::tuple{weight};
  }();

  /// [N, Cin, L1, ..., LD]; any other rank or channel count takes the overload below,
  /// which is never defined, so that the error is at the caller's line (errors.hpp).
  template <expression X>
    requires(shape_t<X>::rank == D + 2 && shape_t<X>::dims[1] == Dim{Cin})
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    if constexpr (!groups_fit || !detail::conv_extents_ok<S, D, window_span(K, Dilation), Padding>()) {
      return x;
    } else {
      constexpr Dim n = S::dims[0];
      constexpr auto out_extents = [] {
        std::array<std::int64_t, D> o{};
        for (int j = 0; j < D; ++j) o[j] = detail::conv_output_extent(S::dims[2 + j].offset, K, Stride, Padding, Dilation);
        return o;
      }();
      constexpr std::int64_t positions = [&] {
        std::int64_t p = 1;
        for (auto o : out_extents) p *= o;
        return p;
      }();
      // Per image, the filters times the columns is the output in NCHW already: nothing is
      // permuted after the GEMM, and im2col writes each window offset's plane of outputs
      // in order while it reads the image along its rows.
      auto patches = detail::windows_nd<D, K, Stride, Dilation>(detail::pad_axes<2, D, Padding>(x));  // [N, Cin, O1, K, ...]
      auto ordered = detail::windows_first<D>(patches);  // [N, Cin, K, ..., O1, ...]
      auto y = [&] {
        if constexpr (Groups == 1) {
          auto cols = reshape(ordered, Shape<n, Cin * window, positions>{});
          return matmul(reshape(weight, shape<Cout, Cin * window>), cols);  // [N, Cout, O^D]
        } else if constexpr (group_in == 1) {
          // One input channel per group (a depthwise convolution): as GEMMs, one product of
          // a single row per image and group, thousands of calls each too small to pay for
          // itself. Instead the windows times the filters, summed over the window: one
          // reduction that reads the windows in place, and whose gradients are elementwise.
          auto cols = reshape(ordered, Shape<n, Groups, 1, window, positions>{});
          return sum<3>(cols * reshape(weight, shape<Groups, group_out, window, 1>));  // [N, G, Cout/G, O^D]
        } else {
          auto cols = reshape(ordered, Shape<n, Groups, group_in * window, positions>{});
          return matmul(reshape(weight, shape<Groups, group_out, group_in * window>), cols);  // [N, G, Cout/G, O^D]
        }
      }();
      auto biased = [&] {
        if constexpr (!Bias) return y;
        else if constexpr (Groups == 1) return y + reshape(bias, shape<Cout, 1>);
        else return y + reshape(bias, shape<Groups, group_out, 1>);
      }();
      return reshape(biased, shape_from<detail::concat_dims(dims_t<2>{n, Dim{Cout}}, out_extents)>{});
    }
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<detail::conv_input_text(D, Cin)>>
  operator()(const shaped<Input>&) const;

  /// PyTorch's default, with fan_in = Cin / Groups K^D (detail::initialize_conv).
  void initialize(tensor_store& store, std::uint64_t seed) const {
    detail::initialize_conv<Bias>(store, weight, bias, seed, group_in * window);
  }
};

/// torch.nn.Conv1d over [N, Cin, L]: weight [Cout, Cin / Groups, K].
///     nn::Conv1d<"c", 4, 8, 3, 2, 1, true, f32, 2> c;  // stride 2, padding 1, dilation 2
template <fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, bool Bias = true, element_type T = f32, std::int64_t Dilation = 1,
          std::int64_t Groups = 1>
using Conv1d = ConvNd<1, Prefix, Cin, Cout, K, Stride, Padding, Bias, T, Dilation, Groups>;

/// torch.nn.Conv2d over [N, Cin, H, W]: weight [Cout, Cin / Groups, K, K]. Dilation and
/// Groups come after Bias and T, so that Conv2d<Prefix, Cin, Cout, K, Stride, Padding,
/// Bias, T> keeps its meaning.
///     nn::Conv2d<"conv1", 1, 16, 3, 1, 1> conv1;                  // 3 x 3, padding 1
///     nn::Conv2d<"dw", 32, 32, 3, 2, 1, true, f32, 1, 32> dw;     // depthwise, stride 2
template <fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, bool Bias = true, element_type T = f32, std::int64_t Dilation = 1,
          std::int64_t Groups = 1>
using Conv2d = ConvNd<2, Prefix, Cin, Cout, K, Stride, Padding, Bias, T, Dilation, Groups>;

/// torch.nn.Conv3d over [N, Cin, D, H, W]: weight [Cout, Cin / Groups, K, K, K].
template <fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, bool Bias = true, element_type T = f32, std::int64_t Dilation = 1,
          std::int64_t Groups = 1>
using Conv3d = ConvNd<3, Prefix, Cin, Cout, K, Stride, Padding, Bias, T, Dilation, Groups>;

/// Maximum over K x K windows every Stride of the last two axes ([N, C, H, W] or [C, H, W]),
/// as torch.nn.MaxPool2d(K, Stride, Padding); padding reads as -infinity. As in torch, the
/// gradient of a window goes to its first maximal element (ties are not shared).
template <std::int64_t K, std::int64_t Stride = K, std::int64_t Padding = 0>
struct MaxPool2d {
  static_assert(K >= 1 && Stride >= 1 && Padding >= 0, "luminal: MaxPool2d needs K, Stride >= 1 and Padding >= 0");
  static_assert(2 * Padding <= K, "luminal: MaxPool2d's padding must be at most half the window, as in torch");
  template <expression X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    if constexpr (!detail::spatial_ok<op_text("MaxPool2d"), S, K, Padding>()) {
      return x;
    } else {
      constexpr double lowest = -std::numeric_limits<double>::infinity();
      return custom_vjp<detail::window_max<K>>(detail::windows<K, Stride>(detail::pad_spatial<Padding, lowest>(x)));
    }
  }
};

/// Mean over K x K windows every Stride of the last two axes, as torch.nn.AvgPool2d(K,
/// Stride, Padding) with count_include_pad=True (padding counts as zeros).
template <std::int64_t K, std::int64_t Stride = K, std::int64_t Padding = 0>
struct AvgPool2d {
  static_assert(K >= 1 && Stride >= 1 && Padding >= 0, "luminal: AvgPool2d needs K, Stride >= 1 and Padding >= 0");
  static_assert(2 * Padding <= K, "luminal: AvgPool2d's padding must be at most half the window, as in torch");
  template <expression X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    if constexpr (!detail::spatial_ok<op_text("AvgPool2d"), S, K, Padding>()) {
      return x;
    } else {
      constexpr int R = int(S::rank);
      return mean<R - 2>(detail::window_first(detail::windows<K, Stride>(detail::pad_spatial<Padding, 0.0>(x))));
    }
  }
};

}  // namespace luminal::nn
