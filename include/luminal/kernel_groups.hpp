// Which consecutive elementwise kernels of a plan run as one loop (kernel_groups), and
// that loop (fused_kernels): each member in turn over the same block of flat indices.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "loop_kernels.hpp"

namespace luminal {

/// Consecutive elementwise kernels over the same element count (an optimizer's moments
/// and parameter, a value and the mask its gradient keeps, the steps of a GELU's
/// gradient), run as one loop that writes all their buffers: block by block of flat
/// output indices, each kernel in turn (its own flat loop or loop nest over the block), so
/// a value one of them writes is still in cache when the next reads it. A member reads an
/// earlier member's buffer at the flat index it writes (kernel_groups::reads_in_place), or,
/// a flat kernel, one broadcast element; the latter is why program::replan keeps every
/// buffer a group reads or writes alive through the whole group (kernel_groups::first_of,
/// last_of), so running the members interleaved by blocks gives the results of one after
/// another. On the CPU, a member whose result only later members read, each in place, keeps
/// it in a scratch of one block on the thread's stack (Local, kernel_groups::local_mask):
/// it never goes to memory, which is most of the traffic of a chain like a GELU's gradient.
template <class P, std::uint64_t Local, int... Ids>
struct fused_kernels {
  static constexpr index_t block = 2048;
  static constexpr int ids[] = {Ids...};
  static constexpr std::size_t size = sizeof...(Ids);
  /// Member m keeps its result in the cache (detail::kernel_groups::local_mask): bit m.
  static constexpr bool local(std::size_t m) { return m < 64 && (Local >> m & 1) != 0; }
  /// Where member m's scratch starts in the thread's scratch bytes, and their total.
  static constexpr auto scratch_offsets = [] {
    constexpr std::size_t bytes[] = {sizeof(typename evaluator<P>::template value_type<Ids>)...};
    std::array<std::size_t, size + 1> offsets{};
    for (std::size_t m = 0; m < size; ++m)
      offsets[m + 1] = offsets[m] + (local(m) ? (std::size_t(block) * bytes[m] + 63) / 64 * 64 : 0);
    return offsets;
  }();
  kernel_context ctx;

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    run_blocks(ctx, begin, end);  // a GPU thread's few elements: every result goes to memory
#else
    if constexpr (Local == 0) {
      run_blocks(ctx, begin, end);
    } else {
      // The members read a local result through a copy of the buffer table whose entry
      // points at the scratch, shifted so that flat index i of the block lands at
      // scratch[i - first]: a later member reads it at the index it writes
      // (kernel_groups::reads_in_place), so the read stays inside the block. Nodes a
      // member reads come before it in the table: the copy ends at the last member.
      constexpr std::size_t table_size = std::size_t(last_id()) + 1;
      alignas(64) std::byte scratch[scratch_offsets[size]];
      void* table[table_size];
      for (std::size_t i = 0; i < table_size; ++i) table[i] = ctx.buffers[i];
      const kernel_context local_ctx{table, ctx.dims, ctx.error_flag};
      for (index_t first = begin; first < end; first += block) {
        index_t last = first + block < end ? first + block : end;
        [&]<std::size_t... M>(std::index_sequence<M...>) {
          ((local(M) ? void(table[ids[M]] = shifted<Ids>(scratch + scratch_offsets[M], first)) : void()), ...);
        }(std::make_index_sequence<size>{});
        (run_one<Ids>(local_ctx, first, last), ...);
      }
    }
#endif
  }

 private:
  static constexpr int last_id() {
    int top = 0;
    for (int id : ids) top = id > top ? id : top;
    return top;
  }
  /// An address that, indexed by a flat index of the block starting at `first`, lands in
  /// `scratch` (integer arithmetic: the pointer itself may lie outside any object).
  template <int Id>
  static void* shifted(std::byte* scratch, index_t first) {
    using T = typename evaluator<P>::template value_type<Id>;
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(scratch) - std::uintptr_t(first) * sizeof(T));
  }
  LUMINAL_HD void run_blocks(const kernel_context& c, index_t begin, index_t end) const {
    for (index_t first = begin; first < end; first += block) {
      index_t last = first + block < end ? first + block : end;
      (run_one<Ids>(c, first, last), ...);
    }
  }
  template <int Id>
  LUMINAL_HD static void run_one(const kernel_context& c, index_t first, index_t last) {
    using T = typename evaluator<P>::template value_type<Id>;
    elementwise_kernel<P, Id>{c, static_cast<T*>(c.buffers[Id])}(first, last);
  }
};

