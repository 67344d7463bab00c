// The kernels a plan launches: the loop kernels (loop_kernels.hpp), groups of them run as
// one loop (kernel_groups.hpp), and batched GEMM, dispatched by kernel_runner.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <memory>

#include "../core/communicator.hpp"
#include "../core/quant_format.hpp"
#include "kernel_groups.hpp"

namespace luminal {

template <class T>
struct fill_zero_body {
  T* out;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = T(0);
  }
};

/// out[i] = in[i] converted (bf16 or f16 widened to f32, or f32 rounded to them).
template <class From, class To>
struct convert_body {
  const From* in;
  To* out;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = To(static_cast<arithmetic_t<From>>(in[i]));
  }
};

template <class T>
struct add_into_body {
  T* sum;
  const T* addend;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) sum[i] = T(static_cast<arithmetic_t<T>>(sum[i]) + static_cast<arithmetic_t<T>>(addend[i]));
  }
};

namespace detail {
/// Waits for work a backend launched without waiting (CUDA's parallel_for); host and
/// Kokkos loops return when done. Only timing needs it: a backend runs its launches and
/// copies in the order they were issued, and its copies to the host wait for them.
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
}

/// sum[i] += addend[i] for `count` elements of backend memory, on the backend.
template <class B, class T>
void add_into(B& backend, T* sum, const T* addend, std::size_t count) {
  backend.parallel_for(index_t(count), add_into_body<T>{sum, addend});
}

/// Runs kernels of one program; host-side tables give extents and buffer addresses.
template <class B, class Layout>
struct kernel_runner {
  using flat_program = flat::graph_of<Layout>;
  B& backend;
  kernel_context ctx;
  void* const* buffers;      // host copy of the device pointers
  const index_t* dims;       // host copy of the extents table
  detail::exchange_state* exchange = nullptr;  // the program's, for exchange kernels
  const quant_format* formats = nullptr;       // per node: how a quantized leaf's data is stored
  std::shared_ptr<void>* op_states = nullptr;  // per node: what an opaque op keeps between runs

  /// What opaque node N keeps between runs of its program (a scan's body programs), made by
  /// make() at the first run; it lives as long as the program, and no longer.
  template <class N, class State, class Make>
  State& state_of(Make make) {
    std::shared_ptr<void>& slot = op_states[Layout::template id<N>::value];
    if (!slot) slot = std::make_shared<State>(make());
    return *static_cast<State*>(slot.get());
  }

  /// Node N's id in the program: the index of its buffer and its row of extents.
  template <class N>
  static constexpr int id_of() { return Layout::template id<N>::value; }

  /// How quantized leaf N's bound data is stored (program::bind_quantized).
  template <class N>
  quant_format format_of() const { return formats[Layout::template id<N>::value]; }

  template <class N>
  auto* data_of() const { return static_cast<typename N::value_type*>(buffers[Layout::template id<N>::value]); }

  template <class N>
  const index_t* dims_of() const { return dims + Layout::template id<N>::value * Layout::max_rank; }
  template <class N>
  index_t count_of() const {
    index_t n = 1;
    for (std::size_t k = 0; k < N::shape::rank; ++k) n *= dims_of<N>()[k];
    return n;
  }

  /// Kernels First .. End - 1 of the plan as one launch (detail::kernel_groups): each
  /// segment over its own element count, the segments' elements laid end to end.
  template <int First, int End>
  void run_fused() {
    using groups = detail::kernel_groups<Layout>;
    static constexpr auto ends = groups::template segment_ends<First>();
    using segment_ends = typename groups::template segment_ends_t<First>;
    [&]<std::size_t... K, std::size_t... S>(std::index_sequence<K...>, std::index_sequence<S...>) {
      constexpr std::uint64_t local = detail::kernel_groups<Layout>::local_mask(First);
      using body = fused_kernels<flat_program, local, segment_ends, Layout::plan.kernels[First + int(K)]...>;
      // Segment S starts at member ends[S - 1] (0 for the first).
      const index_t counts[] = {
          count_of<node_at<typename Layout::nodes, Layout::plan.kernels[First + (S == 0 ? 0 : ends[S - 1])]>>()...};
      index_t total = 0;
      for (index_t c : counts) total += c;
      backend.parallel_for(total, body{ctx, {counts[S]...}});
    }(std::make_index_sequence<std::size_t(End - First)>{}, std::make_index_sequence<ends.size()>{});
  }

