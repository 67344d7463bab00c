// The two loop kernels of a plan: a fused elementwise loop nest, and a reduction over one
// axis with the reduced expression fused into its inner loop (kernels.hpp launches them,
// and batched GEMM).
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>

#include "eval.hpp"
#include "iteration.hpp"
#include "../ops/map.hpp"
#include "../ops/vector_math.hpp"
namespace luminal {

namespace detail {
/// Runs row(c, i, first, n) for the rows of coordinates c covering flat indices
/// [begin, end) of a shape with extents d: a row is n consecutive values of axis Row from
/// `first`, at flat indices i, i + 1, ... (axes after Row have extent 1). The coordinates
/// advance by increments: divisions happen once per call, not per element.
template <std::size_t Row, std::size_t R, class F>
LUMINAL_ALWAYS_INLINE void for_each_row(index_t begin, index_t end, const extents<R>& d, F&& row) {
  auto c = unravel(begin, d);
  for (index_t i = begin; i < end;) {
    index_t first = c[Row], n = d[Row] - first < end - i ? d[Row] - first : end - i;
    row(c, i, first, n);
    i += n;
    c[Row] = 0;
    for (std::size_t k = Row; k-- > 0;) {
      if (++c[k] < d[k]) break;
      c[k] = 0;
    }
  }
}

/// Whether evaluating node Id of flat program P as a kernel does (inline down to stored
/// nodes; Root: Id itself is computed, not loaded) applies a map of arithmetic_bound_cost
/// or more. A class per node, so each node is looked at once however many parents share
/// it; and no lambda: a lambda in a template is a class with three functions per node.
template <class P, int Id, bool Root, class N = node_at<typename P::nodes, Id>,
          bool Walk = Root || !N::stored>
struct applies_costly_map : std::false_type {};
template <class P, int Id, bool Root, class N, class Children>
struct applies_costly_map_below;
template <class N>
struct is_costly_map : std::bool_constant<(op_traits<typename N::op>::cost >= arithmetic_bound_cost)> {};
template <class P, int Id, bool Root, class N>
struct applies_costly_map<P, Id, Root, N, true> : applies_costly_map_below<P, Id, Root, N, typename N::children> {};
template <class P, int Id, bool Root, class N, int... C>
struct applies_costly_map_below<P, Id, Root, N, std::integer_sequence<int, C...>>
    : std::bool_constant<(is_costly_map<N>::value || ... || applies_costly_map<P, C, false>::value)> {};
}  // namespace detail

// GCC's -march=native on AVX-512 CPUs still vectorizes with 256-bit registers
// (prefer-vector-width=256): most loops move memory, where wider registers gain nothing,
// and loops over short rows lose to masked tails. Two kinds of kernel are compiled for
// another width (LUMINAL_VECTOR_WIDTHS):
// - a loop that applies exp2, log2 or erf is bound by its arithmetic, and 512-bit
//   registers halve its instructions;
// - short rows in blocks of fewer than 16 (a pool's 7 or 14 windows, im2col's 14
//   columns) vectorize across the block, 8 rows a step at 256 bits, which leaves a block
//   of 7 scalar and one of 14 half scalar. At 128 bits, 4 rows a step, most of each block
//   is vectorized.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
#define LUMINAL_VECTOR_WIDTHS 1
#endif

/// A fused elementwise kernel: writes node Id of flat graph P over flat indices
/// [begin, end). Flat kernels run one loop; others a loop nest over the coordinates of the
/// iteration node (detail::iteration), whose innermost loop advances every read by its
/// stride.
template <class P, int Id>
struct elementwise_kernel {
  using eval = evaluator<P>;
  using T = typename eval::template value_type<Id>;
  using where = detail::iteration<P, Id>;
  static constexpr int it = where::it;
  static constexpr bool root = it == Id;
  static constexpr std::size_t rank = node_at<typename P::nodes, where::loop>::rank;
  using static_extents = typename node_at<typename P::nodes, where::loop>::static_extents;
  static constexpr std::size_t row = detail::row_axis(static_extents{});
  static constexpr index_t row_length = detail::row_extent(static_extents{});
  /// Rows of at most short_row_limit elements (a pool's window) run as blocks along
  /// `outer`, the last axis before theirs whose extent is not 1 (past the 1s a pool's
  /// window shape leaves), each row unrolled: the work shared by a row's elements (every
  /// coordinate but the last) is then done once per row, not once per element.
  static constexpr std::size_t outer = detail::last_axis_not_one(static_extents{}, row, row);
  static constexpr bool short_rows = where::permute < 0 && outer < row && row_length > 1 &&
                                     row_length <= detail::short_row_limit;
  /// One flat loop, no nest.
  static constexpr bool flat = where::permute < 0 && detail::evaluates_flat<P, it, root>::value;
  /// Short rows in blocks of fewer than 16 along `outer`: see LUMINAL_VECTOR_WIDTHS.
  static constexpr index_t block_length = detail::static_extent(static_extents{}, outer);
  static constexpr bool short_blocks = !flat && short_rows && block_length > 0 && block_length < 16;
  /// The pads below no other pad (a concat's operands), numbered in walk order. Rows
  /// through more than max_row_pads of them, each of which has its part of the row on the
  /// stack, are tested element by element.
  static constexpr int top_pads = detail::top_pads<P, it, root>::value;
  static constexpr int max_row_pads = 64;
  /// Rows that read through pads whose tests move monotonically along the row (an
  /// im2col's zero border, a col2im's shifted windows, a concat's operands) run in parts
  /// cut where a pad's test changes (run_padded_row): in each part every pad is wholly
  /// inside, read with no test, or wholly outside, its pad value with nothing under it
  /// evaluated. The loads are then consecutive and the parts' loops vectorize.
  static constexpr bool padded_rows = where::split < 0 && detail::reads_padding<P, it, root>::value &&
                                      detail::pads_monotone<P, it, root>::value && top_pads <= max_row_pads;
  /// Each part's loop is compiled once per combination of inside and outside pads that
  /// it may run with (part_variants); a part of another combination, or where a pad below
  /// an inside one is outside, is tested element by element. With more top pads than
  /// this, only parts inside every pad have a loop of their own.
  static constexpr int max_decided_pads = 8;
  /// The combinations with a loop of their own, as bits of the top pads inside: all of
  /// them, none, each alone (a concat's operand) and all but each (a slice's gradient
  /// beside other terms, a col2im's window shifted off the row on another axis).
  static constexpr auto part_variants = [] {
    constexpr std::uint64_t all = top_pads >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << top_pads) - 1;
    std::array<std::uint64_t, 2 * max_decided_pads + 2> v{};
    std::size_t n = 0;
    auto add = [&](std::uint64_t bits) {
      for (std::size_t k = 0; k < n; ++k)
        if (v[k] == bits) return;
      v[n++] = bits;
    };
    add(all);
    if (top_pads <= max_decided_pads) {
      add(0);
      for (int k = 0; k < top_pads; ++k) add(std::uint64_t(1) << k);
      for (int k = 0; k < top_pads; ++k) add(all & ~(std::uint64_t(1) << k));
    }
    return std::pair{v, n};
  }();
  /// The loop applies a float function (exp2, erf...): see LUMINAL_VECTOR_WIDTHS.
  static constexpr bool arithmetic_bound = detail::applies_costly_map<P, it, root>::value;
  kernel_context ctx;
  T* out;

