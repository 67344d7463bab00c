// Composite reductions: mean, var, variance, stddev, min, softmax, log_softmax,
// logsumexp, argmax, argmin (cumsum: cumulative.hpp).
#pragma once
#include "composite.hpp"
#include "cumulative.hpp"
#include "iota.hpp"
#include "matmul.hpp"
#include "permute.hpp"
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
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(mean<Axes...>(cast<f32>(x), keep...));  // cast.hpp
  } else {
    using In = shape_t<X>;
    constexpr auto mask = detail::axis_mask<In::rank, Axes...>();
    auto total = sum<Axes...>(x, keep...);
    using Count = decltype(detail::count_expression<typename X::value_type, In, mask>());
    if constexpr (is_literal<Count>::value) return total * c<1.0 / Count::value>;
    else return total * recip(Count{});
  }
}

/// Marker for var and stddev: divide by N - C, as torch's `correction=` (default 1,
/// Bessel's correction). `var<1>(x, keepdim, correction<0>)` is the population variance.
template <int C>
struct correction_t {
  static constexpr int value = C;
};
template <int C>
inline constexpr correction_t<C> correction{};

namespace detail {
template <class O>
struct is_correction : std::false_type {};
template <int C>
struct is_correction<correction_t<C>> : std::true_type {};
template <class O>
concept var_option = std::is_same_v<O, keepdim_t> || is_correction<O>::value;
template <class... O>
constexpr int correction_in() {
  int c = 1;
  ([&] { if constexpr (is_correction<O>::value) c = O::value; }(), ...);
  return c;
}
}  // namespace detail

/// Variance over axes (all when none given): sum((x - mean)^2) / (N - correction), as
/// torch.var(x, dims, correction=C, keepdim=...). Options, in any order: `keepdim`,
/// `correction<C>` (default 1). N - C <= 0 gives inf or NaN, as torch does.
template <int... Axes, expression X, class... Options>
  requires(detail::var_option<Options> && ...)
constexpr auto var(X x, Options... options) {
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(var<Axes...>(cast<f32>(x), options...));  // cast.hpp
  } else {
    using In = shape_t<X>;
    constexpr auto mask = detail::axis_mask<In::rank, Axes...>();
    constexpr int correction = detail::correction_in<Options...>();
    auto centered = x - mean<Axes...>(x, keepdim);
    auto total = [&] {
      if constexpr ((std::is_same_v<Options, keepdim_t> || ...)) return sum<Axes...>(centered * centered, keepdim);
      else return sum<Axes...>(centered * centered);
    }();
    using Count = decltype(detail::count_expression<typename X::value_type, In, mask>());
    if constexpr (is_literal<Count>::value) return total * c<1.0 / (Count::value - correction)>;
    else if constexpr (correction == 0) return total * recip(Count{});
    else return total * recip(Count{} - c<double(correction)>);
  }
}

/// Population variance (divides by N): var with correction<0>, as torch.var(unbiased=False).
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto variance(X x, Keep... keep) {
  return var<Axes...>(x, keep..., correction<0>);
}

/// Standard deviation: sqrt(var), with var's options, as torch.std. (Not named `std`:
/// under `using namespace luminal`, a call `std<1>(x)` would be ambiguous with namespace std.)
template <int... Axes, expression X, class... Options>
  requires(detail::var_option<Options> && ...)
constexpr auto stddev(X x, Options... options) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(stddev<Axes...>(cast<f32>(x), options...));  // cast.hpp
  else return sqrt(var<Axes...>(x, options...));
}

/// Minimum over axes (all when none given), as torch.amin: NaN propagates, tied minima
/// share the gradient evenly. (-max(-x), so it inherits max's rules.)
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto min(X x, Keep... keep) {
  return neg(max<Axes...>(neg(x), keep...));
}

/// log(sum(exp(x))) over one axis, stable: shifts by the max first.
template <int Axis, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto logsumexp(X x, Keep... keep) {
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(logsumexp<Axis>(cast<f32>(x), keep...));  // cast.hpp
  } else {
    // The result does not depend on the shift, so its gradient through the max is zero:
    // stop_gradient spares the backward pass the max's tie masks and sums.
    auto m = stop_gradient(max<Axis>(x, keepdim));
    auto shifted = log(sum<Axis>(exp(x - m), keepdim)) + m;
    if constexpr (sizeof...(Keep) > 0) return shifted;
    else return reshape(shifted, shape_t<decltype(max<Axis>(x))>{});
  }
}

/// Softmax over one axis: exp(x - max) / sum(exp(x - max)).
template <int Axis, expression X>
constexpr auto softmax(X x) {
  if constexpr (detail::half_valued<X>) {
    return cast<value_t<X>>(softmax<Axis>(cast<f32>(x)));  // cast.hpp
  } else {
    auto e = exp(x - stop_gradient(max<Axis>(x, keepdim)));  // shift-invariant: see logsumexp
    return e / sum<Axis>(e, keepdim);
  }
}

/// log(softmax(x)) over one axis, stable: x - logsumexp(x).
template <int Axis, expression X>
constexpr auto log_softmax(X x) {
  if constexpr (detail::half_valued<X>) return cast<value_t<X>>(log_softmax<Axis>(cast<f32>(x)));  // cast.hpp
  else return x - logsumexp<Axis>(x, keepdim);
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

/// Index of the minimum along an axis (the first one on ties, as torch.argmin), as i32.
template <int Axis, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto argmin(X x, Keep... keep) {
  return argmax<Axis>(neg(x), keep...);
}

}  // namespace luminal
