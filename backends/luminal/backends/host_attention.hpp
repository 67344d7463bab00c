// cached_attention (ops/cached_attention.hpp) on the host backend's threads: one work item
// per key/value head and block of query positions. The block's queries of that head's
// group are scored against the past keys and the new keys up to the block's last position
// with two single-threaded BLAS calls that read the keys where they lie (every KVH-th row
// of the cache), masked causally, normalized, and multiplied by the values the same way.
// A block's scores stay in the thread's cache; the keys and values are never copied.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <luminal/ops/cached_attention.hpp>
#include <luminal/ops/vector_math.hpp>

#include "host_gemm.hpp"
#include "thread_pool.hpp"

namespace luminal::detail {

/// Query rows (positions x heads of a group) per work item: enough for BLAS to run at speed,
/// few enough that the scores of a long context stay in the L2 cache.
inline constexpr index_t host_attention_rows = 64;

/// One work item: key/value head `kv`, query positions [s0, s1).
inline void host_attention_block(const attention_extents& e, index_t kv, index_t s0, index_t s1, const float* q,
                                 const float* k_past, const float* v_past, const float* k_new, const float* v_new,
                                 float* y, std::vector<float>& scratch) {
  const index_t group = e.h / e.kvh, stride = e.kvh * e.d;
  const index_t rows = (s1 - s0) * group, keys = e.p + s1;
  scratch.resize(std::size_t(rows * e.d * 2 + rows * keys + rows));
  float* queries = scratch.data();
  float* outputs = queries + rows * e.d;
  float* scores = outputs + rows * e.d;
  float* row_totals = scores + rows * keys;
  const float scale = 1.0f / std::sqrt(float(e.d));
  for (index_t s = s0; s < s1; ++s)
    for (index_t g = 0; g < group; ++g) {
      const float* from = q + (s * e.h + kv * group + g) * e.d;
      float* to = queries + ((s - s0) * group + g) * e.d;
      for (index_t c = 0; c < e.d; ++c) to[c] = from[c] * scale;
    }
  const int r = int(rows), d = int(e.d), ld = int(stride), lds = int(keys);
  if (e.p > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, int(e.p), d, 1.0f, queries, d, k_past + kv * e.d, ld,
                0.0f, scores, lds);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, int(s1), d, 1.0f, queries, d, k_new + kv * e.d, ld, 0.0f,
              scores + e.p, lds);
  // Softmax over each row's keys: the past and the new positions up to its own.
  constexpr float log2e = 1.4426950408889634f;
  for (index_t row = 0; row < rows; ++row) {
    float* sr = scores + row * keys;
    const index_t valid = e.p + s0 + row / group + 1;
    float top = -INFINITY;
    for (index_t j = 0; j < valid; ++j) top = std::max(top, sr[j]);
    float total = 0;
    for (index_t j = 0; j < valid; ++j) {
      const float w = exp2_f32((sr[j] - top) * log2e);
      sr[j] = w;
      total += w;
    }
    for (index_t j = valid; j < keys; ++j) sr[j] = 0;
    row_totals[row] = total;
  }
  if (e.p > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d, int(e.p), 1.0f, scores, lds, v_past + kv * e.d, ld,
                0.0f, outputs, d);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, d, int(s1), 1.0f, scores + e.p, lds, v_new + kv * e.d,
              ld, e.p > 0 ? 1.0f : 0.0f, outputs, d);
  for (index_t s = s0; s < s1; ++s)
    for (index_t g = 0; g < group; ++g) {
      const index_t row = (s - s0) * group + g;
      const float inverse = 1.0f / row_totals[row];
      const float* from = outputs + row * e.d;
      float* to = y + (s * e.h + kv * group + g) * e.d;
      for (index_t c = 0; c < e.d; ++c) to[c] = from[c] * inverse;
    }
}

/// cached_attention on the pool's threads.
inline void host_cached_attention(const attention_extents& e, const float* q, const float* k_past,
                                  const float* v_past, const float* k_new, const float* v_new, float* y) {
  single_threaded_blas();
  const index_t group = e.h / e.kvh;
  const index_t positions = std::max<index_t>(1, host_attention_rows / group);
  const index_t blocks = (e.s + positions - 1) / positions;
  // Later blocks see more keys: handing out the last ones first balances the threads.
  auto work = [&](index_t begin, index_t end) {
    thread_local std::vector<float> scratch;
    for (index_t item = begin; item < end; ++item) {
      const index_t block = blocks - 1 - item / e.kvh, kv = item % e.kvh;
      host_attention_block(e, kv, block * positions, std::min(e.s, (block + 1) * positions), q, k_past, v_past, k_new,
                           v_new, y, scratch);
    }
  };
  const index_t items = blocks * e.kvh;
  auto& pool = thread_pool::instance();
  if (pool.size() == 1 || items == 1) {
    work(0, items);
    return;
  }
  pool.run(items, 1, [](const void* f, index_t begin, index_t end) { (*static_cast<const decltype(work)*>(f))(begin, end); },
           &work);
}

}  // namespace luminal::detail
