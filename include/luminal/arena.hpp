// Placing a program's stored intermediates in one arena. Buffers whose lifetimes overlap
// get disjoint byte ranges; buffers that are never live together share memory, so the
// arena is usually far smaller than the sum of the buffers.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace luminal {

/// One buffer to place: it is written by kernel `first_kernel` and last read by kernel
/// `last_kernel`; place_in_arena() fills in `offset`.
struct buffer_request {
  int id = -1;
  std::size_t bytes = 0;
  int first_kernel = 0, last_kernel = 0;
  std::size_t offset = 0;
};

/// Sets each request's offset, largest buffer first, each at the lowest offset that no
/// buffer live at the same time occupies; returns the arena's size in bytes.
///     std::vector<buffer_request> r{{0, 256, 0, 1}, {1, 256, 2, 3}};
///     place_in_arena(r);  // 256: the two lifetimes do not overlap
inline std::size_t place_in_arena(std::vector<buffer_request>& requests) {
  std::vector<buffer_request*> order;
  for (auto& r : requests) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  std::vector<const buffer_request*> placed;
  std::size_t total = 0;
  for (buffer_request* r : order) {
    std::size_t offset = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const buffer_request* p : placed) {
        bool overlap_time = !(p->last_kernel < r->first_kernel || r->last_kernel < p->first_kernel);
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

}  // namespace luminal
