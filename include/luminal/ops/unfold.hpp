// unfold: sliding windows along one axis, as a view (no data moves). Like
// torch.Tensor.unfold, but the window axis comes right after the windowed axis, and a
// window may skip elements (a dilation, as in torch.nn.Unfold):
//
//     auto x = input<"x", f32>(shape<Batch, 10>);
//     auto w = unfold<1, 3, 2>(x);        // Shape<Batch, 4, 3>: w[b, i, k] = x[b, 2 i + k]
//     auto d = unfold<1, 3, 1, 2>(x);     // Shape<Batch, 6, 3>: d[b, i, k] = x[b, i + 2 k]
//     auto y = fold<1, 10, 2>(w);         // Shape<Batch, 10>: each window added back in place
//
// fold is unfold's adjoint (col2im along one axis, torch.nn.Fold's rule): its gradient and
// transposed convolutions are built from it. Convolutions and pooling are built from
// unfold (im2col): see nn/conv.hpp.
#pragma once
#include "../core/errors.hpp"
#include "binary.hpp"
#include "reshape.hpp"
#include "slice.hpp"
#include "view.hpp"

namespace luminal {

namespace error {
template <auto Shape, int Axis>
struct unfold_needs_static_extent {
  static_assert(always_false<Shape, Axis>,
                "luminal: unfold needs a static extent on the windowed axis (see the shape and axis above)");
};
template <auto Shape, int Axis, long long Size>
struct unfold_window_too_large {
  static_assert(always_false<Shape, Axis, Size>,
                "luminal: unfold's window size (its span, with a dilation) must not exceed the extent of the "
                "windowed axis (see the shape, axis and window size above)");
};
template <auto Shape, int Axis, long long Length>
struct fold_length_does_not_fit_the_windows {
  static_assert(always_false<Shape, Axis, Length>,
                "luminal: fold's length must be one that unfold with the same window, stride and dilation "
                "turns into as many windows as axis Axis holds (see the shape, axis and length above)");
};
}  // namespace error

/// The elements one window spans: Size of them, Dilation apart.
constexpr long long window_span(long long size, long long dilation) { return dilation * (size - 1) + 1; }

/// Windows of Size elements every Stride elements along axis Axis, the elements of a
/// window Dilation apart: an input extent L on Axis becomes two axes
/// ((L - Dilation (Size - 1) - 1) / Stride + 1, Size), and
/// out[..., i, k, ...] = x[..., i * Stride + k * Dilation, ...]. Elements past the last
/// full window are dropped, as in torch.
template <int Axis, long long Size, long long Stride, long long Dilation = 1>
struct Unfold : view_op {
  static constexpr std::string_view name = "unfold";
  static constexpr int axis = Axis;
  static constexpr long long size = Size, stride = Stride, dilation = Dilation;
  template <class In>
  static constexpr auto unfolded_dims() {
    dims_t<In::rank + 1> dims{};
    for (std::size_t k = 0; k < std::size_t(Axis); ++k) dims[k] = In::dims[k];
    dims[Axis] = Dim{(In::dims[Axis].offset - window_span(Size, Dilation)) / Stride + 1};
    dims[Axis + 1] = Dim{Size};
    for (std::size_t k = std::size_t(Axis) + 1; k < In::rank; ++k) dims[k + 1] = In::dims[k];
    return dims;
  }
  template <class In>
  using shape = shape_from<unfolded_dims<In>()>;

