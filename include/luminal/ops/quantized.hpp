// Ops that read weights in their storage format (core/quant_format.hpp): a linear layer and
// an embedding lookup whose weight is a `quantized_weight` leaf, stored as GGUF stores it
// (Q4_0, Q4_1, Q8_0, F16, BF16 or F32, said when it is bound). No f32 copy of the weight
// ever exists: each is an opaque op, a kernel of its own that reads the blocks.
//
//     auto w = quantized_weight<"blk.0.ffn_up.weight">(shape<Hidden, Width>);   // [out, in]
//     auto table = quantized_weight<"token_embd.weight">(shape<Vocab, Width>);
//     auto h = gather(table, input<"tokens", i32>(shape<Seq>));                 // [Seq, Width] f32
//     auto y = linear(h, w);                                                    // h @ w^T: [Seq, Hidden]
//
// A backend may run them itself (the host backend does, with integer dot products on
// blocks: exec/quant_matmul.hpp): `quantized_matmul(...)` and `dequantize_rows(...)`.
// Every other backend runs the generic bodies below, one output element per index.
#pragma once
#include <cstdint>

#include "../core/errors.hpp"
#include "../core/exceptions.hpp"
#include "../core/node.hpp"
#include "../core/quant_blocks.hpp"
#include "matmul.hpp"

namespace luminal {

namespace detail {
/// y[i] for i = m * n + col: row m of x against weight row col, dequantized element by element.
struct quantized_matmul_body {
  quant_format format;
  const unsigned char* weight;
  std::size_t row_bytes;
  index_t n, k;
  const float* x;
  float* y;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) {
      const index_t m = i / n, col = i % n;
      const unsigned char* row = weight + std::size_t(col) * row_bytes;
      const float* xm = x + m * k;
      float acc = 0;
      for (index_t j = 0; j < k; ++j) acc += xm[j] * dequantize_element(format, row, std::size_t(j));
      y[i] = acc;
    }
  }
};

/// out[r, j] = table[ids[r], j], dequantized; an id outside [0, rows) writes zeros and sets
/// the error flag (program::run then throws run_error).
struct dequantize_rows_body {
  quant_format format;
  const unsigned char* table;
  std::size_t row_bytes;
  index_t rows, k;
  const std::int32_t* ids;
  float* out;
  int* error_flag;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) {
      const index_t r = i / k, j = i % k;
      const std::int32_t id = ids[r];
      if (id < 0 || id >= rows) {
        out[i] = 0;
        *error_flag = 1;
      } else {
        out[i] = dequantize_element(format, table + std::size_t(id) * row_bytes, std::size_t(j));
      }
    }
  }
};
}  // namespace detail

/// x [..., K] @ w^T for a quantized weight w [N, K]: [..., N]. An opaque op.
struct QuantizedLinear {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "linear (quantized weight)";
  template <class X, class W>
  using value_type = X;
  template <class SX, class SW>
  static constexpr auto product_dims() {
    auto dims = SX::dims;
    dims[SX::rank - 1] = SW::dims[0];
    return dims;
  }
  template <class SX, class SW>
  using shape = shape_from<product_dims<SX, SW>()>;

  template <class N, class Runner>
  static void execute(Runner& runner, float* out) {
    using X = boost::mp11::mp_first<typename N::children>;
    using W = boost::mp11::mp_second<typename N::children>;
    const index_t* wd = runner.template dims_of<W>();
    const index_t n = wd[0], k = wd[1];
    const index_t m = k == 0 ? 0 : runner.template count_of<X>() / k;
    const quant_format format = runner.template format_of<W>();
    const void* weight = runner.buffers[Runner::template id_of<W>()];
    const float* x = runner.template data_of<X>();
    if (m == 0 || n == 0) return;
    auto& backend = runner.backend;
    if constexpr (requires { backend.quantized_matmul(format, weight, n, k, x, m, out); }) {
      backend.quantized_matmul(format, weight, n, k, x, m, out);
    } else {
      backend.parallel_for(m * n, detail::quantized_matmul_body{format, static_cast<const unsigned char*>(weight),
                                                                row_bytes(format, std::size_t(k)), n, k, x, out});
    }
  }
};

