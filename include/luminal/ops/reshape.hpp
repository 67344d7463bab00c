// reshape: same elements in row-major order, new extents. A view (flat index unchanged).
#pragma once
#include "../errors.hpp"
#include "view.hpp"

namespace luminal {

template <shape_type Target>
struct Reshape : view_op {
  static constexpr std::string_view name = "reshape";
  template <class In>
  using shape = Target;
  template <std::size_t RO, std::size_t RI>
  LUMINAL_HD static index_t source(index_t i, const extents<RO>&, const extents<RI>&) { return i; }
};

/// `auto flat = reshape(images, shape<Batch, 784>);` The element count must match,
/// symbolic extents included (Batch*Seq may be split into Batch, Seq and back).
template <expression X, Dim... D>
constexpr auto reshape(X, Shape<D...> = {}) {
  using In = shape_t<X>;
  using Out = Shape<D...>;
  if constexpr (std::is_same_v<In, Out>) {
    return std::remove_cvref_t<X>{};
  } else {
    if constexpr (!same_element_count(In::dims, Out::dims))
      (void)error::reshape_changes_element_count<In::text, Out::text>{};
    return typename node_of<Reshape<Out>, std::remove_cvref_t<X>>::type{};
  }
}

}  // namespace luminal