  template <class N>
  void run() {
    using T = typename N::value_type;
    T* out = static_cast<T*>(buffers[Layout::template id<N>::value]);
    constexpr int id = Layout::template id<N>::value;
    if constexpr (!gemms_natively<B, T> && (N::kind == op_kind::matmul || (N::kind == op_kind::reduce && Layout::plan.sums_gemm[id]))) {
      run_widened_matmul<N>(out);
    } else if constexpr (N::kind == op_kind::reduce && Layout::plan.sums_gemm[id]) {
      run_summed_matmul<boost::mp11::mp_first<typename N::children>, std::size_t(N::op::axis)>(out);
    } else if constexpr (N::kind == op_kind::reduce) {
      using Child = boost::mp11::mp_first<typename N::children>;
      index_t extent = dims_of<Child>()[N::op::axis];
      reduce_kernel<flat_program, id> body{ctx, out};
      if constexpr (requires { backend.parallel_reduce(index_t{}, index_t{}, body); })
        backend.parallel_reduce(count_of<N>(), extent, body);
      else
        backend.parallel_for(count_of<N>(), body);
    } else if constexpr (N::kind == op_kind::matmul) {
      run_matmul<N>(out);
    } else if constexpr (N::kind == op_kind::opaque) {
      N::op::template execute<N>(*this, out);
    } else {
      backend.parallel_for(count_of<N>(), elementwise_kernel<flat_program, id>{ctx, out});
    }
  }

  /// A matmul (or a sum of matmuls, plan.sums_gemm) of bf16 or f16 operands: each
  /// operand's memory widened to f32, an f32 GEMM, its product rounded once, as PyTorch's
  /// CPU matmul rounds its f32 accumulators. Correct and simple: the f32 copies are
  /// allocated for each run (so a CUDA graph cannot capture it). Backends whose GEMMs take
  /// the type itself skip it (gemms_natively: the host's bf16 GEMM).
  template <class N, class T>
  void run_widened_matmul(T* out) {
    constexpr bool summed = N::kind == op_kind::reduce;
    using Product = std::conditional_t<summed, boost::mp11::mp_first<typename N::children>, N>;
    constexpr int memory_a = gemm_operand<boost::mp11::mp_first<typename Product::children>>::memory_id;
    constexpr int memory_b = gemm_operand<boost::mp11::mp_second<typename Product::children>>::memory_id;
    struct scratch {  // backend memory, given back however the run ends
      B& backend;
      void* memory[3] = {nullptr, nullptr, nullptr};
      ~scratch() {
        for (void* p : memory)
          if (p) backend.deallocate(p);
      }
    } wide{backend};
    auto count_of_id = [&](int id) {
      index_t n = 1;
      for (int k = 0; k < Layout::table[std::size_t(id)].rank; ++k) n *= dims[index_t(id) * index_t(Layout::max_rank) + k];
      return n;
    };
    std::array<void*, Layout::node_count> table;
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = buffers[i];
    auto widen = [&](int id, int slot) {
      const index_t n = count_of_id(id);
      auto* f = static_cast<float*>(wide.memory[slot] = backend.allocate(std::size_t(n) * sizeof(float)));
      backend.parallel_for(n, convert_body<T, float>{static_cast<const T*>(buffers[id]), f});
      table[std::size_t(id)] = f;
    };
    widen(memory_a, 0);
    if (memory_b != memory_a) widen(memory_b, 1);
    const index_t outputs = count_of<N>();
    auto* product = static_cast<float*>(wide.memory[2] = backend.allocate(std::size_t(outputs) * sizeof(float)));
    kernel_runner widened = *this;
    widened.buffers = table.data();
    if constexpr (summed) widened.template run_summed_matmul<Product, std::size_t(N::op::axis)>(product);
    else widened.template run_matmul<N>(product);
    backend.parallel_for(outputs, convert_body<float, T>{product, out});
    detail::wait_for(backend);  // the scratch is freed on return
  }

  /// How a GEMM reads one operand: the node whose extents lay out its memory (batch axes
  /// may be fewer or 1: broadcast), the stored node whose memory that is (the same, or
  /// the node under a reshape: detail::gemm_operand_memory), and whether it is transposed.
  template <class Operand>
  struct gemm_operand {
    static constexpr auto& table = Layout::table;
    static constexpr int operand_id = Layout::template id<Operand>::value;
    static constexpr int base_id = detail::gemm_operand_base(table, operand_id);
    static constexpr int memory_id = Layout::plan.gemm_base[std::size_t(operand_id)];
    static constexpr bool transposed = [] {
      int id = table[operand_id].is_batch_expand ? table[operand_id].children[0] : operand_id;
      return table[id].is_last_two_transpose;
    }();
    static constexpr int base_rank = table[base_id].rank;
  };

