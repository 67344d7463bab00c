// squeeze and unsqueeze: reshapes that remove or insert axes of extent 1 (views, no copy).
#pragma once
#include "reshape.hpp"

namespace luminal {

namespace detail {
/// dims with Dim{1} inserted before position `at` (0 <= at <= R).
template <std::size_t R>
constexpr dims_t<R + 1> inserted_unit(const dims_t<R>& dims, std::size_t at) {
  dims_t<R + 1> out{};
  for (std::size_t k = 0, j = 0; k <= R; ++k) out[k] = k == at ? Dim{1} : dims[j++];
  return out;
}
/// How many axes squeeze keeps: all but the static extents of 1 that it may remove
/// (`only` is R for any such axis, else the one axis asked for).
template <std::size_t R>
constexpr std::size_t squeezed_rank(const dims_t<R>& dims, std::size_t only) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < R; ++k) n += !(dims[k] == Dim{1} && (only == R || only == k));
  return n;
}
template <class In, std::size_t Only>
constexpr auto squeezed_dims() {
  dims_t<squeezed_rank(In::dims, Only)> out{};
  for (std::size_t k = 0, j = 0; k < In::rank; ++k)
    if (!(In::dims[k] == Dim{1} && (Only == In::rank || Only == k))) out[j++] = In::dims[k];
  return out;
}
}  // namespace detail

/// A new axis of extent 1 at position Axis (-1 appends), as torch.unsqueeze:
/// [3, 4] -> unsqueeze<0> -> [1, 3, 4]; unsqueeze<-1> -> [3, 4, 1].
template <int Axis, expression X>
constexpr auto unsqueeze(X x) {
  using In = shape_t<X>;
  constexpr std::size_t at = normalize_axis<In::rank + 1>(Axis);
  if constexpr (at > In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    return reshape(x, shape_from<detail::inserted_unit(In::dims, at)>{});
  }
}

/// Removes axes of extent 1, as torch.squeeze: `squeeze(x)` every one, `squeeze<Axis>(x)`
/// that one, and x unchanged when its extent is not 1. Only a static 1 counts: a symbolic
/// extent (Batch) is never removed, even when it is bound to 1.
template <int... Axis, expression X>
constexpr auto squeeze(X x) {
  static_assert(sizeof...(Axis) <= 1, "luminal: squeeze takes at most one axis, as torch.squeeze(x, dim)");
  using In = shape_t<X>;
  constexpr std::size_t only = [] {
    if constexpr (sizeof...(Axis) == 0) return In::rank;
    else return normalize_axis<In::rank>(Axis...);
  }();
  if constexpr (sizeof...(Axis) == 1 && only >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis...>{};
    return std::remove_cvref_t<X>{};
  } else {
    return reshape(x, shape_from<detail::squeezed_dims<In, only>()>{});
  }
}

}  // namespace luminal