  /// The value at coordinates c of the loop node (detail::iteration::loop), as stored.
  /// Always inlined into the loop, as the evaluator's walk is (eval.hpp).
  LUMINAL_ALWAYS_INLINE T value(const extents<rank>& c) const { return T(computed(c)); }
  /// The value at c as the evaluator computes it: f32 for bf16 and f16 (already rounded).
  LUMINAL_ALWAYS_INLINE auto computed(const extents<rank>& c) const {
    if constexpr (where::split >= 0) return eval::template at_split<it, root, where::split>(ctx, c);
    else return eval::template at<it, root>(ctx, c);
  }

  /// A row of n elements from coordinates c: cut where a pad's part of the row (its
  /// inside, and where every pad below it is inside too) begins or ends, each part run by
  /// the loop of its combination of pads (part_variants), or tested element by element.
  LUMINAL_HD void run_padded_row(const extents<rank>& c, T* LUMINAL_RESTRICT line, index_t first, index_t n) const {
    constexpr int pads = top_pads > 0 ? top_pads : 1;
    detail::row_part inside[pads], all_inside[pads];
    extents<rank> next = c;
    next[row] += 1;
    eval::template pad_intervals<it, root>(ctx, c, next, n, inside, all_inside, 0, nullptr);
    // Parts from left to right, each ending at the nearest place past its start where a
    // pad's part begins or ends: a few compares per part, no sort.
    for (index_t begin = 0, end = n; begin < n; begin = end, end = n) {
      auto cut_at = [&](index_t cut) { end = cut > begin && cut < end ? cut : end; };
      for (int k = 0; k < top_pads; ++k) {
        cut_at(inside[k].lo);
        cut_at(inside[k].hi);
        cut_at(all_inside[k].lo);
        cut_at(all_inside[k].hi);
      }
      std::uint64_t bits = top_pads <= max_decided_pads ? 0 : part_variants.first[0];  // all inside
      bool decided = true;
      for (int k = 0; k < top_pads; ++k) {
        if (all_inside[k].lo <= begin && end <= all_inside[k].hi) {
          if constexpr (top_pads <= max_decided_pads) bits |= std::uint64_t(1) << k;
        } else if (top_pads > max_decided_pads || !(end <= inside[k].lo || inside[k].hi <= begin)) {
          decided = false;
        }
      }
      if (!decided || !run_part(c, line, first, begin, end, bits, std::make_index_sequence<part_variants.second>{}))
        run_part<detail::pads_checked>(c, line, first, begin, end);
    }
  }
  /// Runs elements [begin, end) of a row with the loop of part_variants whose pads inside
  /// are `bits`, if there is one.
  template <std::size_t... V>
  LUMINAL_ALWAYS_INLINE bool run_part(const extents<rank>& c, T* LUMINAL_RESTRICT line, index_t first, index_t begin,
                                      index_t end, std::uint64_t bits, std::index_sequence<V...>) const {
    return ((bits == part_variants.first[V] &&
             (run_part<decided_pads(part_variants.first[V])>(c, line, first, begin, end), true)) ||
            ...);
  }
  template <std::uint64_t Pads>
  LUMINAL_HD void run_part(const extents<rank>& c, T* line, index_t first, index_t begin, index_t end) const {
#ifdef LUMINAL_VECTOR_WIDTHS
    if constexpr (Pads == detail::pads_checked || Pads == detail::pads_inside)
      part_loop<Pads>(c, line, first, begin, end);
    else if constexpr (arithmetic_bound) run_part_wide<Pads>(c, line, first, begin, end);
    else run_part_loop<Pads>(c, line, first, begin, end);
#else
    part_loop<Pads>(c, line, first, begin, end);
#endif
  }
#ifdef LUMINAL_VECTOR_WIDTHS
  // The loops of parts with some pad outside are functions of their own: GCC's inliner
  // stops at a function's size, and a row's loops inlined together (a concat's, one per
  // operand) left its float functions (exp2) calls per element, in loops that no longer vectorized. The
  // loops of rows inside every pad, and the tested ends of rows (an im2col's, a
  // col2im's), stay inline: there a call per part cost more than a row of 32 elements.
  template <std::uint64_t Pads>
  [[gnu::noinline]] void run_part_loop(const extents<rank>& c, T* line, index_t first, index_t begin,
                                       index_t end) const {
    part_loop<Pads>(c, line, first, begin, end);
  }
  template <std::uint64_t Pads>
  [[gnu::noinline, gnu::target("prefer-vector-width=512")]] void run_part_wide(const extents<rank>& c, T* line,
                                                                               index_t first, index_t begin,
                                                                               index_t end) const {
    part_loop<Pads>(c, line, first, begin, end);
  }
#endif
  template <std::uint64_t Pads>
  LUMINAL_ALWAYS_INLINE void part_loop(const extents<rank>& c, T* LUMINAL_RESTRICT line, index_t first, index_t begin,
                                       index_t end) const {
    extents<rank> at_j = c;
    for (index_t j = begin; j < end; ++j) {
      at_j[row] = first + j;
      line[j] = T(eval::template at<it, root, Pads>(ctx, at_j));
    }
  }
  /// The evaluator's Pads (eval_facts.hpp) for the top pads inside given by bits.
  static constexpr std::uint64_t decided_pads(std::uint64_t bits) {
    return top_pads >= 64 || bits == (std::uint64_t(1) << top_pads) - 1 ? detail::pads_inside
                                                                         : detail::pads_decided | bits;
  }