  template <std::size_t RO, std::size_t RI>
  LUMINAL_COORDINATE_MAP static extents<RI> to_child(const extents<RO>& c, const extents<RO>&, const extents<RI>&) {
    extents<RI> in_c{};
    for (std::size_t k = 0; k < RI; ++k) {
      if (k < std::size_t(Axis)) in_c[k] = c[k];
      else if (k == std::size_t(Axis)) in_c[k] = c[k] * index_t(Stride) + c[k + 1] * index_t(Dilation);
      else in_c[k] = c[k + 1];
    }
    return in_c;
  }
};

/// `unfold<Axis, Size, Stride, Dilation>(x)`: sliding windows along Axis (see Unfold). The
/// extent on Axis must be static and at least the window's span. Negative Axis counts from
/// the end.
template <int Axis, long long Size, long long Stride = 1, long long Dilation = 1, expression X>
constexpr auto unfold(X) {
  static_assert(Size >= 1, "luminal: unfold's window size must be >= 1");
  static_assert(Stride >= 1, "luminal: unfold's stride must be >= 1");
  static_assert(Dilation >= 1, "luminal: unfold's dilation must be >= 1");
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (!In::dims[axis].is_static()) {
    (void)error::unfold_needs_static_extent<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (In::dims[axis].offset < window_span(Size, Dilation)) {
    (void)error::unfold_window_too_large<In::text, Axis, Size>{};
    return std::remove_cvref_t<X>{};
  } else {
    return typename node_of<Unfold<int(axis), Size, Stride, Dilation>, std::remove_cvref_t<X>>::type{};
  }
}

namespace detail {
/// Window element K of every window of w ([..., W, Size, ...], windows on Axis) placed
/// where unfold took it from, on a length-Length axis: rows K Dilation, K Dilation +
/// Stride, ... Slice column K ([..., W, 1, ...]), pad that unit axis to Stride and merge
/// it into the window axis (row i lands at i * Stride), then cut or pad to
/// Length - K Dilation and pad K Dilation in front: views only, no scatter.
template <int Axis, long long Length, long long Stride, long long Dilation, long long K, class G>
constexpr auto fold_placed(G g) {
  using S = shape_t<G>;
  constexpr long long Size = S::dims[Axis + 1].offset;
  constexpr long long W = S::dims[Axis].offset;
  constexpr long long at = K * Dilation;
  constexpr long long merged = W * Stride;
  constexpr long long kept = merged < Length - at ? merged : Length - at;
  constexpr auto merged_dims = [] {
    dims_t<S::rank - 1> out{};
    for (std::size_t k = 0, j = 0; k + 1 < S::rank; ++k, ++j) {
      if (k == std::size_t(Axis)) { out[k] = Dim{merged}; ++j; }
      else out[k] = S::dims[j];
    }
    return out;
  }();
  auto column = [&] {
    if constexpr (Size == 1) return g;
    else return slice<Axis + 1, K, K + 1>(g);
  }();
  auto spread = [&] {
    if constexpr (Stride == 1) return column;
    else return pad<Axis + 1, 0, Stride - 1>(column);
  }();
  auto rows = reshape(spread, shape_from<merged_dims>{});
  auto cut = [&] {
    if constexpr (kept == merged) return rows;
    else return slice<Axis, 0, kept>(rows);
  }();
  if constexpr (at == 0 && kept == Length) return cut;
  else return pad<Axis, at, Length - at - kept>(cut);
}
}  // namespace detail

/// `fold<Axis, Length, Stride, Dilation>(w)`: the adjoint of unfold. w holds windows on
/// axes Axis (which window) and Axis + 1 (which element of it), as unfold's result; the
/// result has one axis of Length in their place, each window's elements added at the
/// places unfold<Axis, Size, Stride, Dilation> read them from (overlaps summed, places no
/// window reaches zero). As torch.nn.functional.fold along one axis. Length must be one
/// that unfold turns into as many windows as w has.
///
///     auto cols = input<"cols", f32>(shape<4, 3>);   // 4 windows of 3, stride 2
///     auto x = fold<0, 9, 2>(cols);                  // Shape<9>: x[2 i + k] += cols[i, k]
template <int Axis, long long Length, long long Stride = 1, long long Dilation = 1, expression G>
constexpr auto fold(G g) {
  static_assert(Stride >= 1 && Dilation >= 1, "luminal: fold's stride and dilation must be >= 1");
  using S = shape_t<G>;
  constexpr std::size_t axis = normalize_axis<S::rank>(Axis);
  if constexpr (axis + 1 >= S::rank) {
    (void)error::axis_out_of_range<S::text, Axis>{};
    return g;
  } else if constexpr (!S::dims[axis].is_static() || !S::dims[axis + 1].is_static()) {
    (void)error::unfold_needs_static_extent<S::text, Axis>{};
    return g;
  } else {
    constexpr long long size = S::dims[axis + 1].offset;
    constexpr long long span = window_span(size, Dilation);
    if constexpr (Length < span || (Length - span) / Stride + 1 != S::dims[axis].offset) {
      (void)error::fold_length_does_not_fit_the_windows<S::text, Axis, Length>{};
      return g;
    } else {
      return [&]<long long... K>(std::integer_sequence<long long, K...>) {
        return (detail::fold_placed<int(axis), Length, Stride, Dilation, K>(g) + ...);
      }(std::make_integer_sequence<long long, size>{});
    }
  }
}

}  // namespace luminal
