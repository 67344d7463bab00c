// Cumulative ops along one axis: torch.cumsum, torch.cumprod, torch.logcumsumexp, and the
// linear recurrence h_t = a_t h_{t-1} + b_t that their gradients are made of. One opaque
// op family, Cumulative<Recurrence, Axis, Reverse>, walks each line of the axis once,
// carrying a running state: linear in the length, on any rank and axis, static or
// symbolic.
//
//     auto x = input<"x", f32>(shape<Batch, Seq>);
//     auto s = cumsum<1>(x);          // s[b, t] = x[b, 0] + ... + x[b, t]
//     auto p = cumprod<-1>(x);        // products, zero-safe gradient
//     auto l = logcumsumexp<1>(x);    // log(sum_{j <= t} exp(x[b, j])), stable
//     auto h = linear_recurrence<1>(a, b);   // h[t] = a[t] h[t-1] + b[t], h[-1] = 0
//
// Each is the op of `cumulative<recurrence::R, Axis, Reverse>(x...)`, which with Reverse
// walks from the last element to the first (torch.flip(cumsum(torch.flip(x)))).
//
// The input is read as [outer, L, inner] (L the axis' extent). Every (outer, inner) pair is
// one lane, walked from t = 0 to L - 1. On the host a thread takes a run of lanes next to
// each other in memory and walks them together, so that each step reads and writes a
// contiguous piece; along the last axis (inner = 1) a lane is one contiguous row, walked
// as a tight loop. On a GPU each thread walks one lane, neighbouring threads neighbouring
// lanes. The gradients (grad/rules.hpp, grad/forward.hpp) are scans of the same family and
// maps: cumsum's cotangent is the reversed cumsum of g; cumprod's and logcumsumexp's are
// reversed linear recurrences, which never divide by x and never exponentiate more than 0.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <cmath>
#include <string_view>

#include "../core/node.hpp"
#include "composite.hpp"
#include "slice.hpp"

namespace luminal {

/// The recurrences a Cumulative op carries. Each gives the state before the first element
/// (`start`) and the next state from the state and the element (`step`); `linear` reads
/// two inputs, a and b.
namespace recurrence {
struct sum {
  static constexpr std::string_view name = "cumsum", reversed = "reversed cumsum";
  static constexpr int inputs = 1;
  template <class T> LUMINAL_HD static T start() { return T(0); }
  template <class T> LUMINAL_HD static T step(T h, T x, T) { return h + x; }
};
struct product {
  static constexpr std::string_view name = "cumprod", reversed = "reversed cumprod";
  static constexpr int inputs = 1;
  template <class T> LUMINAL_HD static T start() { return T(1); }
  template <class T> LUMINAL_HD static T step(T h, T x, T) { return h * x; }
};
/// log(e^h + e^x), as torch's logcumsumexp kernel: the larger plus log1p of e^(smaller -
/// larger), NaN propagating; two equal infinities give that infinity (the start is -inf).
struct logaddexp {
  static constexpr std::string_view name = "logcumsumexp", reversed = "reversed logcumsumexp";
  static constexpr int inputs = 1;
  template <class T> LUMINAL_HD static T start() { return -T(INFINITY); }
  template <class T> LUMINAL_HD static T step(T h, T x, T) {
    using std::exp;
    using std::log1p;
    const T lo = h < x ? h : x, hi = h < x ? x : h;  // a NaN h lands in hi, a NaN x in lo
    if (lo != hi || lo - lo == T(0)) return hi + log1p(exp(lo - hi));  // lo - lo == 0: lo finite
    return h;
  }
};
/// h = a h + b (inputs a, b).
struct linear {
  static constexpr std::string_view name = "linear recurrence", reversed = "reversed linear recurrence";
  static constexpr int inputs = 2;
  template <class T> LUMINAL_HD static T start() { return T(0); }
  template <class T> LUMINAL_HD static T step(T h, T a, T b) { return a * h + b; }
};
}  // namespace recurrence

namespace detail {
/// Lanes a host thread walks side by side along an inner axis: one step of them is a
/// contiguous run of this many elements.
inline constexpr index_t cumulative_tile = 16;

/// The walk over [outer, length, inner]. Work unit u is a run of up to Tile lanes (a whole
/// row where inner = 1); it is started by the call whose [begin, end) holds u * span, so
/// a launch of units * span indices hands each thread units in proportion to their work
/// (span = length on the host, whose pool splits launches by index count) or one unit per
/// index (span = 1 on a GPU).
template <class R, class T, bool Reverse, index_t Tile>
struct cumulative_body {
  const T* x;
  const T* b;  // the second input of a two-input recurrence, else null
  T* y;
  index_t length, inner, tiles, span;