  /// Where matmul Product's two operands lie: their memory, the extents that lay each out
  /// (batch_offset reads them) and their row-major leading dimensions (at least 1).
  template <class T>
  struct stored_operands {
    const T* a;
    const T* b;
    const index_t* abase;
    const index_t* bbase;
    index_t lda, ldb;
  };
  template <class Product, class T>
  stored_operands<T> operands_of() const {
    using OA = gemm_operand<boost::mp11::mp_first<typename Product::children>>;
    using OB = gemm_operand<boost::mp11::mp_second<typename Product::children>>;
    const index_t* abase = dims + OA::base_id * Layout::max_rank;
    const index_t* bbase = dims + OB::base_id * Layout::max_rank;
    return {static_cast<const T*>(buffers[OA::memory_id]), static_cast<const T*>(buffers[OB::memory_id]), abase, bbase,
            std::max<index_t>(abase[OA::base_rank - 1], 1), std::max<index_t>(bbase[OB::base_rank - 1], 1)};
  }

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
    const stored_operands<T> op = operands_of<N, T>();
    if constexpr (requires { backend.gemm_strided_batched(false, false, m, n, k, op.a, op.lda, m, op.b, op.ldb, m, out,
                                                          n, m, m); }) {
      // One batched call when every operand's batches lie at a fixed stride (0: broadcast).
      if (batches > 1) {
        index_t stride_a = batch_offset<OA::base_rank>(1, od, R, op.abase);
        index_t stride_b = batch_offset<OB::base_rank>(1, od, R, op.bbase);
        bool strided = true;
        for (index_t batch = 2; batch < batches && strided; ++batch)
          strided = batch_offset<OA::base_rank>(batch, od, R, op.abase) == batch * stride_a &&
                    batch_offset<OB::base_rank>(batch, od, R, op.bbase) == batch * stride_b;
        if (strided) {
          backend.gemm_strided_batched(OA::transposed, OB::transposed, m, n, k, op.a, op.lda, stride_a, op.b, op.ldb,
                                       stride_b, out, std::max<index_t>(n, 1), m * n, batches);
          return;
        }
      }
    }
    for (index_t batch = 0; batch < batches; ++batch) {
      index_t a_offset = batch_offset<OA::base_rank>(batch, od, R, op.abase);
      index_t b_offset = batch_offset<OB::base_rank>(batch, od, R, op.bbase);
      backend.gemm(OA::transposed, OB::transposed, m, n, k, op.a + a_offset, op.lda, op.b + b_offset, op.ldb,
                   out + batch * m * n, std::max<index_t>(n, 1));
    }
  }

  /// The sum of matmul Product over its batch axis Axis (plan.sums_gemm): for each batch
  /// of the other batch axes, one gemm_batch_sum over Axis. An operand's offset is linear
  /// in each batch coordinate, so its batches along one axis lie at a fixed stride.
  template <class Product, std::size_t Axis, class T>
  void run_summed_matmul(T* out) {
    using A = boost::mp11::mp_first<typename Product::children>;
    using Bop = boost::mp11::mp_second<typename Product::children>;
    using OA = gemm_operand<A>;
    using OB = gemm_operand<Bop>;
    constexpr std::size_t R = Product::shape::rank;
    const index_t* pd = dims_of<Product>();
    index_t m = pd[R - 2], n = pd[R - 1], k = dims_of<A>()[R - 1], summed = pd[Axis];
    index_t outer = 1;
    for (std::size_t i = 0; i + 2 < R; ++i) outer *= i == Axis ? 1 : pd[i];
    if (m == 0 || n == 0 || outer == 0) return;
    if (k == 0 || summed == 0) {
      backend.parallel_for(outer * m * n, fill_zero_body<T>{out});
      return;
    }
    const stored_operands<T> op = operands_of<Product, T>();
    // Product's batch index of batch `o` of the sum (its other batch axes, row-major) with `s` on Axis.
    auto batch_of = [&](index_t o, index_t s) {
      index_t index = 0, stride = 1;
      for (int axis = int(R) - 3; axis >= 0; --axis) {
        index_t coord = s;
        if (axis != int(Axis)) {
          coord = o % pd[axis];
          o /= pd[axis];
        }
        index += coord * stride;
        stride *= pd[axis];
      }
      return index;
    };
    for (index_t o = 0; o < outer; ++o) {
      index_t first = batch_of(o, 0), second = summed > 1 ? batch_of(o, 1) : first;
      index_t a_offset = batch_offset<OA::base_rank>(first, pd, R, op.abase);
      index_t b_offset = batch_offset<OB::base_rank>(first, pd, R, op.bbase);
      index_t stride_a = batch_offset<OA::base_rank>(second, pd, R, op.abase) - a_offset;
      index_t stride_b = batch_offset<OB::base_rank>(second, pd, R, op.bbase) - b_offset;
      backend.gemm_batch_sum(OA::transposed, OB::transposed, m, n, k, op.a + a_offset, op.lda, stride_a,
                             op.b + b_offset, op.ldb, stride_b, out + o * m * n, std::max<index_t>(n, 1), summed);
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
