// Primitive reductions over one axis: sum and max. The reduced axis is kept with extent
// 1 in the primitive; the user-facing functions drop it unless asked to keep it.
#pragma once
#include <limits>

#include "../core/errors.hpp"
#include "reshape.hpp"
#include "vector_math.hpp"

namespace luminal {

namespace fn {
struct SumReduce {
  static constexpr std::string_view name = "sum";
  template <class T> LUMINAL_HD static T identity() { return T(0); }
  template <class T> LUMINAL_HD static T combine(T acc, T x) { return acc + x; }
};
struct MaxReduce {
  static constexpr std::string_view name = "max";
  template <class T> LUMINAL_HD static T identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  template <class T> LUMINAL_HD static T combine(T acc, T x) {  // as fn::Max, NaN wins
    T larger = detail::select_value(detail::quiet_greater(x, acc), x, acc);
    return detail::select_value(x != x, x, larger);
  }
};
}  // namespace fn

template <class F, int Axis>
struct Reduce {
  static constexpr op_kind kind = op_kind::reduce;
  static constexpr std::string_view name = F::name;
  static constexpr int axis = Axis;
  using functor = F;
  template <class T>
  using value_type = T;
  template <class In>
  static constexpr auto kept_dims() {
    auto dims = In::dims;
    dims[Axis] = Dim{1};
    return dims;
  }
  template <class In>
  using shape = shape_from<kept_dims<In>()>;
};

/// Marker: pass `keepdim` to keep reduced axes with extent 1.
struct keepdim_t {};
inline constexpr keepdim_t keepdim{};

namespace detail {
template <class F, int Axis, expression X>
constexpr auto reduce_one(X) {
  using In = shape_t<X>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return std::remove_cvref_t<X>{};
  } else {
    return typename node_of<Reduce<F, int(axis)>, std::remove_cvref_t<X>>::type{};
  }
}
template <class In, int Axis>
constexpr void check_axis() {
  if constexpr (normalize_axis<In::rank>(Axis) >= In::rank) (void)error::axis_out_of_range<In::text, Axis>{};
}
/// Bit k set: axis k is reduced. (A plain integer: GCC 12 conflates some array-valued
/// template arguments of function templates.)
template <std::size_t R, int... Axes>
constexpr unsigned long long axis_mask() {
  if constexpr (sizeof...(Axes) == 0) {
    return R >= 64 ? ~0ull : (1ull << R) - 1;
  } else {
    unsigned long long mask = 0;
    for (int a : {Axes...}) {
      std::size_t k = normalize_axis<R>(a);
      if (k < R) mask |= 1ull << k;
    }
    return mask;
  }
}
constexpr bool masked(unsigned long long mask, std::size_t axis) { return (mask >> axis) & 1ull; }
template <class In, unsigned long long Mask>
constexpr auto dropped_dims() {
  constexpr std::size_t kept = [] { std::size_t n = 0; for (std::size_t k = 0; k < In::rank; ++k) n += !masked(Mask, k); return n; }();
  dims_t<kept> dims{};
  std::size_t j = 0;
  for (std::size_t k = 0; k < In::rank; ++k)
    if (!masked(Mask, k)) dims[j++] = In::dims[k];
  return dims;
}
template <class In, unsigned long long Mask>
constexpr auto keepdim_dims() {
  auto dims = In::dims;
  for (std::size_t k = 0; k < In::rank; ++k)
    if (masked(Mask, k)) dims[k] = Dim{1};
  return dims;
}
/// Whether axis k of In is reduced, static, and follows another such axis: it then joins
/// that axis's run (merged_runs).
template <class In, unsigned long long Mask>
constexpr bool joins_run(std::size_t k) {
  auto in_run = [](std::size_t j) { return masked(Mask, j) && In::dims[j].is_static(); };
  return k > 0 && in_run(k) && in_run(k - 1);
}
template <class In, unsigned long long Mask>
constexpr std::size_t merged_rank() {
  std::size_t r = 0;
  for (std::size_t k = 0; k < In::rank; ++k) r += !joins_run<In, Mask>(k);
  return r;
}
/// In with each run of adjacent reduced static axes merged into one (a reshape that keeps
/// the row-major order), and the mask over it: BatchNorm's statistics over [N, C, H, W]
/// reduce H W as one axis of H W elements, one kernel over long rows, not W and then H.
template <class In, unsigned long long Mask>
constexpr auto merged_runs() {
  dims_t<merged_rank<In, Mask>()> dims{};
  unsigned long long mask = 0;
  std::size_t j = 0;
  for (std::size_t k = 0; k < In::rank; ++k) {
    if (joins_run<In, Mask>(k)) {
      dims[j - 1] = Dim{dims[j - 1].offset * In::dims[k].offset};
    } else {
      dims[j] = In::dims[k];
      if (masked(Mask, k)) mask |= 1ull << j;
      ++j;
    }
  }
  return std::pair{dims, mask};
}
/// Reduces each masked axis in turn (innermost first, so flat layouts stay contiguous).
template <class F, unsigned long long Mask, std::size_t K, expression X>
constexpr auto reduce_masked(X x) {
  if constexpr (K == 0) return x;
  else if constexpr (masked(Mask, K - 1)) return reduce_masked<F, Mask, K - 1>(reduce_one<F, int(K - 1)>(x));
  else return reduce_masked<F, Mask, K - 1>(x);
}
/// x reduced over the axes of Mask, each kept with extent 1; runs of adjacent static axes
/// reduce as one (merged_runs). The reverse pass's sums over broadcast axes use it too.
template <class F, unsigned long long Mask, expression X>
constexpr auto reduce_kept(X x) {
  using In = shape_t<X>;
  if constexpr (merged_rank<In, Mask>() < In::rank) {
    constexpr auto merged = merged_runs<In, Mask>();
    auto kept = reduce_masked<F, merged.second, merged.first.size()>(reshape(x, shape_from<merged.first>{}));
    return reshape(kept, shape_from<keepdim_dims<In, Mask>()>{});
  } else {
    return reduce_masked<F, Mask, In::rank>(x);
  }
}
template <class F, int... Axes, expression X, class... Keep>
constexpr auto reduce_axes(X x, Keep...) {
  using In = shape_t<X>;
  constexpr auto mask = axis_mask<In::rank, Axes...>();
  (check_axis<In, Axes>(), ...);
  auto kept = reduce_kept<F, mask>(x);
  if constexpr (sizeof...(Keep) > 0) return kept;
  else return reshape(kept, shape_from<dropped_dims<In, mask>()>{});
}
}  // namespace detail

/// Sum over axes (all when none given); `sum<1>(x)`, `sum<-1>(x, keepdim)`, `sum(x)`.
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto sum(X x, Keep... keep) { return detail::reduce_axes<fn::SumReduce, Axes...>(x, keep...); }

/// Maximum over axes (all when none given); NaN propagates.
template <int... Axes, expression X, class... Keep>
  requires(std::is_same_v<Keep, keepdim_t> && ...)
constexpr auto max(X x, Keep... keep) { return detail::reduce_axes<fn::MaxReduce, Axes...>(x, keep...); }

}  // namespace luminal
