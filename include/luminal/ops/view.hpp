// Movement ops are views: a view node maps the coordinates a kernel asks for to the
// coordinates of its child, so no data moves until a kernel reads through the view. Every
// map is affine (a permutation, a shift, a zeroed axis, i * stride + k) except a reshape
// that merges axes: the kernels' loop nests advance coordinates, never divide per element.
#pragma once
#include <array>

#include "../core/node.hpp"

namespace luminal {

/// Extents resolved at run time, one per axis; static extents are constants the
/// compiler folds into the index arithmetic.
template <std::size_t R>
using extents = std::array<index_t, R>;

namespace detail {
/// Coordinates of flat index i (in range) in row-major order. The first coordinate is
/// what remains after the inner ones: no division by the first extent, which is often a
/// runtime batch size (a real division, where static extents fold to multiplications).
template <std::size_t R>
LUMINAL_INLINE std::array<index_t, R> unravel(index_t i, const extents<R>& dims) {
  std::array<index_t, R> coord{};
  for (std::size_t k = R; k-- > 1;) {
    coord[k] = i % dims[k];
    i /= dims[k];
  }
  if constexpr (R > 0) coord[0] = i;
  return coord;
}
}  // namespace detail

/// A view op marker. A view op has `static extents<RI> to_child(c, out_dims, in_dims)`,
/// the child's coordinates of the view's coordinates c; a padding view also has
/// `inside(child_c, in_dims)`, false where the element is padding.
struct view_op {
  static constexpr op_kind kind = op_kind::view;
  template <class T>
  using value_type = T;
};

}  // namespace luminal