/// Rows of a quantized table [V, K] picked by i32 ids [I...]: [I..., K] f32. An opaque op.
struct QuantizedGather {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "gather (quantized table)";
  static constexpr bool reports_bad_indices = true;  // sets the program's error flag
  template <class T, class I>
  using value_type = f32;
  template <class Table, class Index>
  using shape = typename Gather::template shape<Table, Index>;

  template <class N, class Runner>
  static void execute(Runner& runner, float* out) {
    using Table = boost::mp11::mp_first<typename N::children>;
    using Index = boost::mp11::mp_second<typename N::children>;
    const index_t* td = runner.template dims_of<Table>();
    const index_t rows = td[0], k = td[1];
    const index_t count = runner.template count_of<Index>();
    const quant_format format = runner.template format_of<Table>();
    const void* table = runner.buffers[Runner::template id_of<Table>()];
    const std::int32_t* ids = runner.template data_of<Index>();
    if (count == 0 || k == 0) return;
    auto& backend = runner.backend;
    if constexpr (requires { backend.dequantize_rows(format, table, rows, k, ids, count, out); }) {
      backend.dequantize_rows(format, table, rows, k, ids, count, out);  // throws run_error for a bad id
    } else {
      backend.parallel_for(count * k, detail::dequantize_rows_body{format, static_cast<const unsigned char*>(table),
                                                                   row_bytes(format, std::size_t(k)), rows, k, ids,
                                                                   out, runner.ctx.error_flag});
    }
  }
};

/// Whether W is a quantized weight whose rows are as long as X's last axis: `linear(x, w)`.
template <class W, class X>
concept quantized_weight_for =
    expression<X> && expression<W> && std::is_same_v<value_t<W>, quantized> && (rank_v<W> == 2) &&
    (rank_v<X> >= 1) && (shape_t<X>::dims[rank_v<X> - 1] == shape_t<W>::dims[1]);

/// `linear(x, w)`: x [..., K] @ w^T for w [N, K], as torch.nn.functional.linear. A quantized
/// w is read in its blocks by an opaque op; an f32 or f64 w is `matmul(x, transpose(w))`.
///     auto y = linear(x, quantized_weight<"fc.weight">(shape<256, 784>));   // [Batch, 256]
template <expression X, quantized_weight_for<X> W>
constexpr auto linear(X, W) {
  static_assert(std::is_same_v<value_t<X>, f32>, "luminal: linear with a quantized weight needs an f32 input");
  return typename node_of<QuantizedLinear, std::remove_cvref_t<X>, std::remove_cvref_t<W>>::type{};
}
template <expression X, expression W>
  requires(!std::is_same_v<value_t<W>, quantized> && rank_v<W> == 2)
constexpr auto linear(X x, W w) {
  return matmul(x, transpose(w));
}
/// Chosen when a quantized weight's rows do not fit the input (above): never defined, its
/// incomplete return type is the error, at the caller's line (errors.hpp).
template <auto X, auto W>
error::linear_needs_rows_as_long_as_the_input_rows<X, W> linear(const shaped<X>&, const shaped<W>&);

/// `gather(table, ids)` for a quantized table [V, K] and i32 ids [I...]: [I..., K] f32, each
/// row dequantized from its blocks. An id outside [0, V) makes run() throw run_error.
template <expression Table, expression Index>
  requires std::is_same_v<value_t<Table>, quantized>
constexpr auto gather(Table, Index) {
  static_assert(rank_v<Table> == 2, "luminal: gather from a quantized table needs a table of rank 2 [rows, row length]");
  if constexpr (!std::is_same_v<typename Index::value_type, i32>)
    (void)error::index_must_be_integer<dtype_text<typename Index::value_type>()>{};
  return typename node_of<QuantizedGather, std::remove_cvref_t<Table>, std::remove_cvref_t<Index>>::type{};
}

}  // namespace luminal
