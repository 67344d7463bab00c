// 2-D convolution and pooling on NCHW tensors, as torch.nn.Conv2d, MaxPool2d, AvgPool2d.
// All three are views plus one kernel boundary: sliding windows are unfold views
// (ops/unfold.hpp), so the convolution is im2col (pad, unfold H and W, permute, reshape)
// followed by one batched GEMM; an average pool is a mean over each window's elements and
// a max pool the pairwise max of the windows' strided slices.
//
//     nn::Conv2d<"conv1", 1, 16, 3, 1, 1> conv1;        // conv1.weight [16, 1, 3, 3], conv1.bias [16]
//     nn::MaxPool2d<2> pool;
//     auto x = input<"x", f32>(shape<Batch, 1, 28, 28>);
//     auto y = pool(relu(conv1(x)));                    // Shape<Batch, 16, 14, 14>
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

/// Convolution of [N, Cin, H, W] with Cout filters K x K, stride Stride, zero padding
/// Padding, as torch.nn.Conv2d(Cin, Cout, K, Stride, Padding, bias=Bias): weight
/// [Cout, Cin, K, K], bias [Cout], output [N, Cout, Ho, Wo] with
/// Ho = (H + 2 Padding - K) / Stride + 1. H and W must be static; N may be symbolic.
template <fixed_string Prefix, std::int64_t Cin, std::int64_t Cout, std::int64_t K, std::int64_t Stride = 1,
          std::int64_t Padding = 0, bool Bias = true, element_type T = f32>
struct Conv2d {
  static_assert(Cin >= 1 && Cout >= 1 && K >= 1, "luminal: Conv2d needs Cin, Cout and K >= 1");
  static_assert(Stride >= 1 && Padding >= 0, "luminal: Conv2d needs Stride >= 1 and Padding >= 0");
  static constexpr auto weight = param<Prefix + ".weight", T>(shape<Cout, Cin, K, K>);
  static constexpr auto bias = [] {
    if constexpr (Bias) return param<Prefix + ".bias", T>(shape<Cout>);
    else return none{};
  }();
  static constexpr auto parameters = [] {
    if constexpr (Bias) return std::tuple{weight, bias};
    else return std::tuple{weight};
  }();

  /// [N, Cin, H, W]; any other rank or channel count takes the overload below, which is
  /// never defined, so that the error is at the caller's line (errors.hpp).
  template <expression X>
    requires(shape_t<X>::rank == 4 && shape_t<X>::dims[1] == Dim{Cin})
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    if constexpr (!detail::spatial_ok<op_text("Conv2d"), S, K, Padding>()) {
      return x;
    } else {
      constexpr Dim n = S::dims[0];
      constexpr std::int64_t ho = detail::window_count(S::dims[2].offset, K, Stride, Padding);
      constexpr std::int64_t wo = detail::window_count(S::dims[3].offset, K, Stride, Padding);
      // Per image, weight [Cout, Cin K K] times the columns [Cin K K, Ho Wo] is the output
      // in NCHW already: nothing is permuted after the GEMM, and im2col writes each window
      // offset's Ho x Wo plane in order while it reads the image along its rows.
      auto patches = detail::windows<K, Stride>(detail::pad_spatial<Padding, 0.0>(x));  // [N, Cin, Ho, K, Wo, K]
      auto cols = reshape(permute<0, 1, 3, 5, 2, 4>(patches), Shape<n, Cin * K * K, ho * wo>{});
      auto y = matmul(reshape(weight, shape<Cout, Cin * K * K>), cols);  // [N, Cout, Ho Wo]
      auto biased = [&] {
        if constexpr (Bias) return y + reshape(bias, shape<Cout, 1>);
        else return y;
      }();
      return reshape(biased, Shape<n, Cout, ho, wo>{});
    }
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<needs_channels(Cin)>> operator()(
      const shaped<Input>&) const;

  /// PyTorch's default: weight kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in),
  /// 1/sqrt(fan_in)) with fan_in = Cin K K, and bias with the same bound.
  void initialize(tensor_store& store, std::uint64_t seed) const {
    using W = std::remove_const_t<decltype(weight)>;
    detail::store_param(store, weight,
                        init::kaiming_uniform<T>(detail::extents_of(shape_t<W>{}), init::stream_seed(seed, W::name.view()),
                                                 std::sqrt(5.0)));
    if constexpr (Bias) detail::store_uniform(store, bias, seed, 1.0 / std::sqrt(double(Cin * K * K)));
  }
};

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
