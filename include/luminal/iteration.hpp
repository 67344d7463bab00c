// Where an elementwise kernel's loop nest runs (detail::iteration): over the root's
// coordinates, a permute's input, or the input of a reshape under it; and the shape facts
// of a nest that the kernels read (the row's axis and extent, the short-row limit).
#pragma once
#include <cstdint>
#include <utility>

#include "eval.hpp"
namespace luminal::detail {

/// The longest row run as a short row: unrolled inside the loop over rows (a pool's
/// window, the inner axis a reshape splits off, a small image's rows in im2col and col2im).
/// Longer rows are loops of their own. Rows of 9 to 16 were loops once: their setup (a
/// walk through the views per row) and scalar ends cost im2col, col2im and the pools about
/// twice what these unrolled rows do.
inline constexpr index_t short_row_limit = 16;

/// The last axis before axis `end` whose extent is not statically 1, or `none` if there
/// is none.
template <index_t... E>
constexpr std::size_t last_axis_not_one(std::integer_sequence<index_t, E...>, std::size_t end, std::size_t none) {
  constexpr index_t extents[] = {E..., 0};
  std::size_t axis = none;
  for (std::size_t k = 0; k < end && k < sizeof...(E); ++k)
    if (extents[k] != 1) axis = k;
  return axis;
}
/// The last axis of a shape whose extent is not statically 1 (0 if there is none): the
/// loop nests' inner axis. Axes after it hold coordinate 0 only.
template <index_t... E>
constexpr std::size_t row_axis(std::integer_sequence<index_t, E...> s) {
  return last_axis_not_one(s, sizeof...(E), 0);
}
/// The static extent of axis k, or -1 where it is symbolic or past the rank.
template <index_t... E>
constexpr index_t static_extent(std::integer_sequence<index_t, E...>, std::size_t k) {
  constexpr index_t extents[] = {E..., -1};
  return k < sizeof...(E) && extents[k] >= 0 ? extents[k] : -1;
}
/// The static extent of the inner axis, or -1 where it is symbolic (or the rank is 0).
template <index_t... E>
constexpr index_t row_extent(std::integer_sequence<index_t, E...> s) {
  return sizeof...(E) == 0 ? -1 : static_extent(s, row_axis(s));
}

/// Where a kernel rooted at Id loops: over the coordinates of node `it`, which is the root
/// or, past the reshapes at the root (same elements, same order), a permute's input, read
/// in its own order while the permuted writes go out at a stride. `permute` is that
/// permute, or -1. A permute whose input has a shorter inner axis than its own stays: the
/// loop would run over fewer elements per row (im2col's windows end in the window's 3
/// offsets, its rows in the image's 28 columns).
template <class P, int Id>
struct iteration {
  template <int N>
  using node = typename evaluator<P>::template node_t<N>;
  template <int N>
  static constexpr int child = flat::detail::first(typename node<N>::children{});
  template <int N>
  static constexpr bool peelable = node<N>::kind == op_kind::view && !node<child<N>>::stored && node<child<N>>::rank > 0;
  static constexpr int past_reshapes = [] {
    if constexpr (requires { node<Id>::op::is_reshape; }) {
      if constexpr (peelable<Id>) return iteration<P, child<Id>>::past_reshapes;
      else return Id;
    } else {
      return Id;
    }
  }();
  template <int N>
  static constexpr bool shortens_rows = [] {
    constexpr index_t inner = row_extent(typename node<child<N>>::static_extents{});
    constexpr index_t outer = row_extent(typename node<N>::static_extents{});
    return inner >= 0 && outer >= 0 && inner < outer;
  }();
  static constexpr int permute = [] {
    if constexpr (requires { node<past_reshapes>::op::from_child(extents<node<past_reshapes>::rank>{}); }) {
      if constexpr (peelable<past_reshapes> && !shortens_rows<past_reshapes>) return past_reshapes;
      else return -1;
    } else {
      return -1;
    }
  }();
  static constexpr int it = [] {
    if constexpr (permute >= 0) return child<permute>;
    else return past_reshapes;
  }();
  /// Whether node N is computed in this kernel: the iteration node itself, or a node the
  /// plan fuses into it.
  template <int N>
  static constexpr bool computed_here = N == it || !node<N>::stored;
  /// A reshape under `it`, reached through maps, that only splits axes and splits the
  /// inner one into a short last axis (a max pool's gradient read in (.., 28) columns as
  /// (.., 14, 2) windows), or -1. The nest then runs over the reshape's input, whose
  /// inner rows of at most short_row_limit run unrolled, and no coordinate is divided:
  /// the reshape reads its input where the nest is, the other reads merge coordinates
  /// back by multiply-adds.
  template <int N>
  static constexpr int split_under() {
    using X = node<N>;
    if constexpr (!computed_here<N>) {
      return -1;
    } else if constexpr (X::kind == op_kind::map) {
      return []<int... C>(std::integer_sequence<int, C...>) {
        int found = -1;
        ((found = found >= 0 ? found : split_under<C>()), ...);
        return found;
      }(typename X::children{});
    } else if constexpr (requires { X::op::only_splits; }) {
      using In = typename node<child<N>>::static_extents;
      constexpr std::size_t row = row_axis(typename X::static_extents{});
      constexpr index_t inner = row_extent(In{});
      if constexpr (X::op::only_splits && X::rank > 0 && X::op::inputs_of(row) > 1 && inner > 1 &&
                    inner <= detail::short_row_limit)
        return N;
      else
        return -1;
    } else {
      return -1;
    }
  }
  /// A reshape under `it`, reached through maps whose other operands have one value
  /// everywhere, that only merges axes into longer rows of its input (a convolution's
  /// (.., Ho Wo) GEMM output read as (.., Ho, Wo) by its bias and ReLU), or -1. The nest
  /// then runs over the reshape's input, in rows of Ho Wo instead of Wo.
  template <int N>
  static constexpr int merge_under() {
    using X = node<N>;
    using eval = evaluator<P>;
    if constexpr (!computed_here<N>) {
      return -1;
    } else if constexpr (X::kind == op_kind::map) {
      return []<int... C>(std::integer_sequence<int, C...>) {
        if constexpr (((eval::template coordinate_free<C>() ? 0 : 1) + ...) != 1) {
          return -1;
        } else {
          int found = -1;
          ((found = eval::template coordinate_free<C>() ? found : merge_under<C>()), ...);
          return found;
        }
      }(typename X::children{});
    } else if constexpr (requires { X::op::only_merges; }) {
      constexpr index_t inner = row_extent(typename node<child<N>>::static_extents{});
      constexpr index_t outer = row_extent(typename X::static_extents{});
      if constexpr (X::op::only_merges && X::rank > 0 && outer > 0 && inner > outer) return N;
      else return -1;
    } else {
      return -1;
    }
  }
  static constexpr int split = [] {
    if constexpr (permute < 0 && node<it>::kind == op_kind::map && node<it>::rank > 0) {
      if constexpr (split_under<it>() >= 0) return split_under<it>();
      else return merge_under<it>();
    } else {
      return -1;
    }
  }();
  /// Whether `split` is a reshape that merges axes (merge_under), not one that splits them.
  static constexpr bool merges = [] {
    if constexpr (split >= 0) return !node<split>::op::only_splits;
    else return false;
  }();
  /// The node whose extents the loop nest runs over.
  static constexpr int loop = [] {
    if constexpr (split >= 0) return child<split>;
    else return it;
  }();
};

}  // namespace luminal::detail