  LUMINAL_HD T step(T h, index_t k) const {
    if constexpr (R::inputs == 2) return R::template step<T>(h, x[k], b[k]);
    else return R::template step<T>(h, x[k], T(0));
  }
  /// Position s of the walk along a row that starts at base.
  LUMINAL_HD index_t at(index_t base, index_t s) const { return base + (Reverse ? length - 1 - s : s); }

  /// Rows rows of the last axis, length apart, walked together: independent chains, so
  /// that one step's latency (an add's, a log1p's) overlaps the others'.
  template <int Rows>
  LUMINAL_HD void walk_rows(index_t base) const {
    T h[Rows];
    for (int r = 0; r < Rows; ++r) h[r] = R::template start<T>();
    for (index_t s = 0; s < length; ++s)
      for (int r = 0; r < Rows; ++r) {
        const index_t k = at(base + r * length, s);
        y[k] = h[r] = step(h[r], k);
      }
  }

  /// A running sum along one row in blocks of 8: each block's own prefix sums do not wait
  /// for the running total, which then takes one add per block instead of one per element.
  LUMINAL_HD void sum_row(index_t base) const {
    T total = T(0);
    index_t s = 0;
    for (; s + 8 <= length; s += 8) {
      T local[8];
      local[0] = x[at(base, s)];
      for (int j = 1; j < 8; ++j) local[j] = local[j - 1] + x[at(base, s + j)];
      for (int j = 0; j < 8; ++j) y[at(base, s + j)] = total + local[j];
      total = total + local[7];
    }
    for (; s < length; ++s) y[at(base, s)] = total = total + x[at(base, s)];
  }

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    const index_t first_unit = (begin + span - 1) / span, end_unit = (end + span - 1) / span;
    if (inner == 1) {  // a unit is a row
      index_t u = first_unit;
      if constexpr (std::is_same_v<R, recurrence::sum>) {
        for (; u < end_unit; ++u) sum_row(u * length);
      } else {
        for (; u + 4 <= end_unit; u += 4) walk_rows<4>(u * length);
        for (; u < end_unit; ++u) walk_rows<1>(u * length);
      }
      return;
    }
    for (index_t u = first_unit; u < end_unit; ++u) {
      const index_t outer = u / tiles, first = (u % tiles) * Tile;
      const index_t base = outer * length * inner + first;
      const index_t width = inner - first < Tile ? inner - first : Tile;
      T h[Tile];
      for (index_t j = 0; j < Tile; ++j) h[j] = R::template start<T>();
      for (index_t s = 0; s < length; ++s) {
        const index_t row = base + (Reverse ? length - 1 - s : s) * inner;
        for (index_t j = 0; j < width; ++j) y[row + j] = h[j] = step(h[j], row + j);
      }
    }
  }
};
}  // namespace detail

/// The op of cumsum, cumprod, logcumsumexp and linear_recurrence: children x (or a, b) of
/// one shape; the result has that shape. Axis is normalized (0 .. rank - 1).
template <class Recurrence, int Axis, bool Reverse>
struct Cumulative {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = Reverse ? Recurrence::reversed : Recurrence::name;
  static constexpr int axis = Axis;
  using recurrence = Recurrence;
  static constexpr bool reverse = Reverse;
  template <class T, class... More>
  using value_type = T;
  template <class S, class... More>
  using shape = S;

  template <class N, class Runner>
  static void execute(Runner& runner, typename N::value_type* out) {
    using T = typename N::value_type;
    using X = boost::mp11::mp_first<typename N::children>;
    const index_t* d = runner.template dims_of<X>();
    index_t outer = 1, inner = 1;
    for (int k = 0; k < Axis; ++k) outer *= d[k];
    for (int k = Axis + 1; k < int(N::shape::rank); ++k) inner *= d[k];
    const index_t length = d[Axis];
    if (outer == 0 || inner == 0 || length == 0) return;
    const T* x = runner.template data_of<X>();
    const T* b = nullptr;
    if constexpr (Recurrence::inputs == 2) b = runner.template data_of<boost::mp11::mp_second<typename N::children>>();
    auto& backend = runner.backend;
    if constexpr (std::remove_cvref_t<decltype(backend)>::host_accessible) {
      constexpr index_t tile = detail::cumulative_tile;
      const index_t tiles = inner == 1 ? 1 : (inner + tile - 1) / tile;
      backend.parallel_for(outer * tiles * length,
                           detail::cumulative_body<Recurrence, T, Reverse, tile>{x, b, out, length, inner, tiles, length});
    } else {
      backend.parallel_for(outer * inner, detail::cumulative_body<Recurrence, T, Reverse, 1>{x, b, out, length, inner, inner, 1});
    }
  }
};

