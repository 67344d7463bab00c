// The three kernel shapes a plan launches: a fused elementwise loop nest, a reduction over
// one axis (with the reduced expression fused into its inner loop), and batched GEMM.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>

#include "eval.hpp"
#include "ops/vector_math.hpp"

namespace luminal {

namespace detail {
/// The last axis of a shape whose extent is not statically 1 (0 if there is none): the
/// loop nests' inner axis. Axes after it hold coordinate 0 only.
template <index_t... E>
constexpr std::size_t row_axis(std::integer_sequence<index_t, E...>) {
  constexpr index_t extents[] = {E..., 0};
  std::size_t axis = 0;
  for (std::size_t k = 0; k < sizeof...(E); ++k)
    if (extents[k] != 1) axis = k;
  return axis;
}
/// The static extent of axis k, or -1 where it is symbolic or past the rank.
template <index_t... E>
constexpr index_t static_extent(std::integer_sequence<index_t, E...>, std::size_t k) {
  constexpr index_t extents[] = {E..., -1};
  return k < sizeof...(E) && extents[k] >= 0 ? extents[k] : -1;
}
/// The static extent of the inner axis, or -1 where it is symbolic (or the rank is 0).
template <index_t... E>
constexpr index_t row_extent(std::integer_sequence<index_t, E...> s) {
  return sizeof...(E) == 0 ? -1 : static_extent(s, row_axis(s));
}

/// Where a kernel rooted at Id loops: over the coordinates of node `it`, which is the root
/// or, past the reshapes at the root (same elements, same order), a permute's input, read
/// in its own order while the permuted writes go out at a stride. `permute` is that
/// permute, or -1. A permute whose input has a shorter inner axis than its own stays: the
/// loop would run over fewer elements per row (im2col's windows end in the window's 3
/// offsets, its rows in the image's 28 columns).
template <class P, int Id>
struct iteration {
  template <int N>
  using node = typename evaluator<P>::template node_t<N>;
  template <int N>
  static constexpr int child = flat::detail::first(typename node<N>::children{});
  template <int N>
  static constexpr bool peelable = node<N>::kind == op_kind::view && !node<child<N>>::stored && node<child<N>>::rank > 0;
  static constexpr int past_reshapes = [] {
    if constexpr (requires { node<Id>::op::is_reshape; }) {
      if constexpr (peelable<Id>) return iteration<P, child<Id>>::past_reshapes;
      else return Id;
    } else {
      return Id;
    }
  }();
  template <int N>
  static constexpr bool shortens_rows = [] {
    constexpr index_t inner = row_extent(typename node<child<N>>::static_extents{});
    constexpr index_t outer = row_extent(typename node<N>::static_extents{});
    return inner >= 0 && outer >= 0 && inner < outer;
  }();
  static constexpr int permute = [] {
    if constexpr (requires { node<past_reshapes>::op::from_child(extents<node<past_reshapes>::rank>{}); }) {
      if constexpr (peelable<past_reshapes> && !shortens_rows<past_reshapes>) return past_reshapes;
      else return -1;
    } else {
      return -1;
    }
  }();
  static constexpr int it = [] {
    if constexpr (permute >= 0) return child<permute>;
    else return past_reshapes;
  }();
};

/// Runs row(c, i, first, n) for the rows of coordinates c covering flat indices
/// [begin, end) of a shape with extents d: a row is n consecutive values of axis Row from
/// `first`, at flat indices i, i + 1, ... (axes after Row have extent 1). The coordinates
/// advance by increments: divisions happen once per call, not per element.
template <std::size_t Row, std::size_t R, class F>
LUMINAL_INLINE void for_each_row(index_t begin, index_t end, const extents<R>& d, F&& row) {
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
}  // namespace detail

/// A fused elementwise kernel: writes node Id of flat program P over flat indices
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
  static constexpr std::size_t rank = eval::template node_t<it>::rank;
  using static_extents = typename eval::template node_t<it>::static_extents;
  static constexpr std::size_t row = detail::row_axis(static_extents{});
  static constexpr index_t row_length = detail::row_extent(static_extents{});
  /// Rows of at most 8 elements (a pool's window of 4) run as blocks along the axis before
  /// theirs, each row unrolled: the work shared by a row's elements (every coordinate but
  /// the last) is then done once per row, not once per element.
  static constexpr bool short_rows = where::permute < 0 && row > 0 && row_length > 1 && row_length <= 8 &&
                                     detail::static_extent(static_extents{}, row - 1) != 1;
  kernel_context ctx;
  T* out;

