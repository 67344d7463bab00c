// slice and pad along one axis: exact adjoints of each other, both views.
#pragma once
#include <bit>
#include <cstdint>
#include "../core/errors.hpp"
#include "view.hpp"

namespace luminal {

/// Elements [Begin, End) of axis Axis. On a symbolic axis End may be <= 0, counting
/// from the end as in Python (End = 0 means "to the end").
template <int Axis, long long Begin, long long End>
struct Slice : view_op {
  static constexpr std::string_view name = "slice";
  template <class In>
  static constexpr auto sliced_dims() {
    auto dims = In::dims;
    Dim& d = dims[Axis];
    if (d.is_static()) d = Dim{(End <= 0 ? d.offset + End : End) - Begin};
    else d = d + (End - Begin);  // End <= 0 on symbolic axes
    return dims;
  }
  template <class In>
  using shape = shape_from<sliced_dims<In>()>;
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> to_child(extents<R> c, const extents<R>&, const extents<R>&) {
    c[Axis] += index_t(Begin);
    return c;
  }
};

/// Before and After zeros (or the double whose bits are ValueBits) around axis Axis. The
/// value is a type's argument as its bits, never as a double: nvcc writes floating-point
/// template arguments into its generated host code with 6 significant digits, so a kernel
/// over a pad of 0.1 would be registered as another type than the one launched ("invalid
/// device function"); integers it writes exactly.
template <int Axis, long long Before, long long After, std::uint64_t ValueBits>
struct Pad : view_op {
  static constexpr std::string_view name = "pad";
  static constexpr double pad_value = std::bit_cast<double>(ValueBits);
  template <class In>
  static constexpr auto padded_dims() {
    auto dims = In::dims;
    dims[Axis] = dims[Axis] + (Before + After);
    return dims;
  }
  template <class In>
  using shape = shape_from<padded_dims<In>()>;
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> to_child(extents<R> c, const extents<R>&, const extents<R>&) {
    c[Axis] -= index_t(Before);
    return c;
  }
  /// False for an element in the padding.
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static bool inside(const extents<R>& child_c, const extents<R>& in) {
    return std::uint64_t(child_c[Axis]) < std::uint64_t(in[Axis]);  // one compare for 0 <= c < n
  }
};

/// Zeros along axis Axis by amounts that may be symbolic extents: Before in front, After
/// behind, one of them static (concat along a symbolic axis places its second operand
/// behind the first's Past elements: PadExtents<0, Past, 0>). A negative amount removes
/// elements instead (the adjoint, PadExtents<0, -Past, 0>). Where Before is symbolic the
/// shift is read from the extents at run time: out - in - After.
template <int Axis, Dim Before, Dim After>
struct PadExtents : view_op {
  static_assert(Before.is_static() || After.is_static(),
                "luminal: internal error: a pad by two symbolic amounts has no run-time shift");
  static constexpr std::string_view name = "pad";
  static constexpr double pad_value = 0.0;
  template <class In>
  static constexpr auto padded_dims() {
    auto dims = In::dims;
    Dim with_before, with_both;
    if (!add_extents(dims[Axis], Before, with_before) || !add_extents(with_before, After, with_both))
      throw std::logic_error("luminal: a pad whose extent is no single extent (Past + Seq)");
    dims[Axis] = with_both;
    return dims;
  }
  template <class In>
  using shape = shape_from<padded_dims<In>()>;
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static extents<R> to_child(extents<R> c, const extents<R>& out, const extents<R>& in) {
    if constexpr (Before.is_static()) c[Axis] -= index_t(Before.offset);
    else c[Axis] -= out[Axis] - in[Axis] - index_t(After.offset);
    return c;
  }
  /// False for an element in the padding.
  template <std::size_t R>
  LUMINAL_COORDINATE_MAP static bool inside(const extents<R>& child_c, const extents<R>& in) {
    return std::uint64_t(child_c[Axis]) < std::uint64_t(in[Axis]);
  }
};

namespace detail {
/// x padded with zeros by Before and After along axis Axis (normalized): a Pad where both
/// are static, else a PadExtents. Concat's placement of its operands.
template <int Axis, Dim Before, Dim After, expression X>
constexpr auto pad_by(X) {
  if constexpr (Before.is_static() && After.is_static())
    return typename node_of<Pad<Axis, Before.offset, After.offset, std::bit_cast<std::uint64_t>(0.0)>,
                            std::remove_cvref_t<X>>::type{};
  else
    return typename node_of<PadExtents<Axis, Before, After>, std::remove_cvref_t<X>>::type{};
}
}  // namespace detail

/// `slice<1, 2, 5>(x)` keeps elements 2, 3, 4 of axis 1. Negative Axis counts from the end.
template <int Axis, long long Begin, long long End, expression X>
constexpr auto slice(X) {
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    constexpr Dim d = In::dims[axis];
    constexpr bool ok = d.is_static()
                            ? (Begin >= 0 && (End <= 0 ? d.offset + End : End) >= Begin &&
                               (End <= 0 ? d.offset + End : End) <= d.offset)
                            : (Begin >= 0 && End <= 0);
    if constexpr (!ok) {
      (void)error::slice_out_of_range<In::text, Axis, Begin, End>{};
      return std::remove_cvref_t<X>{};
    } else {
      return typename node_of<Slice<int(axis), Begin, End>, std::remove_cvref_t<X>>::type{};
    }
  }
}

/// `pad<1, 2, 3>(x)` adds 2 elements before and 3 after along axis 1, filled with Value.
template <int Axis, long long Before, long long After, double Value = 0.0, expression X>
constexpr auto pad(X) {
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  static_assert(Before >= 0 && After >= 0, "luminal: pad amounts must be >= 0 (use slice to remove elements)");
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    return typename node_of<Pad<int(axis), Before, After, std::bit_cast<std::uint64_t>(Value)>,
                            std::remove_cvref_t<X>>::type{};
  }
}

}  // namespace luminal
