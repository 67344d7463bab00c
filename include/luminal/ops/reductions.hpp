// Composite reductions: mean, variance, softmax, log_softmax, logsumexp, argmax.
#pragma once
#include "composite.hpp"
#include "iota.hpp"
#include "reduce.hpp"
#include "stop_gradient.hpp"

namespace luminal {

namespace detail {
/// The number of elements the masked axes hold, as an expression: a literal when all
/// those extents are static, times an Extent node for each symbolic one.
template <element_type T, class In, unsigned long long Mask, std::size_t K = 0>
constexpr auto count_expression() {
  if constexpr (K == In::rank) {
    return c<1.0>;
  } else if constexpr (!masked(Mask, K)) {
    return count_expression<T, In, Mask, K + 1>();
  } else if constexpr (In::dims[K].is_static()) {
    using Rest = decltype(count_expression<T, In, Mask, K + 1>());
    if constexpr (is_literal<Rest>::value) return c<Rest::value * double(In::dims[K].offset)>;
    else return Rest{} * c<double(In::dims[K].offset)>;
  } else {
    using Rest = decltype(count_expression<T, In, Mask, K + 1>());
    return Extent<In::dims[K], T>{} * Rest{};
  }
}
}  // namespace detail

/// Mean over axes (all when none given). Divides by runtime extents on symbolic axes.
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto mean(X x, Keep... keep) {
  using In = shape_t<X>;
  constexpr auto mask = detail::axis_mask<In::rank, Axes...>();
  auto total = sum<Axes...>(x, keep...);
  using Count = decltype(detail::count_expression<typename X::value_type, In, mask>());
  if constexpr (is_literal<Count>::value) return total * c<1.0 / Count::value>;
  else return total * recip(Count{});
}

/// Population variance (divides by N, as torch.var(unbiased=False)).
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto variance(X x, Keep... keep) {
  auto centered = x - mean<Axes...>(x, keepdim);
  return mean<Axes...>(centered * centered, keep...);
}

/// log(sum(exp(x))) over one axis, stable: shifts by the max first.
template <int Axis, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto logsumexp(X x, Keep...) {
  // The result does not depend on the shift, so its gradient through the max is zero:
  // stop_gradient spares the backward pass the max's tie masks and sums.
  auto m = stop_gradient(max<Axis>(x, keepdim));
  auto shifted = log(sum<Axis>(exp(x - m), keepdim)) + m;
  if constexpr (sizeof...(Keep) > 0) return shifted;
  else return reshape(shifted, shape_t<decltype(max<Axis>(x))>{});
}

/// Softmax over one axis: exp(x - max) / sum(exp(x - max)).
template <int Axis, expression X>
constexpr auto softmax(X x) {
  auto e = exp(x - stop_gradient(max<Axis>(x, keepdim)));  // shift-invariant: see logsumexp
  return e / sum<Axis>(e, keepdim);
}

/// log(softmax(x)) over one axis, stable: x - logsumexp(x).
template <int Axis, expression X>
constexpr auto log_softmax(X x) {
  return x - logsumexp<Axis>(x, keepdim);
}

/// Index of the maximum along an axis (the first one on ties, as torch.argmax), as i32.
template <int Axis, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto argmax(X x, Keep... keep) {
  using In = shape_t<X>;
  constexpr int axis = int(normalize_axis<In::rank>(Axis));
  auto index = iota<axis, i32>(In{});
  auto is_max = logical_not(less_than(x, max<axis>(x, keepdim)));
  // max over -index of the maximal positions picks the smallest index.
  auto candidates = where(is_max, neg(index), c<-2147483647.0>);
  return neg(max<axis>(candidates, keep...));
}

}  // namespace luminal