  /// Short rows first .. first + n - 1 (coordinate `outer`; c gives the axes before it)
  /// into `lines`, row after row, each element converted to D. The row's elements are
  /// unrolled inside the loop over the rows: that loop then vectorizes, each of a row's
  /// lanes an interleaved load and store. Left as a loop (GCC does not unroll it before
  /// vectorizing), it kept the whole nest scalar.
  template <class D>
  LUMINAL_ALWAYS_INLINE void short_rows_into(const extents<rank>& c, index_t first, index_t n,
                                             D* LUMINAL_RESTRICT lines) const {
    for (index_t j = 0; j < n; ++j) {
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC unroll detail::short_row_limit
#endif
      for (index_t k = 0; k < row_length; ++k) {
        extents<rank> at = c;
        at[outer] = first + j;
        at[row] = k;
        lines[j * row_length + k] = D(computed(at));
      }
    }
  }
  LUMINAL_ALWAYS_INLINE void run_short_rows(index_t begin, index_t end, const extents<rank>& d) const {
    auto one = [&](index_t i) { out[i] = value(detail::unravel(i, d)); };
    const index_t body_begin = (begin + row_length - 1) / row_length * row_length;
    const index_t body_end = end / row_length * row_length;
    if (body_begin >= body_end) {
      for (index_t i = begin; i < end; ++i) one(i);
      return;
    }
    for (index_t i = begin; i < body_begin; ++i) one(i);  // the end of a row another call began
    // The axes between `outer` and the row have extent 1: the rows are numbered by the
    // coordinates up to `outer` alone.
    extents<outer + 1> outer_dims{};
    for (std::size_t k = 0; k <= outer; ++k) outer_dims[k] = d[k];
    detail::for_each_row<outer>(body_begin / row_length, body_end / row_length, outer_dims,
                                [&](extents<outer + 1>& oc, index_t i, index_t first, index_t n) LUMINAL_LAMBDA_ALWAYS_INLINE {
      extents<rank> c{};
      for (std::size_t k = 0; k <= outer; ++k) c[k] = oc[k];
      T* LUMINAL_RESTRICT lines = out + i * row_length;
      if constexpr (is_half_float<T>) {
        // Interleaved stores of 2-byte lanes keep GCC from vectorizing the loop over the
        // rows, which then ran one element at a time: blocks of rows go through f32 memory
        // of the stack as f32 outputs do, and one contiguous loop rounds them.
        constexpr index_t block = 16;
        for (index_t j0 = 0; j0 < n; j0 += block) {
          const index_t m = n - j0 < block ? n - j0 : block;
          float wide[block * row_length];
          short_rows_into(c, first + j0, m, wide);
          for (index_t e = 0; e < m * row_length; ++e) lines[j0 * row_length + e] = T(wide[e]);
        }
      } else {
        short_rows_into(c, first, n, lines);
      }
    });
    for (index_t i = body_end; i < end; ++i) one(i);
  }

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
#ifdef LUMINAL_VECTOR_WIDTHS
    if constexpr (arithmetic_bound) {
      run_wide(begin, end);
      return;
    } else if constexpr (short_blocks) {
      run_narrow(begin, end);
      return;
    }
#endif
    run(begin, end);
  }

 private:
#ifdef LUMINAL_VECTOR_WIDTHS
  // Not inlined into their caller, which is compiled for the default width; what they
  // call is always inlined, so that it is compiled for theirs.
  [[gnu::noinline, gnu::target("prefer-vector-width=512")]] void run_wide(index_t begin, index_t end) const {
    run(begin, end);
  }
  [[gnu::noinline, gnu::target("prefer-vector-width=128")]] void run_narrow(index_t begin, index_t end) const {
    run(begin, end);
  }
#endif
  LUMINAL_ALWAYS_INLINE void run(index_t begin, index_t end) const {
    if constexpr (flat) {
      T* LUMINAL_RESTRICT o = out;
      for (index_t i = begin; i < end; ++i) o[i] = T(eval::template at_flat<it, root>(ctx, i));
    } else if constexpr (rank == 0) {
      if (begin < end) out[0] = T(eval::template at<it, root>(ctx, {}));
    } else if constexpr (short_rows) {
      run_short_rows(begin, end, eval::template dims<where::loop>(ctx));
    } else {
      detail::for_each_row<row>(begin, end, eval::template dims<where::loop>(ctx),
                                [&](extents<rank>& c, index_t i, index_t first, index_t n) {
        if constexpr (where::permute < 0 && padded_rows) {
          run_padded_row(c, out + i, first, n);
        } else if constexpr (where::permute < 0) {
          T* LUMINAL_RESTRICT line = out + i;
          extents<rank> at_j = c;  // a local copy: c lives in memory the loop would write
          for (index_t j = 0; j < n; ++j) {
            at_j[row] = first + j;
            line[j] = value(at_j);
          }
        } else {
          using Perm = node_at<typename P::nodes, where::permute>;
          auto out_dims = eval::template dims<where::permute>(ctx);
          for (index_t j = 0; j < n; ++j) {
            c[row] = first + j;
            out[detail::ravel(Perm::op::from_child(c), out_dims)] = T(eval::template at<it>(ctx, c));
          }
        }
      });
    }
  }
};