/// The Cumulative op of recurrence R along Axis (negative counts from the end) over xs
/// (one operand, or a and b for recurrence::linear, of one shape and element type).
/// Reverse walks from the last element to the first.
///
///     auto suffix_sums = cumulative<recurrence::sum, 0, true>(x);   // x[t] + ... + x[L-1]
template <class R, int Axis, bool Reverse = false, expression... X>
constexpr auto cumulative(X...) {
  static_assert(sizeof...(X) == std::size_t(R::inputs), "luminal: this recurrence takes another number of operands");
  using First = std::remove_cvref_t<boost::mp11::mp_first<boost::mp11::mp_list<X...>>>;
  using In = shape_t<First>;
  using T = value_t<First>;
  constexpr std::size_t axis = normalize_axis<In::rank>(Axis);
  static_assert(((std::is_same_v<shape_t<X>, In> && std::is_same_v<value_t<X>, T>) && ...),
                "luminal: the operands of a linear recurrence need one shape and one element type (expand them first)");
  static_assert(std::is_same_v<R, recurrence::sum> || std::is_same_v<R, recurrence::product> ? !std::is_same_v<T, boolean>
                                                                                           : floating_element<T>,
                "luminal: cumsum and cumprod need a number type (cast bool first); logcumsumexp and linear_recurrence "
                "a floating-point one");
  static_assert(!is_half_float<T>, "luminal: cumulative ops (cumsum, cumprod, logcumsumexp) do not take bf16 or f16 yet: "
                                   "apply them to cast<f32>(x)");
  if constexpr (axis >= In::rank) {
    (void)error::axis_out_of_range<In::text, Axis>{};
    return First{};
  } else {
    return typename node_of<Cumulative<R, int(axis), Reverse>, std::remove_cvref_t<X>...>::type{};
  }
}

/// Running sum along an axis, as torch.cumsum(x, dim): y[t] = x[0] + ... + x[t]. Any rank,
/// any axis, static or symbolic; the gradient is the reversed running sum of g.
template <int Axis, expression X> constexpr auto cumsum(X x) { return cumulative<recurrence::sum, Axis>(x); }

/// Running product along an axis, as torch.cumprod(x, dim). Its gradient never divides by
/// x: zeros in x give torch's gradient, with no NaN.
template <int Axis, expression X> constexpr auto cumprod(X x) { return cumulative<recurrence::product, Axis>(x); }

/// log(e^x[0] + ... + e^x[t]) along an axis, as torch.logcumsumexp(x, dim): stable for
/// large magnitudes (each step adds log1p(e^-|difference|) to the larger), -inf for a
/// prefix of -inf.
template <int Axis, expression X> constexpr auto logcumsumexp(X x) {
  return cumulative<recurrence::logaddexp, Axis>(x);
}

/// h[t] = a[t] h[t-1] + b[t] along an axis with h[-1] = 0 (h[t+1] with Reverse, from the
/// end): a first-order linear recurrence of a and b of one shape (an exponential moving
/// average is a = 1 - alpha, b = alpha x).
template <int Axis, bool Reverse = false, expression A, expression B> constexpr auto linear_recurrence(A a, B b) {
  return cumulative<recurrence::linear, Axis, Reverse>(a, b);
}