namespace detail {
/// Which of a plan's kernels run together (fused_kernels): end[k] is one past the last
/// kernel of the group that kernel k starts; a kernel inside a group has end[k] = -1.
template <class Layout>
struct kernel_groups {
  using P = flat::program_of<Layout>;
  static constexpr auto& plan = Layout::plan;
  /// An elementwise kernel that writes exactly the flat indices of its range: a flat loop,
  /// or a loop nest that does not scatter its writes through a permute.
  template <int Id>
  static constexpr bool fusable() {
    using N = typename evaluator<P>::template node_t<Id>;
    if constexpr (N::kind == op_kind::reduce || N::kind == op_kind::matmul || N::kind == op_kind::input ||
                  N::kind == op_kind::exchange)
      return false;
    else if constexpr (iteration<P, Id>::it == Id && evaluator<P>::template is_flat<Id, true>()) return N::rank > 0;
    else return iteration<P, Id>::permute < 0 && N::rank > 0;
  }
  template <int Id>
  static constexpr bool flat_kernel() {
    return iteration<P, Id>::it == Id && evaluator<P>::template is_flat<Id, true>();
  }
  /// Whether kernel `root` reads stored node `target`, if at all, only at the flat index
  /// it writes: through maps and reshapes (same flat order) from the root, never through
  /// another view (a permute, a slice, a window) or a gather.
  static constexpr bool reads_in_place(int root, int target) {
    constexpr auto& table = Layout::table;
    constexpr std::size_t n = table.size();
    // Each node is expanded at most twice (in place, moved), each time putting at most
    // three children for one taken off: the stack never holds more than 4 n + 1.
    std::array<bool, n> seen_in_place{}, seen_moved{};
    std::array<int, 4 * n + 1> stack{};
    std::array<bool, 4 * n + 1> stack_in_place{};
    int top = 0;
    stack[top] = root;
    stack_in_place[top++] = true;
    while (top > 0) {
      --top;
      const int id = stack[top];
      const bool in_place = stack_in_place[top];
      if (id == target && id != root) {
        if (!in_place) return false;
        continue;
      }
      if (id != root && plan.stored[id]) continue;  // another buffer: read anywhere
      auto& seen = in_place ? seen_in_place : seen_moved;
      if (seen[std::size_t(id)]) continue;
      seen[std::size_t(id)] = true;
      const node_info& info = table[std::size_t(id)];
      const bool keeps_index = in_place && (info.kind == op_kind::map || (info.kind == op_kind::view && info.is_reshape));
      for (int c = 0; c < info.child_count; ++c) {
        stack[top] = info.children[c];
        stack_in_place[top++] = keeps_index;
      }
    }
    return true;
  }
  template <std::size_t... K>
  static constexpr auto make(std::index_sequence<K...>) {
    constexpr std::size_t kernels = sizeof...(K);
    // A recompute entry (rematerialize.hpp) runs alone: a run may skip it.
    constexpr bool can[] = {(!plan.is_recompute[K] && fusable<plan.kernels[K]>())..., false};
    constexpr bool flat[] = {flat_kernel<plan.kernels[K]>()..., false};
    constexpr Dim counts[] = {Layout::counts[std::size_t(plan.kernels[K])]..., Dim{-1}};
    // A loop nest joins a group only if it reads every earlier member in place.
    auto joins = [&](std::size_t first, std::size_t j) {
      if (flat[j]) return true;
      for (std::size_t m = first; m < j; ++m)
        if (!reads_in_place(plan.kernels[j], plan.kernels[m])) return false;
      return true;
    };
    std::array<int, kernels> end{};
    for (std::size_t k = 0; k < kernels;) {
      std::size_t j = k + 1;
      if (can[k] && !(counts[k] == Dim{-1}))
        while (j < kernels && can[j] && counts[j] == counts[k] && joins(k, j)) ++j;
      end[k] = int(j);
      for (std::size_t m = k + 1; m < j; ++m) end[m] = -1;
      k = j;
    }
    return end;
  }
  static constexpr auto end = make(std::make_index_sequence<std::size_t(plan.kernel_count)>{});
  /// Whether kernel k's result stays in its group: it is no output, no kernel outside
  /// the group reads it (nor a recompute entry), and each later member reads it, if at
  /// all, at the flat index it writes. fused_kernels then keeps it in a block-sized
  /// scratch (on the CPU) instead of its buffer. (Only the first 64 members can.)
  static constexpr bool stays_in_group(int k) {
    const int last = last_of(k);
    const int id = plan.kernels[std::size_t(k)];
    if (first_of(k) == last || k - first_of(k) >= 64 || plan.is_output[std::size_t(id)] ||
        plan.recompute_entry[std::size_t(id)] >= 0 ||
        plan.forward_last_use[std::size_t(id)] > last || plan.backward_last_use[std::size_t(id)] > last)
      return false;
    for (int r = 0; r < plan.recompute_read_count; ++r)
      if (plan.recompute_reads[std::size_t(r)][1] == id) return false;
    for (int j = k + 1; j <= last; ++j)
      if (!reads_in_place(plan.kernels[std::size_t(j)], id)) return false;
    return true;
  }
  /// The members of the group that kernel `first` starts that stay in it: bit m for
  /// kernel first + m (the first 64 members).
  static constexpr std::uint64_t local_mask(int first) {
    std::uint64_t mask = 0;
    for (int k = first; k < end[std::size_t(first)]; ++k)
      if (stays_in_group(k)) mask |= std::uint64_t(1) << (k - first);
    return mask;
  }

  /// The span of kernels that run in one loop with kernel k: [first_of(k), last_of(k)].
  /// A buffer's lifetime is widened to whole groups (program::replan), because a member
  /// that reads a broadcast element reads index 0 while another member of the group, in
  /// another block or another thread's chunk, writes its own output: the two must not
  /// share memory, even though the reader is the earlier kernel.
  static constexpr int first_of(int k) {
    if (k < 0 || k >= int(plan.kernel_count)) return k;
    while (end[std::size_t(k)] < 0) --k;
    return k;
  }
  static constexpr int last_of(int k) {
    if (k < 0 || k >= int(plan.kernel_count)) return k;
    return end[std::size_t(first_of(k))] - 1;
  }
};
}  // namespace detail

}  // namespace luminal
