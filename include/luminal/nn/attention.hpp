// Transformer pieces: causal multi-head self-attention, learned position embeddings, the
// GELU MLP and the pre-norm residual block, as in GPT-2 (parameter names: attn.q / attn.k /
// attn.v / attn.proj, mlp.fc / mlp.proj, ln1 / ln2).
//
//     constexpr Dim Batch{"Batch"}, Seq{"Seq"};
//     auto x = input<"x", f32>(shape<Batch, Seq, 256>);
//     nn::TransformerBlock<"h.0", 256, 4> block;        // 256 wide, 4 heads of 64
//     auto y = block(x);                                // Shape<Batch, Seq, 256>
//     tensor_store store;
//     block.initialize(store, 7);
//
// Inputs are [batch, sequence, width]; both leading extents may be symbolic. Position p
// attends to positions 0..p: the mask is computed from iota, never stored.
#pragma once
#include <cmath>

#include "activation.hpp"
#include "linear.hpp"
#include "norm.hpp"

namespace luminal::nn {

namespace detail {
/// A module's check that x is [batch, sequence, D].
template <class X, std::int64_t D>
constexpr bool sequence_input(const char* module_name) {
  using S = shape_t<X>;
  if constexpr (S::rank != 3) {
    (void)error::module_input_rank<op_text("a sequence module"), S::text, 3>{};
    return false;
  } else if constexpr (!(S::dims[2] == Dim{D})) {
    (void)error::module_input_extent<op_text("a sequence module"), S::text, 2, D>{};
    return false;
  }
  (void)module_name;
  return true;
}

/// sqrt(x) for x > 0 at compile time, by Newton's method (std::sqrt is constexpr in GCC
/// but not in nvcc's front end).
consteval double constant_sqrt(double x) {
  double root = x > 1 ? x : 1.0;
  for (int i = 0; i < 100; ++i) {
    double next = 0.5 * (root + x / root);
    if (next == root) break;
    root = next;
  }
  return root;
}
}  // namespace detail

/// True where key position <= query position, for scores [..., Seq, Seq] (query rows, key
/// columns): what a decoder may attend to. Masked scores take a large negative value
/// before the softmax, so that they get no weight:
///
///     auto scores = matmul(q, transpose(k)) * c<0.125>;               // [Batch, Heads, Seq, Seq]
///     auto weights = softmax<-1>(where(nn::causal_mask<Seq>(), scores, c<-1e30>));
template <Dim SeqDim>
constexpr auto causal_mask() {
  return less_than(iota<1, i32>(shape<SeqDim, SeqDim>), iota<0, i32>(shape<SeqDim, SeqDim>) + c<1>);
}

/// Multi-head causal self-attention over [batch, seq, D] with Heads heads of D / Heads:
/// Linears to q, k and v ("<prefix>.q", ".k", ".v", each [D, D]), softmax(q k^T /
/// sqrt(D / Heads)) over earlier positions, and an output Linear ("<prefix>.proj").
/// (Three Linears rather than one packed [3D, D]: the packed one's input gradient is
/// assembled from three padded slices, an extra pass over 3D values per position.)
template <fixed_string Prefix, std::int64_t D, std::int64_t Heads, element_type T = f32>
struct CausalSelfAttention {
  static_assert(Heads >= 1 && D % Heads == 0, "luminal: CausalSelfAttention needs D divisible by Heads");
  static constexpr std::int64_t head_width = D / Heads;
  Linear<Prefix + ".q", D, D, true, T> query;
  Linear<Prefix + ".k", D, D, true, T> key;
  Linear<Prefix + ".v", D, D, true, T> value;
  Linear<Prefix + ".proj", D, D, true, T> proj;
  static constexpr auto parameters = std::tuple_cat(decltype(query)::parameters, decltype(key)::parameters,
                                                    decltype(value)::parameters, decltype(proj)::parameters);

  /// [batch, seq, D] -> [batch, heads, seq, head_width]. (A member, not a lambda: nvcc
  /// does not let a lambda name the enclosing function's constexpr locals.)
  template <Dim Batch, Dim Seq, expression X>
  static constexpr auto split_heads(X part) {
    return permute<0, 2, 1, 3>(reshape(part, shape<Batch, Seq, Heads, head_width>));
  }

