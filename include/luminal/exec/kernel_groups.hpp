// Which consecutive elementwise kernels of a plan run as one launch (kernel_groups), and
// that launch's body (fused_kernels): loops over one element count, each member in turn
// over the same block of flat indices, and independent loops of other counts beside them.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "loop_kernels.hpp"

namespace luminal {

/// Consecutive elementwise kernels run as one launch, in segments. A segment is kernels
/// over the same element count (an optimizer's moments and parameter, a value and the
/// mask its gradient keeps, the steps of a GELU's gradient), run as one loop that writes
/// all their buffers: block by block of flat output indices, each kernel in turn (its own
/// flat loop or loop nest over the block), so a value one of them writes is still in cache
/// when the next reads it. A member reads an earlier member of its segment at the flat
/// index it writes (kernel_groups::reads_in_place), or, a flat kernel, one broadcast
/// element; the latter is why program::replan keeps every buffer a launch reads or writes
/// alive through the whole launch (kernel_groups::first_of, last_of), so running the
/// members interleaved by blocks gives the results of one after another. Segments of
/// other counts, flat loops all, read nothing an earlier segment writes (every parameter's
/// update, say): the launch runs over their elements laid end to end, each segment over
/// its own share. On a GPU that is one kernel, not one per parameter.
/// On the CPU, a member whose result only later members read, each in place, keeps it in
/// a scratch of one block on the thread's stack (Local, kernel_groups::local_mask): it
/// never goes to memory, which is most of the traffic of a chain like a GELU's gradient.
/// SegmentEnds: std::integer_sequence<int, ...> of one past each segment's last member;
/// counts: each segment's element count.
template <class P, std::uint64_t Local, class SegmentEnds, int... Ids>
struct fused_kernels;

template <class P, std::uint64_t Local, int... Ends, int... Ids>
struct fused_kernels<P, Local, std::integer_sequence<int, Ends...>, Ids...> {
  static constexpr index_t block = 2048;
  static constexpr int ids[sizeof...(Ids)] = {Ids...};
  static constexpr std::size_t size = sizeof...(Ids);
  static constexpr std::size_t segments = sizeof...(Ends);
  static constexpr int ends[sizeof...(Ends)] = {Ends...};
  /// A member applies a float function (loop_kernels.hpp): the backend may split fewer elements.
  static constexpr bool arithmetic_bound = (detail::applies_costly_map<P, Ids, true>::value || ...);
  static_assert(segments > 0 && ends[segments - 1] == int(size), "luminal: fused_kernels: segments must cover the members");
  /// Member m keeps its result in the cache (detail::kernel_groups::local_mask): bit m.
  static constexpr bool local(std::size_t m) { return m < 64 && (Local >> m & 1) != 0; }
  /// Where member m's scratch starts in its segment's scratch bytes, and each segment's
  /// total (one segment runs at a time: they share the scratch).
  static constexpr auto scratch_offsets = [] {
    constexpr std::size_t bytes[] = {sizeof(typename evaluator<P>::template value_type<Ids>)...};
    std::array<std::size_t, size + 1> offsets{};
    std::size_t s = 0, at = 0;
    for (std::size_t m = 0; m < size; ++m) {
      if (m > 0 && int(m) == ends[s]) ++s, at = 0;
      offsets[m] = at;
      at += local(m) ? (std::size_t(block) * bytes[m] + 63) / 64 * 64 : 0;
      offsets[size] = at > offsets[size] ? at : offsets[size];
    }
    return offsets;
  }();
  kernel_context ctx;
  index_t counts[segments];

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    run_segments(begin, end, std::make_index_sequence<segments>{});
  }

 private:
  static constexpr int last_id() {
    int top = 0;
    for (int id : ids) top = id > top ? id : top;
    return top;
  }
  template <std::size_t... S>
  LUMINAL_HD void run_segments(index_t begin, index_t end, std::index_sequence<S...>) const {
    index_t offset = 0;
    (run_segment<S>(begin, end, offset), ...);
  }
  /// Segment S's share of [begin, end) of the launch, at its own flat indices.
  template <std::size_t S>
  LUMINAL_HD void run_segment(index_t begin, index_t end, index_t& offset) const {
    constexpr int first = S == 0 ? 0 : ends[S == 0 ? 0 : S - 1];
    const index_t lo = begin > offset ? begin : offset;
    const index_t hi = end < offset + counts[S] ? end : offset + counts[S];
    if (lo < hi) run_members<first>(lo - offset, hi - offset, std::make_index_sequence<std::size_t(ends[S] - first)>{});
    offset += counts[S];
  }
  template <int First, std::size_t... M>
  LUMINAL_HD void run_members(index_t begin, index_t end, std::index_sequence<M...>) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    run_blocks<First, M...>(ctx, begin, end);  // a GPU thread's few elements: every result goes to memory
#else
    if constexpr (((!local(First + M)) && ...)) {
      run_blocks<First, M...>(ctx, begin, end);
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
        ((local(First + M) ? void(table[ids[First + M]] = shifted<ids[First + M]>(scratch + scratch_offsets[First + M], first))
                           : void()),
         ...);
        (run_one<ids[First + M]>(local_ctx, first, last), ...);
      }
    }
