// Causal attention over a key/value cache, as one opaque op: the queries of S new positions
// attend to P cached positions and to the new positions up to their own, with grouped-query
// heads (each key/value head serves H / KVH query heads, read where it lies: never copied).
//
//     auto q = input<"q", f32>(shape<Seq, Heads, HeadDim>);            // new positions
//     auto k_past = input<"k_past", f32>(shape<Past, KVHeads, HeadDim>); // the cache, in place
//     auto v_past = input<"v_past", f32>(shape<Past, KVHeads, HeadDim>);
//     auto k_new = ...;  auto v_new = ...;                              // [Seq, KVHeads, HeadDim]
//     auto y = cached_attention(q, k_past, v_past, k_new, v_new);      // [Seq, Heads, HeadDim]
//
// y[s, h] = softmax_j(q[s, h] . k[j, h / G] / sqrt(HeadDim)) v[j, h / G] over the keys j of
// past positions 0 .. P-1 and new positions 0 .. s, G = H / KVH. The past and the new keys
// are separate operands, so that a decode step writes its keys into the cache (an output
// of the program, program::write_output_to) while this op reads both: the cache is never
// concatenated or copied. With P = 0 it is ordinary causal self-attention.
//
// A backend may run it itself (the host backend does, with BLAS on blocks of queries:
// backends/luminal/backends/host_attention.hpp); the generic body below, one query row per
// index with an online softmax, runs on every other backend.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <cmath>
#include <cstdint>

#include "../core/exceptions.hpp"
#include "../core/node.hpp"

namespace luminal {

/// The extents of one cached_attention: S new positions, P cached ones, H query heads of
/// KVH key/value heads, D elements per head. Row-major operands: q and y [S, H, D], the
/// past [P, KVH, D], the new keys and values [S, KVH, D].
struct attention_extents {
  index_t s, p, h, kvh, d;
};

namespace detail {
/// The largest head the generic body handles (its accumulator is a local array).
inline constexpr index_t generic_attention_max_head = 256;

/// Query row i = s * H + h, with an online softmax over its keys.
struct cached_attention_body {
  attention_extents e;
  const float *q, *k_past, *v_past, *k_new, *v_new;
  float* y;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    const index_t group = e.h / e.kvh, stride = e.kvh * e.d;
    const float scale = 1.0f / sqrtf(float(e.d));
    for (index_t i = begin; i < end; ++i) {
      const index_t s = i / e.h, h = i % e.h, kv = h / group;
      const float* qi = q + i * e.d;
      float acc[generic_attention_max_head];
      for (index_t c = 0; c < e.d; ++c) acc[c] = 0;
      float running_max = -INFINITY, total = 0;
      for (index_t j = 0; j < e.p + s + 1; ++j) {
        const bool past = j < e.p;
        const float* kj = (past ? k_past + j * stride : k_new + (j - e.p) * stride) + kv * e.d;
        const float* vj = (past ? v_past + j * stride : v_new + (j - e.p) * stride) + kv * e.d;
        float dot = 0;
        for (index_t c = 0; c < e.d; ++c) dot += qi[c] * kj[c];
        dot *= scale;
        const float new_max = dot > running_max ? dot : running_max;
        const float rescale = expf(running_max - new_max), weight = expf(dot - new_max);
        total = total * rescale + weight;
        for (index_t c = 0; c < e.d; ++c) acc[c] = acc[c] * rescale + weight * vj[c];
        running_max = new_max;
      }
      for (index_t c = 0; c < e.d; ++c) y[i * e.d + c] = acc[c] / total;
    }
  }
};
}  // namespace detail

/// The op of cached_attention (children q, k_past, v_past, k_new, v_new).
struct CachedAttention {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "causal attention over a key/value cache";
  template <class Q, class... KV>
  using value_type = Q;
  template <class SQ, class... SKV>
  using shape = SQ;

