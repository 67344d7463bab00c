// expand (broadcast_to): stretches extents of size 1 and prepends new axes. Views only.
#pragma once
#include "../errors.hpp"
#include "view.hpp"

namespace luminal {

template <shape_type Target>
struct Expand : view_op {
  static constexpr std::string_view name = "expand";
  template <class In>
  using shape = Target;

  template <std::size_t RO, std::size_t RI>
  LUMINAL_HD static index_t source(index_t i, const extents<RO>& out, const extents<RI>& in) {
    if constexpr (RI == 0) {
      return 0;
    } else {
      // The common broadcasts take one or two divisions instead of one per axis: size-1
      // (or new) leading axes, a bias over a batch, and size-1 trailing axes, a keepdim
      // reduction spread over its row, around axes that are not broadcast.
      index_t trailing = 1;
      std::size_t end = RI;
      while (end > 0 && in[end - 1] == 1) trailing *= out[--end + (RO - RI)];
      std::size_t begin = 0;
      while (begin < end && in[begin] == 1) ++begin;
      index_t middle = 1;
      bool plain = true;
      for (std::size_t k = begin; k < end; ++k) {
        plain = plain && in[k] == out[k + (RO - RI)];
        middle *= in[k];
      }
      if (plain) {
        index_t j = trailing == 1 ? i : i / trailing;
        return begin == 0 && RO == RI ? j : j % middle;
      }
      auto coord = detail::unravel(i, out);
      index_t flat = 0;
      for (std::size_t k = 0; k < RI; ++k) {
        index_t c = in[k] == 1 ? 0 : coord[k + (RO - RI)];
        flat = flat * in[k] + c;
      }
      return flat;
    }
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
constexpr auto expand(X, Shape<D...> = {}) {
  using In = shape_t<X>;
  using Out = Shape<D...>;
  if constexpr (std::is_same_v<In, Out>) {
    return std::remove_cvref_t<X>{};
  } else {
    if constexpr (!detail::expand_allowed(In::dims, Out::dims))
      (void)error::cannot_expand<In::text, Out::text>{};
    return typename node_of<Expand<Out>, std::remove_cvref_t<X>>::type{};
  }
}

}  // namespace luminal