/// A reduction of node Id (Reduce over Axis of its child) for outputs [begin, end), in
/// rows of outputs along the output's inner axis. Each step of the reduced axis is
/// combined into the whole row, a loop over consecutive outputs that vectorizes, unless
/// the reduced axis is long and comes after the row's axis: then each output runs its own
/// loop over the reduced axis (in several partial results). A short window after the row
/// (a pool's 2 x 2 as its last axis) still goes step by step over the row: each output
/// combines its elements in the same order either way, and the row's reads advance at a
/// fixed stride. Backends that split the reduced axis across threads (a block per output
/// on a GPU) use identity / combine / element / store through parallel_reduce.
/// A reduction of bf16 or f16 values accumulates in f32 and rounds once, on store.
template <class P, int Id>
struct reduce_kernel {
  using eval = evaluator<P>;
  using N = node_at<typename P::nodes, Id>;
  using S = typename eval::template value_type<Id>;  // as stored
  using T = arithmetic_t<S>;                         // as accumulated
  using F = typename N::op::functor;
  using value_type = T;
  static constexpr int child = flat::detail::first_child<typename N::children>::value;
  static constexpr std::size_t rank = N::rank;
  static constexpr std::size_t axis = std::size_t(N::op::axis);
  static constexpr std::size_t row = detail::row_axis(typename N::static_extents{});
  static constexpr int lanes = 8;
  /// The reduced axis's extent when static, else -1. A window shorter than the lanes (a
  /// pool's 2 x 2) runs in one accumulator with a fixed trip count: setting up and
  /// combining 8 partial results would cost more than the window.
  static constexpr index_t static_extent = [] {
    constexpr auto e = []<index_t... E>(std::integer_sequence<index_t, E...>) {
      return std::array<index_t, sizeof...(E)>{E...};
    }(typename node_at<typename P::nodes, child>::static_extents{});
    return e[axis];
  }();
  static constexpr bool short_window = static_extent >= 0 && static_extent <= lanes;
  kernel_context ctx;
  S* out;

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    index_t extent = eval::template dims<child>(ctx)[axis];
    detail::for_each_row<row>(begin, end, eval::template dims<Id>(ctx),
                              [&](extents<rank>& c, index_t i, index_t first, index_t n) {
      S* LUMINAL_RESTRICT line = out + i;
      // axis == row: one output per row. A row of bf16 or f16 outputs is no accumulator.
      if constexpr (axis == row || (axis > row && !short_window) || !std::is_same_v<S, T>) {
        for (index_t j = 0; j < n; ++j) {
          c[row] = first + j;
          line[j] = S(reduce_one(c, extent));
        }
      } else {
        for (index_t j = 0; j < n; ++j) line[j] = identity();
        auto cc = c;
        for (index_t k = 0; k < extent; ++k) {
          cc[axis] = k;
          for (index_t j = 0; j < n; ++j) {
            cc[row] = first + j;
            line[j] = combine(line[j], eval::template at<child>(ctx, cc));
          }
        }
      }
    });
  }
  /// The reduction for the output at c (whose coordinate on the reduced axis is 0), in
  /// `lanes` partial results so that consecutive elements do not wait on each other. The
  /// fused child is evaluated at one place in the code: a copy per lane or per remainder
  /// loop multiplies the compile time and size of every reduction over a large expression.
  LUMINAL_HD T reduce_one(extents<rank> c, index_t extent) const {
    if constexpr (short_window) {
      (void)extent;
      T acc = identity();
      for (index_t k = 0; k < static_extent; ++k) {
        c[axis] = k;
        acc = combine(acc, eval::template at<child>(ctx, c));
      }
      return acc;
    }
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
    else {
      // On the CPU, the child's values along the reduced axis go first into a chunk on the
      // stack, in a loop of the elementwise kernels' form that vectorizes (evaluated per
      // lane, their index arithmetic did not); the chunk is then combined in `lanes`
      // partial results, lane l taking the elements k = l mod lanes as the GPU's loop below
      // does, padded with the identity: the same combinations in the same order, so the
      // same result.
      constexpr index_t chunk = 32 * lanes;
      alignas(64) T values[chunk];
      T acc[lanes];
      for (int l = 0; l < lanes; ++l) acc[l] = identity();
      for (index_t start = 0; start < extent; start += chunk) {
        const index_t n = extent - start < chunk ? extent - start : chunk;
        extents<rank> at = c;
        for (index_t j = 0; j < n; ++j) {
          at[axis] = start + j;
          values[j] = eval::template at<child>(ctx, at);
        }
        const index_t padded = (n + lanes - 1) / lanes * lanes;
        for (index_t j = n; j < padded; ++j) values[j] = identity();
        for (index_t block = 0; block < padded; block += lanes) {
          // Kept a loop, so that the loop vectorizer takes it: unrolled first, it is left
          // to the straight-line vectorizer, which gives up on a max's blends of bits.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)  // nvcc warns of it
#pragma GCC unroll 1
#endif
          for (int l = 0; l < lanes; ++l) acc[l] = combine(acc[l], values[block + l]);
        }
      }
      for (int l = 1; l < lanes; ++l) acc[0] = combine(acc[0], acc[l]);
      return acc[0];
    }
#else
    else {
      // Blocks of `lanes` elements, lane l taking the elements k = l mod lanes: the block
      // is a loop of fixed length over consecutive elements, which vectorizes. The last
      // block reads its last element again past the end and combines the identity there
      // instead: no remainder loop, so the child is still written once.
      T acc[lanes];
      for (int l = 0; l < lanes; ++l) acc[l] = identity();
      for (index_t block = 0; block < extent; block += lanes) {
        for (int l = 0; l < lanes; ++l) {
          const index_t k = block + l;
          c[axis] = k < extent ? k : extent - 1;
          acc[l] = combine(acc[l], detail::select_value(k < extent, eval::template at<child>(ctx, c), identity()));
        }
      }
      for (int l = 1; l < lanes; ++l) acc[0] = combine(acc[0], acc[l]);
      return acc[0];
    }
#endif
  }
  LUMINAL_HD static T identity() { return F::template identity<T>(); }
  LUMINAL_HD static T combine(T acc, T x) { return F::combine(acc, x); }
  /// Element k of the reduced axis for output o.
  LUMINAL_HD T element(index_t o, index_t k) const {
    auto c = detail::unravel(o, eval::template dims<Id>(ctx));
    c[axis] = k;
    return eval::template at<child>(ctx, c);
  }
  LUMINAL_HD void store(index_t o, T value) const { out[o] = S(value); }
};

}  // namespace luminal
