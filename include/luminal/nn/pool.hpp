// Adaptive pooling, as torch.nn.AdaptiveAvgPool2d((OutH, OutW)): the output size is fixed
// and the windows follow from the input's, which must be static. (MaxPool2d and AvgPool2d,
// with fixed windows, are in nn/conv.hpp.)
//
//     nn::AdaptiveAvgPool2d<1, 1> global;                 // global average: [N, C, 1, 1]
//     auto pooled = global(features);                    // features [Batch, 512, 7, 7]
#pragma once
#include "module.hpp"

namespace luminal::nn {

namespace detail {
/// The averaging matrix [Out, In] of adaptive pooling along one axis: row i averages the
/// window [floor(i In / Out), ceil((i + 1) In / Out)), torch's rule, written in integers
/// (exact in T): j >= floor(i In / Out) iff (j + 1) Out > i In, and
/// j < ceil((i + 1) In / Out) iff j Out < (i + 1) In.
template <std::int64_t Out, std::int64_t In, element_type T>
constexpr auto adaptive_average_weights() {
  auto i = iota<0, T>(shape<Out, In>);
  auto j = iota<1, T>(shape<Out, In>);
  auto inside = cast<T>(less_than(i * c<double(In)>, (j + c<1.0>) * c<double(Out)>)) *
                cast<T>(less_than(j * c<double(Out)>, (i + c<1.0>) * c<double(In)>));
  return inside / sum<1>(inside, keepdim);
}

/// x with axis Axis (static extent In) pooled adaptively to Out: where Out divides In, the
/// windows are In / Out long and do not overlap, a reshape and a mean; otherwise a product
/// with the averaging matrix.
template <int Axis, std::int64_t Out, expression X>
constexpr auto adaptive_average_along(X x) {
  using S = shape_t<X>;
  constexpr std::size_t R = S::rank, axis = std::size_t(Axis);
  constexpr std::int64_t in = S::dims[axis].offset;
  using T = value_t<X>;
  if constexpr (in % Out == 0) {
    constexpr auto split = [] {  // [..., Out, In / Out, ...]
      dims_t<R + 1> d{};
      for (std::size_t k = 0; k < R; ++k) d[k < axis ? k : k + 1] = S::dims[k];
      d[axis] = Dim{Out};
      d[axis + 1] = Dim{in / Out};
      return d;
    }();
    return mean<Axis + 1>(reshape(x, shape_from<split>{}));
  } else if constexpr (axis + 1 == R) {
    return matmul(x, transpose(adaptive_average_weights<Out, in, T>()));
  } else {
    static_assert(axis + 2 == R, "luminal: internal error: adaptive pooling along an axis that is not a matrix's");
    return matmul(adaptive_average_weights<Out, in, T>(), x);
  }
}
}  // namespace detail

/// Mean over the windows of torch.nn.AdaptiveAvgPool2d((OutH, OutW)) of [N, C, H, W] or
/// [C, H, W] with static H and W: output row i averages input rows
/// [floor(i H / OutH), ceil((i + 1) H / OutH)), and columns likewise. Where OutH divides H
/// (OutW divides W) the windows tile the axis: a reshape and a mean; otherwise they differ
/// in length or overlap (7 -> 3: rows 0-2, 2-4, 4-6), and the axis is multiplied by an
/// [Out, In] averaging matrix.
template <std::int64_t OutH, std::int64_t OutW>
struct AdaptiveAvgPool2d {
  static_assert(OutH >= 1 && OutW >= 1, "luminal: AdaptiveAvgPool2d needs output sizes >= 1");

  template <expression X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    static_assert(S::rank == 3 || S::rank == 4, "luminal: AdaptiveAvgPool2d needs [N, C, H, W] or [C, H, W]");
    static_assert(floating_element<value_t<X>>, "luminal: AdaptiveAvgPool2d needs a floating-point input");
    constexpr int R = int(S::rank);
    static_assert(S::dims[R - 2].is_static() && S::dims[R - 1].is_static(),
                  "luminal: AdaptiveAvgPool2d needs static H and W (its windows follow from them)");
    return detail::adaptive_average_along<R - 2, OutH>(detail::adaptive_average_along<R - 1, OutW>(x));
  }
};

}  // namespace luminal::nn