namespace detail {
/// Along a Cumulative's walk (forward, or backward with Reverse): the elements that have
/// a next one, and the elements that have a previous one, position for position.
template <int Axis, bool Reverse, expression X>
constexpr auto with_next(X x) {
  if constexpr (Reverse) return slice<Axis, 1, 0>(x);
  else return slice<Axis, 0, -1>(x);
}
template <int Axis, bool Reverse, expression X>
constexpr auto with_previous(X x) {
  return with_next<Axis, !Reverse>(x);
}
/// z padded by one element (Fill) at the walk's first step, or at its last.
template <int Axis, bool Reverse, double Fill, expression Z>
constexpr auto pad_at_first(Z z) {
  if constexpr (Reverse) return pad<Axis, 0, 1, Fill>(z);
  else return pad<Axis, 1, 0, Fill>(z);
}
template <int Axis, bool Reverse, double Fill, expression Z>
constexpr auto pad_at_last(Z z) {
  return pad_at_first<Axis, !Reverse, Fill>(z);
}
/// x at each position's previous step in the walk (Fill at the first step).
template <int Axis, bool Reverse, double Fill, expression X>
constexpr auto previous_step(X x) {
  return pad_at_first<Axis, Reverse, Fill>(with_next<Axis, Reverse>(x));
}
/// x at each position's next step in the walk (0 at the last step).
template <int Axis, bool Reverse, expression X>
constexpr auto next_step(X x) {
  return pad_at_last<Axis, Reverse, 0.0>(with_previous<Axis, Reverse>(x));
}
/// A logcumsumexp y's decay e^(y[s] - y[s']) between steps s and s' = s + 1 of the walk,
/// at most 1 (y never decreases along it): at s (AtEarlier) or at s', 0 where there is none.
template <int Axis, bool Reverse, bool AtEarlier, expression Y>
constexpr auto logcumsumexp_decay(Y y) {
  auto decay = exp(with_next<Axis, Reverse>(y) - with_previous<Axis, Reverse>(y));
  if constexpr (AtEarlier) return pad_at_last<Axis, Reverse, 0.0>(decay);
  else return pad_at_first<Axis, Reverse, 0.0>(decay);
}

/// The cotangent of child K of node N = Cumulative<R, Axis, Reverse>(x...) given the
/// node's cotangent g, floating point (grad/rules.hpp's row). For a linear recurrence the
/// adjoint s satisfies s[t] = g[t] + a[t+1] s[t+1]: a linear recurrence walked the other
/// way. cumprod is the linear recurrence with a = x, b = 0 past the first step, so
/// dx[k] = y[k-1] s[k] (y[-1] = 1): no division by x. logcumsumexp's
/// dx[k] = e^(x[k] - y[k]) r[k] with r[k] = g[k] + e^(y[k] - y[k+1]) r[k+1].
template <int K, class N, expression G>
constexpr auto cumulative_cotangent(G g) {
  using Op = typename N::op;
  using R = typename Op::recurrence;
  constexpr int axis = Op::axis;
  constexpr bool rev = Op::reverse;
  using x = boost::mp11::mp_first<typename N::children>;
  if constexpr (std::is_same_v<R, recurrence::sum>) {
    return cumulative<recurrence::sum, axis, !rev>(g);
  } else if constexpr (std::is_same_v<R, recurrence::product>) {
    auto s = cumulative<recurrence::linear, axis, !rev>(next_step<axis, rev>(x{}), g);
    return previous_step<axis, rev, 1.0>(N{}) * s;
  } else if constexpr (std::is_same_v<R, recurrence::logaddexp>) {
    auto r = cumulative<recurrence::linear, axis, !rev>(logcumsumexp_decay<axis, rev, true>(N{}), g);
    return exp(x{} - N{}) * r;
  } else {
    auto s = cumulative<recurrence::linear, axis, !rev>(next_step<axis, rev>(x{}), g);
    if constexpr (K == 1) return s;
    else return s * previous_step<axis, rev, 0.0>(N{});
  }
}

/// The tangent of node N = Cumulative<R, Axis, Reverse>(x...) due to the tangent t of its
/// child K (grad/forward.hpp's row): dy[t] = a[t] dy[t-1] + (tangent of this step), a
/// linear recurrence along the same walk for all but cumsum, whose tangent is the cumsum
/// of t. For logcumsumexp a[t] = e^(y[t-1] - y[t]) <= 1 and the step adds e^(x - y) t.
template <int K, class N, expression T>
constexpr auto cumulative_tangent(T t) {
  using Op = typename N::op;
  using R = typename Op::recurrence;
  constexpr int axis = Op::axis;
  constexpr bool rev = Op::reverse;
  using x = boost::mp11::mp_first<typename N::children>;
  if constexpr (std::is_same_v<R, recurrence::sum>) {
    return cumulative<recurrence::sum, axis, rev>(t);
  } else if constexpr (std::is_same_v<R, recurrence::product>) {
    return cumulative<recurrence::linear, axis, rev>(x{}, t * previous_step<axis, rev, 1.0>(N{}));
  } else if constexpr (std::is_same_v<R, recurrence::logaddexp>) {
    return cumulative<recurrence::linear, axis, rev>(logcumsumexp_decay<axis, rev, false>(N{}), t * exp(x{} - N{}));
  } else if constexpr (K == 1) {
    return cumulative<recurrence::linear, axis, rev>(x{}, t);
  } else {
    return cumulative<recurrence::linear, axis, rev>(x{}, t * previous_step<axis, rev, 0.0>(N{}));
  }
}
}  // namespace detail

}  // namespace luminal
