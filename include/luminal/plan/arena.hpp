// Placing a program's stored intermediates in one arena. Buffers whose lifetimes overlap
// get disjoint byte ranges; buffers that are never live together share memory, so the
// arena is usually far smaller than the sum of the buffers.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace luminal {

/// One buffer to place: it is written by kernel `first_kernel` and last read by kernel
/// `last_kernel`; place_in_arena() fills in `offset`. A value the backward recomputes
/// lives twice at the same address, [first_kernel, last_kernel] and [first_again,
/// last_again]: other buffers may use its memory in between.
struct buffer_request {
  int id = -1;
  std::size_t bytes = 0;
  int first_kernel = 0, last_kernel = 0;
  std::size_t offset = 0;
  int first_again = -1, last_again = -1;  // the second lifetime, if first_again >= 0

  bool live_with(const buffer_request& other) const {
    auto overlap = [](int a0, int a1, int b0, int b1) { return a0 >= 0 && b0 >= 0 && !(a1 < b0 || b1 < a0); };
    return overlap(first_kernel, last_kernel, other.first_kernel, other.last_kernel) ||
           overlap(first_kernel, last_kernel, other.first_again, other.last_again) ||
           overlap(first_again, last_again, other.first_kernel, other.last_kernel) ||
           overlap(first_again, last_again, other.first_again, other.last_again);
  }
};

namespace detail {
/// Places the requests in the given order, each at the lowest offset that no buffer live
/// at the same time and placed before it occupies; returns the arena's size in bytes.
inline std::size_t place_in_order(const std::vector<buffer_request*>& order) {
  std::vector<const buffer_request*> placed;
  std::size_t total = 0;
  for (buffer_request* r : order) {
    std::size_t offset = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const buffer_request* p : placed) {
        bool overlap_time = r->live_with(*p);
        bool overlap_space = offset < p->offset + p->bytes && p->offset < offset + r->bytes;
        if (overlap_time && overlap_space) { offset = p->offset + p->bytes; moved = true; }
      }
    }
    r->offset = offset;
    placed.push_back(r);
    total = std::max(total, offset + r->bytes);
  }
  return total;
}
}  // namespace detail

/// Sets each request's offset: in one of a few orders (largest buffer first; by the
/// kernel that makes it, largest first among equals; longest lived first), each buffer at
/// the lowest offset that no buffer live at the same time occupies, and keeps the order
/// that gives the smallest arena; returns its size in bytes. No order is best for every
/// program: the largest first leaves gaps where a large short-lived buffer (a
/// convolution's unfolded input) sits above long-lived small ones.
///     std::vector<buffer_request> r{{0, 256, 0, 1}, {1, 256, 2, 3}};
///     place_in_arena(r);  // 256: the two lifetimes do not overlap
inline std::size_t place_in_arena(std::vector<buffer_request>& requests) {
  std::vector<buffer_request*> order;
  for (auto& r : requests) order.push_back(&r);
  auto span = [](const buffer_request* r) {
    const int last = r->first_again >= 0 ? std::max(r->last_kernel, r->last_again) : r->last_kernel;
    return last - r->first_kernel;
  };
  std::size_t best = 0;
  std::vector<std::size_t> best_offsets;
  for (int way = 0; way < 3; ++way) {
    std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) {
      if (way == 1 && a->first_kernel != b->first_kernel) return a->first_kernel < b->first_kernel;
      if (way == 2 && span(a) != span(b)) return span(a) > span(b);
      return a->bytes > b->bytes;
    });
    const std::size_t total = detail::place_in_order(order);
    if (way == 0 || total < best) {
      best = total;
      best_offsets.clear();
      for (const auto& r : requests) best_offsets.push_back(r.offset);
    }
    std::sort(order.begin(), order.end());  // the same start for each way: by address
  }
  for (std::size_t i = 0; i < requests.size(); ++i) requests[i].offset = best_offsets[i];
  return best;
}

}  // namespace luminal