  template <class N, class Runner>
  static void execute(Runner& runner, float* out) {
    using C = typename N::children;
    using Q = boost::mp11::mp_at_c<C, 0>;
    using KPast = boost::mp11::mp_at_c<C, 1>;
    using VPast = boost::mp11::mp_at_c<C, 2>;
    using KNew = boost::mp11::mp_at_c<C, 3>;
    using VNew = boost::mp11::mp_at_c<C, 4>;
    const index_t* qd = runner.template dims_of<Q>();
    const index_t* pd = runner.template dims_of<KPast>();
    const attention_extents e{qd[0], pd[0], qd[1], pd[1], qd[2]};
    if (e.s == 0 || e.h == 0 || e.d == 0) return;
    if (e.kvh == 0 || e.h % e.kvh != 0)
      throw input_error("luminal: cached_attention: " + std::to_string(e.h) + " query heads cannot share " +
                        std::to_string(e.kvh) + " key/value heads (the first must be a multiple of the second)");
    const float* q = runner.template data_of<Q>();
    const float* k_past = runner.template data_of<KPast>();
    const float* v_past = runner.template data_of<VPast>();
    const float* k_new = runner.template data_of<KNew>();
    const float* v_new = runner.template data_of<VNew>();
    auto& backend = runner.backend;
    if constexpr (requires { backend.cached_attention(e, q, k_past, v_past, k_new, v_new, out); }) {
      backend.cached_attention(e, q, k_past, v_past, k_new, v_new, out);
    } else {
      if (e.d > detail::generic_attention_max_head)
        throw input_error("luminal: cached_attention on backend '" + std::string(std::remove_cvref_t<decltype(backend)>::name) +
                          "' handles heads of at most " + std::to_string(detail::generic_attention_max_head) +
                          " elements; this one has " + std::to_string(e.d));
      backend.parallel_for(e.s * e.h, detail::cached_attention_body{e, q, k_past, v_past, k_new, v_new, out});
    }
  }
};

/// Causal attention of new queries q [S, H, D] over cached keys and values [P, KVH, D] and
/// the new ones [S, KVH, D] (see the top of this file). f32; H a multiple of KVH (checked
/// when it runs, as the extents may be symbolic).
template <expression Q, expression KP, expression VP, expression KN, expression VN>
constexpr auto cached_attention(Q, KP, VP, KN, VN) {
  using SQ = shape_t<Q>;
  using SP = shape_t<KP>;
  using SN = shape_t<KN>;
  static_assert(SQ::rank == 3 && SP::rank == 3 && SN::rank == 3,
                "luminal: cached_attention takes q [S, H, D], the past [P, KVH, D] and the new keys [S, KVH, D]");
  static_assert(std::is_same_v<SP, shape_t<VP>> && std::is_same_v<SN, shape_t<VN>>,
                "luminal: cached_attention: keys and values must have the same shape");
  static_assert(SQ::dims[2] == SP::dims[2] && SQ::dims[2] == SN::dims[2],
                "luminal: cached_attention: queries, keys and values must have the same head size");
  static_assert(SP::dims[1] == SN::dims[1], "luminal: cached_attention: past and new keys must have the same heads");
  static_assert(SQ::dims[0] == SN::dims[0], "luminal: cached_attention: one new key per query position");
  static_assert(std::is_same_v<value_t<Q>, f32> && std::is_same_v<value_t<KP>, f32> &&
                    std::is_same_v<value_t<VP>, f32> && std::is_same_v<value_t<KN>, f32> &&
                    std::is_same_v<value_t<VN>, f32>,
                "luminal: cached_attention needs f32 operands");
  return typename node_of<CachedAttention, std::remove_cvref_t<Q>, std::remove_cvref_t<KP>, std::remove_cvref_t<VP>,
                          std::remove_cvref_t<KN>, std::remove_cvref_t<VN>>::type{};
}

}  // namespace luminal