  LUMINAL_HD void run_short_rows(index_t begin, index_t end, const extents<rank>& d) const {
    auto one = [&](index_t i) { out[i] = eval::template at<it, root>(ctx, detail::unravel(i, d)); };
    const index_t body_begin = (begin + row_length - 1) / row_length * row_length;
    const index_t body_end = end / row_length * row_length;
    if (body_begin >= body_end) {
      for (index_t i = begin; i < end; ++i) one(i);
      return;
    }
    for (index_t i = begin; i < body_begin; ++i) one(i);  // the end of a row another call began
    extents<row> outer{};
    for (std::size_t k = 0; k < row; ++k) outer[k] = d[k];
    detail::for_each_row<row - 1>(body_begin / row_length, body_end / row_length, outer,
                                  [&](extents<row>& oc, index_t i, index_t first, index_t n) {
      extents<rank> c{};
      for (std::size_t k = 0; k < row; ++k) c[k] = oc[k];
      for (index_t j = 0; j < n; ++j) {
        c[row - 1] = first + j;
        T* LUMINAL_RESTRICT line = out + (i + j) * row_length;
        for (index_t k = 0; k < row_length; ++k) {
          c[row] = k;
          line[k] = eval::template at<it, root>(ctx, c);
        }
      }
    });
    for (index_t i = body_end; i < end; ++i) one(i);
  }

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    if constexpr (where::permute < 0 && eval::template is_flat<it, root>()) {
      T* LUMINAL_RESTRICT o = out;
      for (index_t i = begin; i < end; ++i) o[i] = eval::template at_flat<it, root>(ctx, i);
    } else if constexpr (rank == 0) {
      if (begin < end) out[0] = eval::template at<it, root>(ctx, {});
    } else if constexpr (short_rows) {
      run_short_rows(begin, end, eval::template dims<it>(ctx));
    } else {
      detail::for_each_row<row>(begin, end, eval::template dims<it>(ctx),
                                [&](extents<rank>& c, index_t i, index_t first, index_t n) {
        if constexpr (where::permute < 0) {
          T* LUMINAL_RESTRICT line = out + i;
          extents<rank> at_j = c;  // a local copy: c lives in memory the loop would write
          for (index_t j = 0; j < n; ++j) {
            at_j[row] = first + j;
            line[j] = eval::template at<it, root>(ctx, at_j);
          }
        } else {
          using Perm = typename eval::template node_t<where::permute>;
          auto out_dims = eval::template dims<where::permute>(ctx);
          for (index_t j = 0; j < n; ++j) {
            c[row] = first + j;
            out[detail::ravel(Perm::op::from_child(c), out_dims)] = eval::template at<it>(ctx, c);
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
template <class P, int Id>
struct reduce_kernel {
  using eval = evaluator<P>;
  using N = typename eval::template node_t<Id>;
  using T = typename eval::template value_type<Id>;
  using F = typename N::op::functor;
  using value_type = T;
  static constexpr int child = flat::detail::first(typename N::children{});
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
    }(typename eval::template node_t<child>::static_extents{});
    return e[axis];
  }();
  static constexpr bool short_window = static_extent >= 0 && static_extent <= lanes;
  kernel_context ctx;
  T* out;

  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    index_t extent = eval::template dims<child>(ctx)[axis];
    detail::for_each_row<row>(begin, end, eval::template dims<Id>(ctx),
                              [&](extents<rank>& c, index_t i, index_t first, index_t n) {
      T* LUMINAL_RESTRICT line = out + i;
      if constexpr (axis == row || (axis > row && !short_window)) {  // axis == row: one output per row
        for (index_t j = 0; j < n; ++j) {
          c[row] = first + j;
          line[j] = reduce_one(c, extent);
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
    } else {
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
  }
  LUMINAL_HD static T identity() { return F::template identity<T>(); }
  LUMINAL_HD static T combine(T acc, T x) { return F::combine(acc, x); }
  /// Element k of the reduced axis for output o.
  LUMINAL_HD T element(index_t o, index_t k) const {
    auto c = detail::unravel(o, eval::template dims<Id>(ctx));
    c[axis] = k;
    return eval::template at<child>(ctx, c);
  }
  LUMINAL_HD void store(index_t o, T value) const { out[o] = value; }
};

/// Consecutive elementwise kernels over the same element count (an optimizer's moments
/// and parameter, a value and the mask its gradient keeps, the steps of a GELU's
/// gradient), run as one loop that writes all their buffers: block by block of flat
/// output indices, each kernel in turn (its own flat loop or loop nest over the block), so
/// a value one of them writes is still in cache when the next reads it. A member reads an
/// earlier member's buffer at the flat index it writes (kernel_groups::reads_in_place), or,
/// a flat kernel, one broadcast element; the latter is why program::replan keeps every
/// buffer a group reads or writes alive through the whole group (kernel_groups::first_of,
/// last_of), so running the members interleaved by blocks gives the results of one after
/// another.
template <class P, int... Ids>
struct fused_kernels {
  static constexpr index_t block = 2048;
  kernel_context ctx;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t first = begin; first < end; first += block) {
      index_t last = first + block < end ? first + block : end;
      (run_one<Ids>(first, last), ...);
    }
  }
  template <int Id>
  LUMINAL_HD void run_one(index_t first, index_t last) const {
    using T = typename evaluator<P>::template value_type<Id>;
    elementwise_kernel<P, Id>{ctx, static_cast<T*>(ctx.buffers[Id])}(first, last);
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
    if constexpr (N::kind == op_kind::reduce || N::kind == op_kind::matmul || N::kind == op_kind::input) return false;
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
  template <int Id>
  static constexpr Dim count() {
    using S = typename boost::mp11::mp_at_c<typename Layout::nodes, Id>::shape;
    Dim n;
    return dims_product(S::dims, 0, S::rank, n) ? n : Dim{-1};
  }
  template <std::size_t... K>
  static constexpr auto make(std::index_sequence<K...>) {
    constexpr std::size_t kernels = sizeof...(K);
    constexpr bool can[] = {fusable<plan.kernels[K]>()..., false};
    constexpr bool flat[] = {flat_kernel<plan.kernels[K]>()..., false};
    constexpr Dim counts[] = {count<plan.kernels[K]>()..., Dim{-1}};
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

template <class T>
struct fill_zero_body {
  T* out;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = T(0);
  }
};

template <class T>
struct add_into_body {
  T* sum;
  const T* addend;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) sum[i] += addend[i];
  }
};

namespace detail {
/// Waits for work a backend launched without waiting (CUDA's parallel_for); host and
/// Kokkos loops return when done.
template <class B>
void wait_for(B& backend) {
  if constexpr (requires { backend.synchronize(); }) backend.synchronize();
}
}  // namespace detail

/// Sets `bytes` bytes of backend memory to zero on the backend itself: a GPU's gradients
/// are zeroed where they live, and no zeros cross from the host.
template <class B>
void fill_zero(B& backend, void* data, std::size_t bytes) {
  if (bytes % 4 == 0) backend.parallel_for(index_t(bytes / 4), fill_zero_body<std::uint32_t>{static_cast<std::uint32_t*>(data)});
  else backend.parallel_for(index_t(bytes), fill_zero_body<unsigned char>{static_cast<unsigned char*>(data)});
  detail::wait_for(backend);
}

/// sum[i] += addend[i] for `count` elements of backend memory, on the backend.
template <class B, class T>
void add_into(B& backend, T* sum, const T* addend, std::size_t count) {
  backend.parallel_for(index_t(count), add_into_body<T>{sum, addend});
  detail::wait_for(backend);
}

/// Runs kernels of one program; host-side tables give extents and buffer addresses.
template <class B, class Layout>
struct kernel_runner {
  using flat_program = flat::program_of<Layout>;
  B& backend;
  kernel_context ctx;
  void* const* buffers;      // host copy of the device pointers
  const index_t* dims;       // host copy of the extents table

  template <class N>
  const index_t* dims_of() const { return dims + Layout::template id<N> * Layout::max_rank; }
  template <class N>
  index_t count_of() const {
    index_t n = 1;
    for (std::size_t k = 0; k < N::shape::rank; ++k) n *= dims_of<N>()[k];
    return n;
  }

  /// Kernels First .. End - 1 of the plan as one loop (detail::kernel_groups).
  template <int First, int End>
  void run_fused() {
    using N = boost::mp11::mp_at_c<typename Layout::nodes, Layout::plan.kernels[First]>;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      backend.parallel_for(count_of<N>(), fused_kernels<flat_program, Layout::plan.kernels[First + int(K)]...>{ctx});
    }(std::make_index_sequence<std::size_t(End - First)>{});
  }

  template <class N>
  void run() {
    using T = typename N::value_type;
    T* out = static_cast<T*>(buffers[Layout::template id<N>]);
    constexpr int id = Layout::template id<N>;
    if constexpr (N::kind == op_kind::reduce) {
      using Child = boost::mp11::mp_first<typename N::children>;
      index_t extent = dims_of<Child>()[N::op::axis];
      reduce_kernel<flat_program, id> body{ctx, out};
      if constexpr (requires { backend.parallel_reduce(index_t{}, index_t{}, body); })
        backend.parallel_reduce(count_of<N>(), extent, body);
      else
        backend.parallel_for(count_of<N>(), body);
    } else if constexpr (N::kind == op_kind::matmul) {
      run_matmul<N>(out);
    } else {
      backend.parallel_for(count_of<N>(), elementwise_kernel<flat_program, id>{ctx, out});
    }
  }

  /// How a GEMM reads one operand: the stored node, whether it is transposed, and its
  /// extents (batch axes of the stored node may be fewer or 1: broadcast).
  template <class Operand>
  struct gemm_operand {
    static constexpr auto& table = Layout::table;
    static constexpr int operand_id = Layout::template id<Operand>;
    static constexpr int base_id = detail::gemm_operand_base(table, operand_id);
    static constexpr bool transposed = [] {
      int id = table[operand_id].is_batch_expand ? table[operand_id].children[0] : operand_id;
      return table[id].is_last_two_transpose;
    }();
    static constexpr int base_rank = table[base_id].rank;
  };

  template <class N, class T>
  void run_matmul(T* out) {
    using A = boost::mp11::mp_first<typename N::children>;
    using Bop = boost::mp11::mp_second<typename N::children>;
    using OA = gemm_operand<A>;
    using OB = gemm_operand<Bop>;
    constexpr std::size_t R = N::shape::rank;
    const index_t* od = dims_of<N>();
    const index_t* ad = dims_of<A>();
    index_t m = od[R - 2], n = od[R - 1], k = ad[R - 1];
    index_t batches = 1;
    for (std::size_t i = 0; i + 2 < R; ++i) batches *= od[i];
    if (m == 0 || n == 0 || batches == 0) return;
    if (k == 0) {
      backend.parallel_for(batches * m * n, fill_zero_body<T>{out});  // a named functor: no nvcc extended lambda
      return;
    }
    const T* a = static_cast<const T*>(buffers[OA::base_id]);
    const T* b = static_cast<const T*>(buffers[OB::base_id]);
    const index_t* abase = dims + OA::base_id * Layout::max_rank;
    const index_t* bbase = dims + OB::base_id * Layout::max_rank;
    // Row-major leading dimensions of the stored matrices.
    index_t lda = abase[OA::base_rank - 1], ldb = bbase[OB::base_rank - 1];
    if constexpr (requires { backend.gemm_strided_batched(false, false, m, n, k, a, lda, m, b, ldb, m, out, n, m, m); }) {
      // One batched call when every operand's batches lie at a fixed stride (0: broadcast).
      if (batches > 1) {
        index_t stride_a = batch_offset<OA::base_rank>(1, od, R, abase);
        index_t stride_b = batch_offset<OB::base_rank>(1, od, R, bbase);
        bool strided = true;
        for (index_t batch = 2; batch < batches && strided; ++batch)
          strided = batch_offset<OA::base_rank>(batch, od, R, abase) == batch * stride_a &&
                    batch_offset<OB::base_rank>(batch, od, R, bbase) == batch * stride_b;
        if (strided) {
          backend.gemm_strided_batched(OA::transposed, OB::transposed, m, n, k, a, std::max<index_t>(lda, 1), stride_a,
                                       b, std::max<index_t>(ldb, 1), stride_b, out, std::max<index_t>(n, 1), m * n,
                                       batches);
          return;
        }
      }
    }
    for (index_t batch = 0; batch < batches; ++batch) {
      index_t a_offset = batch_offset<OA::base_rank>(batch, od, R, abase);
      index_t b_offset = batch_offset<OB::base_rank>(batch, od, R, bbase);
      backend.gemm(OA::transposed, OB::transposed, m, n, k, a + a_offset, std::max<index_t>(lda, 1), b + b_offset,
                   std::max<index_t>(ldb, 1), out + batch * m * n, std::max<index_t>(n, 1));
    }
  }

  /// Flat offset of output batch `batch` inside a stored operand whose batch axes are
  /// aligned to the right and broadcast where their extent is 1.
  template <int BaseRank>
  static index_t batch_offset(index_t batch, const index_t* out_dims, std::size_t out_rank, const index_t* base) {
    index_t matrix = base[BaseRank - 2] * base[BaseRank - 1];
    index_t offset = 0, stride = matrix;
    for (int axis = BaseRank - 3, out_axis = int(out_rank) - 3; axis >= 0; --axis, --out_axis) {
      index_t coord = batch % out_dims[out_axis];
      batch /= out_dims[out_axis];
      if (base[axis] != 1) offset += coord * stride;
      stride *= base[axis];
    }
    return offset;
  }
};

}  // namespace luminal
