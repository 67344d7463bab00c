// stop_gradient(x): x in the forward pass, a constant to the reverse pass.
#pragma once
#include "map.hpp"

namespace luminal {

namespace fn {
struct StopGradient : same_type_result {
  static constexpr std::string_view name = "stop_gradient";
  static constexpr int cost = 0;
  static constexpr bool floating_only = false, takes_bool = true;
  template <class T> LUMINAL_HD static T apply(T x) { return x; }
};
}  // namespace fn

/// Blocks gradients: `grad(loss(stop_gradient(target)), w)` treats target as data.
template <expression X>
constexpr auto stop_gradient(X x) { return make_unary<fn::StopGradient>(x); }

}  // namespace luminal