#endif
  }
  /// An address that, indexed by a flat index of the block starting at `first`, lands in
  /// `scratch` (integer arithmetic: the pointer itself may lie outside any object).
  template <int Id>
  static void* shifted(std::byte* scratch, index_t first) {
    using T = typename evaluator<P>::template value_type<Id>;
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(scratch) - std::uintptr_t(first) * sizeof(T));
  }
  template <int First, std::size_t... M>
  LUMINAL_HD static void run_blocks(const kernel_context& c, index_t begin, index_t end) {
    for (index_t first = begin; first < end; first += block) {
      index_t last = first + block < end ? first + block : end;
      (run_one<ids[First + M]>(c, first, last), ...);
    }
  }
  template <int Id>
  LUMINAL_HD static void run_one(const kernel_context& c, index_t first, index_t last) {
    using T = typename evaluator<P>::template value_type<Id>;
    elementwise_kernel<P, Id>{c, static_cast<T*>(c.buffers[Id])}(first, last);
  }
};

namespace detail {
/// Which of a plan's kernels run together as one launch (fused_kernels), and in which
/// segments (loops over one element count): see end and segment_end.
template <class Layout>
struct kernel_groups {
  using P = flat::graph_of<Layout>;
  static constexpr auto& plan = Layout::plan;
  /// An elementwise kernel that writes exactly the flat indices of its range: a flat loop,
  /// or a loop nest that does not scatter its writes through a permute.
  template <int Id>
  static constexpr bool fusable() {
    using N = node_at<typename P::nodes, Id>;
    if constexpr (!fuses(N::kind))
      return false;
    else if constexpr (iteration<P, Id>::it == Id && evaluates_flat<P, Id, true>::value) return N::rank > 0;
    else return iteration<P, Id>::permute < 0 && N::rank > 0;
  }
  template <int Id>
  static constexpr bool flat_kernel() {
    return iteration<P, Id>::it == Id && evaluates_flat<P, Id, true>::value;
  }
  /// How kernel `root` reads stored node `target`: not at all, only at the flat index it
  /// writes (through maps and reshapes, same flat order, from the root), or elsewhere too
  /// (through another view, a permute, a slice, a window, or a gather).
  enum class read_kind { none, in_place, elsewhere };
  struct read_entry {
    int target = -1;
    read_kind kind = read_kind::none;
  };
  /// Every stored node each kernel reads, and how: kernel `root`'s entries are
  /// entries[begin[root] .. begin[root + 1]). Size 0 only counts them.
  template <std::size_t Size>
  struct read_table {
    std::array<int, Layout::table.size() + 1> begin{};
    std::array<read_entry, Size> entries{};
    std::size_t count = 0;
  };
  /// One walk of each kernel's inline tree, down to the stored nodes it reads. The
  /// launch, segment and overwrite checks below ask up to 64 x 64 questions a launch;
  /// answering each with a walk of its own (and arrays the graph's size cleared for it)
  /// passed GCC's constexpr operation limit at 8 transformer layers.
  template <std::size_t Size>
  static constexpr read_table<Size> walk_reads() {
    constexpr auto& table = Layout::table;
    constexpr std::size_t n = table.size();
    read_table<Size> out{};
    std::array<bool, n> is_root{};
    for (int k = 0; k < plan.kernel_count; ++k) is_root[std::size_t(plan.kernels[std::size_t(k)])] = true;
    // Marks are the walk's number (root + 1), so no array is cleared between walks.
    // Each node is expanded at most twice (in place, moved), each time putting at most
    // five children (node_info::children): the stack never holds more than 10 n + 1.
    std::array<int, n> walked_in_place{}, walked_moved{}, found_in{};
    std::array<read_kind, n> kind{};
    std::array<int, n> found{};
    std::array<int, 10 * n + 1> stack{};
    std::array<bool, 10 * n + 1> stack_in_place{};
    for (std::size_t root = 0; root < n; ++root) {
      out.begin[root] = int(out.count);
      if (!is_root[root]) continue;
      const int mark = int(root) + 1;
      int top = 0, found_count = 0;
      stack[top] = int(root);
      stack_in_place[top++] = true;
      while (top > 0) {
        --top;
        const auto id = std::size_t(stack[top]);
        const bool in_place = stack_in_place[top];
        if (id != root && plan.stored[id]) {  // another buffer: read here, not walked into
          const read_kind read = in_place ? read_kind::in_place : read_kind::elsewhere;
          if (found_in[id] != mark) {
            found_in[id] = mark;
            kind[id] = read;
            found[std::size_t(found_count++)] = int(id);
          } else if (read == read_kind::elsewhere) {
            kind[id] = read;
          }
          continue;
        }
        auto& walked = in_place ? walked_in_place : walked_moved;
        if (walked[id] == mark) continue;
        walked[id] = mark;
        const node_info& info = table[id];
        const bool keeps_index = in_place && (child_reads_of(info.kind) == child_reads::same_place || info.is_reshape);
        for (int c = 0; c < info.child_count; ++c) {
          stack[std::size_t(top)] = info.children[std::size_t(c)];
          stack_in_place[std::size_t(top++)] = keeps_index;
        }
      }
      for (int f = 0; f < found_count; ++f) {
        if constexpr (Size > 0) out.entries[out.count] = {found[std::size_t(f)], kind[std::size_t(found[std::size_t(f)])]};
        ++out.count;
      }
    }
    out.begin[n] = int(out.count);
    return out;
  }
  static constexpr auto reads = walk_reads<walk_reads<0>().count>();
  static constexpr read_kind find_read(int root, int target) {
    if (!plan.stored[std::size_t(target)]) throw "luminal: kernel_groups: reads are recorded for stored nodes only";
    for (int e = reads.begin[std::size_t(root)]; e < reads.begin[std::size_t(root) + 1]; ++e)
      if (reads.entries[std::size_t(e)].target == target) return reads.entries[std::size_t(e)].kind;
    return read_kind::none;
  }
  /// The kernels (plan positions) that read each stored node, and how: those of node
  /// `target` are entries[begin[target] .. begin[target + 1]), in run order.
  struct reader_entry {
    int kernel = -1;
    read_kind kind = read_kind::none;
  };
  static constexpr std::size_t reader_count = [] {
    std::size_t count = 0;
    for (int k = 0; k < plan.kernel_count; ++k) {
      const auto root = std::size_t(plan.kernels[std::size_t(k)]);
      count += std::size_t(reads.begin[root + 1] - reads.begin[root]);
    }
    return count;
  }();
  struct reader_table {
    std::array<int, Layout::table.size() + 1> begin{};
    std::array<reader_entry, reader_count> entries{};
  };
  static constexpr reader_table readers = [] {
    reader_table out{};
    std::array<int, Layout::table.size() + 1> next{};
    for (int k = 0; k < plan.kernel_count; ++k) {
      const auto root = std::size_t(plan.kernels[std::size_t(k)]);
      for (int e = reads.begin[root]; e < reads.begin[root + 1]; ++e) ++out.begin[std::size_t(reads.entries[std::size_t(e)].target) + 1];
    }
    for (std::size_t t = 0; t < Layout::table.size(); ++t) out.begin[t + 1] += out.begin[t];
    next = out.begin;
    for (int k = 0; k < plan.kernel_count; ++k) {
      const auto root = std::size_t(plan.kernels[std::size_t(k)]);
      for (int e = reads.begin[root]; e < reads.begin[root + 1]; ++e) {
        const read_entry& read = reads.entries[std::size_t(e)];
        out.entries[std::size_t(next[std::size_t(read.target)]++)] = {k, read.kind};
      }
    }
    return out;
  }();
  /// Whether kernel `root` reads stored node `target`, if at all, only at the flat index
  /// it writes.
  static constexpr bool reads_in_place(int root, int target) { return find_read(root, target) != read_kind::elsewhere; }
  /// The most members one launch takes: a launch is one kernel's code, and the CPU keeps
  /// a local result only among the first 64 (local_mask).
  static constexpr int most_members = 64;
  struct launches {
    std::array<int, std::size_t(plan.kernel_count)> end{}, segment_end{};
  };
  template <std::size_t... K>
  static constexpr launches make(std::index_sequence<K...>) {
    constexpr std::size_t kernels = sizeof...(K);
    // A recompute entry (retention.hpp) runs alone: a run may skip it.
    constexpr bool can[] = {(!plan.is_recompute[K] && fusable<plan.kernels[K]>())..., false};
    constexpr bool flat[] = {flat_kernel<plan.kernels[K]>()..., false};
    constexpr Dim counts[] = {Layout::counts[std::size_t(plan.kernels[K])]..., Dim{-1}};
    // A loop nest joins a segment only if it reads every earlier member in place.
    auto joins = [&](std::size_t first, std::size_t j) {
      if (flat[j]) return true;
      for (std::size_t m = first; m < j; ++m)
        if (!reads_in_place(plan.kernels[j], plan.kernels[m])) return false;
      return true;
    };
    // A kernel of another segment reads no earlier member of the launch at all. Only flat
    // loops are put side by side: a GPU runs a launch one element per thread, which suits
    // them, while a loop nest alone walks rows of several elements (cuda_launch_settings).
    auto independent = [&](std::size_t first, std::size_t segment, std::size_t j) {
      if (!flat[j]) return false;
      for (std::size_t m = first; m < segment; ++m)
        if (!flat[m] || find_read(plan.kernels[j], plan.kernels[m]) != read_kind::none) return false;
      return true;
    };
    auto known = [&](std::size_t j) { return can[j] && !(counts[j] == Dim{-1}); };
    launches out{};
    for (std::size_t k = 0; k < kernels;) {
      std::size_t j = k + 1;
      if (known(k)) {
        while (j < kernels && j - k < most_members && can[j] && counts[j] == counts[k] && joins(k, j)) ++j;
        out.segment_end[k] = int(j);
        while (j < kernels && j - k < most_members && known(j) && independent(k, j, j)) {
          const std::size_t segment = j++;
          while (j < kernels && j - k < most_members && can[j] && counts[j] == counts[segment] && joins(segment, j) &&
                 independent(k, segment, j))
            ++j;
          out.segment_end[segment] = int(j);
        }
      } else {
        out.segment_end[k] = int(j);
      }
      out.end[k] = int(j);
      for (std::size_t m = k + 1; m < j; ++m) {
        out.end[m] = -1;
        if (out.segment_end[m] == 0) out.segment_end[m] = -1;
      }
      k = j;
    }
    return out;
  }
  static constexpr launches made = make(std::make_index_sequence<std::size_t(plan.kernel_count)>{});
  /// end[k]: one past the last kernel of the launch that kernel k starts; -1 for a kernel
  /// inside a launch.
  static constexpr auto end = made.end;
  /// segment_end[k]: one past the last kernel of the segment (the loop over one element
  /// count) that kernel k starts; -1 for a kernel inside a segment.
  static constexpr auto segment_end = made.segment_end;
  /// How many segments the launch that kernel `first` starts has.
  static constexpr int segment_count(int first) {
    int n = 0;
    for (int k = first; k < end[std::size_t(first)]; ++k) n += segment_end[std::size_t(k)] > 0;
    return n;
  }
  /// The segments of the launch that kernel `first` starts: one past each one's last
  /// member, counted from `first` (fused_kernels' SegmentEnds).
  template <int First>
  static constexpr auto segment_ends() {
    std::array<int, std::size_t(segment_count(First))> ends{};
    std::size_t s = 0;
    for (int k = First; k < end[First]; ++k)
      if (segment_end[k] > 0) ends[s++] = segment_end[k] - First;
    return ends;
  }
  template <int First, std::size_t... S>
  static auto segment_sequence(std::index_sequence<S...>) -> std::integer_sequence<int, segment_ends<First>()[S]...>;
  /// segment_ends<First>() as a type: std::integer_sequence<int, ...>.
  template <int First>
  using segment_ends_t = decltype(segment_sequence<First>(std::make_index_sequence<segment_ends<First>().size()>{}));
  /// Whether the kernel at plan position `writer` may write its result over stored node
  /// `target` (an input it replaces, as an optimizer's update does): no kernel reads
  /// `target` after the writer (the plan's lifetimes), and every kernel that reads it runs
  /// in an earlier launch or in the writer's own segment, reading it in place (a block is
  /// read before a later member writes it).
  static constexpr bool may_overwrite(int writer, int target) {
    if (writer < 0 || writer >= int(plan.kernel_count)) return false;
    const auto t = std::size_t(target);
    if (!plan.stored[t]) return false;  // no buffer to write over
    if (std::max(plan.forward_last_use[t], plan.backward_last_use[t]) > writer) return false;
    int segment = writer;
    while (segment_end[std::size_t(segment)] < 0) --segment;
    // Kernels before the writer's group read the target before it is overwritten.
    const int first = first_of(writer);
    for (int e = readers.begin[t]; e < readers.begin[t + 1]; ++e) {
      const reader_entry& reader = readers.entries[std::size_t(e)];
      if (reader.kernel < first) continue;
      if (reader.kernel > writer || reader.kernel < segment || reader.kind == read_kind::elsewhere) return false;
    }
    return true;
  }
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
