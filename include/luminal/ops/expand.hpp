// expand (broadcast_to): stretches extents of size 1 and prepends new axes. Views only.
#pragma once
#include "../core/errors.hpp"
#include "view.hpp"

namespace luminal {

template <shape_type Target>
struct Expand : view_op {
  static constexpr std::string_view name = "expand";
  template <class In>
  using shape = Target;

  /// Size-1 input axes read coordinate 0; new leading axes are dropped. Static extents
  /// fold, so a broadcast read costs nothing per element. The coordinate is multiplied by
  /// 0 or 1 rather than chosen: GCC vectorizes no loop that selects by a condition fixed
  /// outside it (luminal turns off the loop unswitching that would hoist it).
  template <std::size_t RO, std::size_t RI>
  LUMINAL_COORDINATE_MAP static extents<RI> to_child(const extents<RO>& c, const extents<RO>&, const extents<RI>& in) {
    extents<RI> in_c{};
    for (std::size_t k = 0; k < RI; ++k) in_c[k] = c[k + (RO - RI)] * index_t(in[k] != 1);
    return in_c;
  }
};

namespace detail {
template <std::size_t RI, std::size_t RO>
constexpr bool expand_allowed(const dims_t<RI>& in, const dims_t<RO>& out) {
  if (RI > RO) return false;
  for (std::size_t k = 0; k < RI; ++k) {
    const Dim& from = in[k];
    const Dim& to = out[k + (RO - RI)];
    if (!(from == to || from == Dim{1})) return false;
  }
  return true;
}
}  // namespace detail

/// Broadcasts x to shape S (NumPy rules); returns x itself when the shape already is S.
/// `auto b = expand(bias, shape<Batch, 256>);`
template <expression X, Dim... D>
  requires(detail::expand_allowed(shape_t<X>::dims, Shape<D...>::dims))
constexpr auto expand(X, Shape<D...> = {}) {
  using In = shape_t<X>;
  using Out = Shape<D...>;
  if constexpr (std::is_same_v<In, Out>) return std::remove_cvref_t<X>{};
  else return typename node_of<Expand<Out>, std::remove_cvref_t<X>>::type{};
}
/// Chosen when an extent other than 1 would be stretched: never defined, its incomplete
/// return type is the error, at the caller's line (errors.hpp).
template <auto A, Dim... D>
error::expand_can_only_stretch_extents_of_size_1<A, exact_string<Shape<D...>::text>> expand(const shaped<A>&,
                                                                                           Shape<D...>);

}  // namespace luminal
