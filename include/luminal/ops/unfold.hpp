// unfold: sliding windows along one axis, as a view (no data moves). Like
// torch.Tensor.unfold, but the window axis comes right after the windowed axis:
//
//     auto x = input<"x", f32>(shape<Batch, 10>);
//     auto w = unfold<1, 3, 2>(x);        // Shape<Batch, 4, 3>: w[b, i, k] = x[b, 2 i + k]
//
// Convolutions and pooling are built from it (im2col): see nn/conv.hpp.
#pragma once
#include "../core/errors.hpp"
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
                "luminal: unfold's window size must not exceed the extent of the windowed axis "
                "(see the shape, axis and window size above)");
};
}  // namespace error

/// Windows of Size elements every Stride elements along axis Axis: an input extent L on
/// Axis becomes two axes ((L - Size) / Stride + 1, Size), and
/// out[..., i, k, ...] = x[..., i * Stride + k, ...]. Elements past the last full window
/// are dropped, as in torch.
template <int Axis, long long Size, long long Stride>
struct Unfold : view_op {
  static constexpr std::string_view name = "unfold";
  static constexpr int axis = Axis;
  static constexpr long long size = Size, stride = Stride;
  template <class In>
  static constexpr auto unfolded_dims() {
    dims_t<In::rank + 1> dims{};
    for (std::size_t k = 0; k < std::size_t(Axis); ++k) dims[k] = In::dims[k];
    dims[Axis] = Dim{(In::dims[Axis].offset - Size) / Stride + 1};
    dims[Axis + 1] = Dim{Size};
    for (std::size_t k = std::size_t(Axis) + 1; k < In::rank; ++k) dims[k + 1] = In::dims[k];
    return dims;
  }
  template <class In>
  using shape = shape_from<unfolded_dims<In>()>;

  template <std::size_t RO, std::size_t RI>
  LUMINAL_COORDINATE_MAP static extents<RI> to_child(const extents<RO>& c, const extents<RO>&, const extents<RI>&) {
    extents<RI> in_c{};
    for (std::size_t k = 0; k < RI; ++k)
      in_c[k] = k < std::size_t(Axis) ? c[k] : k == std::size_t(Axis) ? c[k] * index_t(Stride) + c[k + 1] : c[k + 1];
    return in_c;
  }
};

/// `unfold<Axis, Size, Stride>(x)`: sliding windows along Axis (see Unfold). The extent
/// on Axis must be static and at least Size. Negative Axis counts from the end.
template <int Axis, long long Size, long long Stride = 1, expression X>
constexpr auto unfold(X) {
  static_assert(Size >= 1, "luminal: unfold's window size must be >= 1");
  static_assert(Stride >= 1, "luminal: unfold's stride must be >= 1");
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (!In::dims[axis].is_static()) {
    (void)error::unfold_needs_static_extent<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else if constexpr (In::dims[axis].offset < Size) {
    (void)error::unfold_window_too_large<In::text, Axis, Size>{};
    return std::remove_cvref_t<X>{};
  } else {
    return typename node_of<Unfold<int(axis), Size, Stride>, std::remove_cvref_t<X>>::type{};
  }
}

}  // namespace luminal