  template <expression X>
  constexpr auto operator()(X x) const {
    if constexpr (!detail::sequence_input<X, D>("CausalSelfAttention")) {
      return x;
    } else {
      using S = shape_t<X>;
      constexpr Dim batch = S::dims[0], seq = S::dims[1];
      auto q = split_heads<batch, seq>(query(x));
      auto k = split_heads<batch, seq>(key(x));
      auto v = split_heads<batch, seq>(value(x));
      constexpr double scale = 1.0 / detail::constant_sqrt(double(head_width));
      auto scores = where(causal_mask<seq>(), matmul(q, transpose(k)) * c<scale>, c<-1e30>);
      auto merged = reshape(permute<0, 2, 1, 3>(matmul(softmax<-1>(scores), v)), shape<batch, seq, D>);
      return proj(merged);
    }
  }

  void initialize(tensor_store& store, std::uint64_t seed) const {
    query.initialize(store, seed);
    key.initialize(store, seed);
    value.initialize(store, seed);
    proj.initialize(store, seed);
  }
};

/// Learned absolute positions, as GPT-2's wpe: weight [MaxSeq, D], N(0, 1) like
/// torch.nn.Embedding; adds row p to position p of a [batch, seq, D] input. A sequence
/// longer than MaxSeq makes run() throw (the gather's range check).
template <fixed_string Prefix, std::int64_t MaxSeq, std::int64_t D, element_type T = f32>
struct PositionEmbedding {
  Embedding<Prefix, MaxSeq, D, T> table;
  static constexpr auto parameters = decltype(table)::parameters;

  template <expression X>
  constexpr auto operator()(X x) const {
    if constexpr (!detail::sequence_input<X, D>("PositionEmbedding")) {
      return x;
    } else {
      constexpr Dim seq = shape_t<X>::dims[1];
      return x + table(iota<0, i32>(shape<seq>));
    }
  }
  void initialize(tensor_store& store, std::uint64_t seed) const { table.initialize(store, seed); }
};

/// Linear(D, Hidden) -> GELU (tanh form) -> Linear(Hidden, D): "<prefix>.fc", "<prefix>.proj".
template <fixed_string Prefix, std::int64_t D, std::int64_t Hidden = 4 * D, element_type T = f32>
struct MLP {
  Linear<Prefix + ".fc", D, Hidden, true, T> fc;
  Linear<Prefix + ".proj", Hidden, D, true, T> proj;
  static constexpr auto parameters = std::tuple_cat(decltype(fc)::parameters, decltype(proj)::parameters);

  template <expression X>
  constexpr auto operator()(X x) const { return proj(gelu(fc(x), approximate::tanh)); }
  void initialize(tensor_store& store, std::uint64_t seed) const {
    fc.initialize(store, seed);
    proj.initialize(store, seed);
  }
};

/// The pre-norm residual block of GPT-2: x + attn(ln1(x)), then + mlp(ln2(.)).
template <fixed_string Prefix, std::int64_t D, std::int64_t Heads, element_type T = f32>
struct TransformerBlock {
  LayerNorm<Prefix + ".ln1", D, 1e-5, T> ln1;
  CausalSelfAttention<Prefix + ".attn", D, Heads, T> attn;
  LayerNorm<Prefix + ".ln2", D, 1e-5, T> ln2;
  MLP<Prefix + ".mlp", D, 4 * D, T> mlp;
  static constexpr auto parameters = std::tuple_cat(decltype(ln1)::parameters, decltype(attn)::parameters,
                                                    decltype(ln2)::parameters, decltype(mlp)::parameters);

  template <expression X>
  constexpr auto operator()(X x) const {
    auto h = x + attn(ln1(x));
    return h + mlp(ln2(h));
  }
  void initialize(tensor_store& store, std::uint64_t seed) const {
    ln1.initialize(store, seed);
    attn.initialize(store, seed);
    ln2.initialize(store, seed);
    mlp.initialize(store, seed);
  }
};

}  // namespace luminal::nn
