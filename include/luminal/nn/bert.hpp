// A BERT encoder that runs pretrained Hugging Face weights: word, position and token-type
// embeddings, post-norm layers with exact (erf) GELU, an attention mask for padded
// batches, and sentence-transformers' mean pooling. Parameter names are Hugging Face's
// BertModel names, so a model.safetensors loads as it is.
//
//     auto bert = nn::MiniLM_L6::from_safetensors(dir / "model.safetensors");
//     wordpiece::tokenizer tok(dir / "vocab.txt");             // text/wordpiece.hpp
//     auto batch = nn::pad_batch({tok.encode("A man is eating."), tok.encode("Hi")}, tok.pad_id());
//     xt::xarray<float> e = bert.sentence_embeddings(batch.ids, batch.mask);  // [2, 384], unit rows
//
// Batch and sequence length are symbolic: one compiled program serves every batch. The
// depth is a run-time value read from the weights (the number of "encoder.layer.<i>"
// groups): one layer program is compiled and run once per layer with that layer's
// weights bound in place, so the build does not grow with depth.
#pragma once
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../io/safetensors.hpp"
#include "../runtime/program.hpp"
#include "attention.hpp"

namespace luminal::nn {

/// One BERT layer, post-norm: h = LN(x + attention(x)), out = LN(h + FFN(h)), with Hugging
/// Face's names under Prefix: attention.self.{query,key,value}, attention.output.dense,
/// attention.output.LayerNorm, intermediate.dense, output.dense, output.LayerNorm.
/// `keep` is true where a key position is a token (not padding), broadcastable to the
/// scores [batch, heads, seq, seq], e.g. [batch, 1, 1, seq].
template <fixed_string Prefix, std::int64_t D, std::int64_t Heads, std::int64_t Intermediate, double Eps = 1e-12,
          element_type T = f32>
struct BertLayer {
  static_assert(Heads >= 1 && D % Heads == 0, "luminal: BertLayer needs D divisible by Heads");
  static constexpr std::int64_t head_width = D / Heads;
  Linear<Prefix + ".attention.self.query", D, D, true, T> query;
  Linear<Prefix + ".attention.self.key", D, D, true, T> key;
  Linear<Prefix + ".attention.self.value", D, D, true, T> value;
  Linear<Prefix + ".attention.output.dense", D, D, true, T> attention_out;
  LayerNorm<Prefix + ".attention.output.LayerNorm", D, Eps, T> attention_norm;
  Linear<Prefix + ".intermediate.dense", D, Intermediate, true, T> intermediate;
  Linear<Prefix + ".output.dense", Intermediate, D, true, T> output;
  LayerNorm<Prefix + ".output.LayerNorm", D, Eps, T> output_norm;

  template <expression X, expression Keep>
  constexpr auto operator()(X x, Keep keep) const {
    if constexpr (!detail::sequence_input<X, D>("BertLayer")) {
      return x;
    } else {
      using S = shape_t<X>;
      constexpr Dim batch = S::dims[0], seq = S::dims[1];
      using Split = CausalSelfAttention<Prefix, D, Heads, T>;
      auto q = Split::template split_heads<batch, seq>(query(x));
      auto k = Split::template split_heads<batch, seq>(key(x));
      auto v = Split::template split_heads<batch, seq>(value(x));
      constexpr double scale = 1.0 / detail::constant_sqrt(double(head_width));
      // Masked keys get -1e30 rather than -inf, so a row of only padding stays finite.
      auto scores = where(keep, matmul(q, transpose(k)) * c<scale>, c<-1e30>);
      auto merged = reshape(permute<0, 2, 1, 3>(matmul(softmax<-1>(scores), v)), shape<batch, seq, D>);
      auto h = attention_norm(x + attention_out(merged));
      return output_norm(h + output(gelu(intermediate(h))));
    }
  }
};

/// BERT's embeddings under Prefix: word_embeddings [Vocab, D], position_embeddings
/// [MaxPositions, D], token_type_embeddings [TypeVocab, D], summed and layer-normalized
/// (LayerNorm). Token ids and token types are i32 [batch, seq].
template <fixed_string Prefix, std::int64_t Vocab, std::int64_t D, std::int64_t MaxPositions, std::int64_t TypeVocab,
          double Eps = 1e-12, element_type T = f32>
struct BertEmbeddings {
  Embedding<Prefix + ".word_embeddings", Vocab, D, T> word;
  Embedding<Prefix + ".position_embeddings", MaxPositions, D, T> position;
  Embedding<Prefix + ".token_type_embeddings", TypeVocab, D, T> token_type;
  LayerNorm<Prefix + ".LayerNorm", D, Eps, T> norm;

  template <expression Ids, expression Types>
  constexpr auto operator()(Ids ids, Types types) const {
    constexpr Dim seq = shape_t<Ids>::dims[1];
    return norm(word(ids) + position(iota<0, i32>(shape<seq>)) + token_type(types));
  }
};

/// The mean of h [batch, seq, D] over the positions where mask [batch, seq] is 1,
/// L2-normalized: sentence-transformers' Pooling(mean) followed by Normalize.
template <expression H, expression M>
constexpr auto masked_mean_normalized(H h, M mask) {
  using S = shape_t<H>;
  auto weight = cast<value_t<H>>(reshape(mask, shape<S::dims[0], S::dims[1], 1>));
  auto pooled = sum<1>(h * weight) / sum<1>(weight);
  return pooled * rsqrt(max(sum<-1>(pooled * pooled, keepdim), c<1e-24>));  // F.normalize's eps 1e-12, squared
}

/// Token ids padded into one batch: ids and mask are i32 [batch, longest], mask 1 on
/// tokens and 0 on padding (Hugging Face's input_ids and attention_mask).
struct padded_batch {
  xt::xarray<int> ids, mask;
};

/// Pads the sequences to the longest with `pad_id`. An empty list or an empty sequence
/// is refused: every row must hold at least one token to be pooled.
inline padded_batch pad_batch(const std::vector<std::vector<std::int32_t>>& sequences, std::int32_t pad_id) {
  if (sequences.empty()) throw input_error("luminal: pad_batch: there are no sequences to batch");
  std::size_t longest = 0;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i].empty()) throw input_error("luminal: pad_batch: sequence " + std::to_string(i) + " is empty");
    longest = std::max(longest, sequences[i].size());
  }
  padded_batch out{xt::xarray<int>::from_shape({sequences.size(), longest}),
                   xt::xarray<int>::from_shape({sequences.size(), longest})};
  for (std::size_t i = 0; i < sequences.size(); ++i)
    for (std::size_t j = 0; j < longest; ++j) {
      const bool token = j < sequences[i].size();
      out.ids(i, j) = token ? sequences[i][j] : pad_id;
      out.mask(i, j) = token ? 1 : 0;
    }
  return out;
}

/// A BERT encoder with fixed widths and a depth read from its weights, on backend B.
/// Construct it from a tensor_store (or a safetensors file) holding Hugging Face's
/// BertModel names: "embeddings.*" and "encoder.layer.<i>.*" for i = 0 .. depth - 1.
/// Every tensor the model reads is checked once, at construction: a missing, misnamed or
/// wrongly shaped tensor is refused naming it and both shapes. Other tensors (a pooler,
/// position_ids) are ignored.
template <class Encoder>
class BertTape;  // bert_tape.hpp: the same encoder as tape blocks, for fine-tuning

template <std::int64_t Vocab, std::int64_t Width, std::int64_t Heads, std::int64_t Intermediate,
          std::int64_t MaxPositions, std::int64_t TypeVocab = 2, class B = host>
class BertEncoder {
 public:
  using backend_type = B;
  static constexpr Dim batch{"Batch"}, seq{"Seq"};
  static constexpr std::int64_t vocab = Vocab, width = Width, heads = Heads, max_positions = MaxPositions;

 private:
  template <class Encoder>
  friend class BertTape;
  static constexpr auto ids = input<"input_ids", i32>(shape<batch, seq>);
  static constexpr auto types = input<"token_type_ids", i32>(shape<batch, seq>);
  static constexpr auto mask = input<"attention_mask", i32>(shape<batch, seq>);
  static constexpr auto hidden = input<"hidden", f32>(shape<batch, seq, Width>);
  static constexpr BertEmbeddings<"embeddings", Vocab, Width, MaxPositions, TypeVocab> embeddings{};
  static constexpr BertLayer<"layer", Width, Heads, Intermediate> layer{};
  static constexpr auto keep = reshape(less_than(c<0>, mask), shape<batch, 1, 1, seq>);

  static auto make_embed() { return compile<B>(embeddings(ids, types)); }
  static auto make_layer() { return compile<B>(layer(hidden, keep)); }
  static auto make_pool() { return compile<B>(masked_mean_normalized(hidden, mask)); }
  using embed_program = decltype(make_embed());
  using layer_program = decltype(make_layer());
  using pool_program = decltype(make_pool());

 public:
  explicit BertEncoder(tensor_store weights, B backend = {})
      : weights_(std::move(weights)), backend_(backend), embed_(backend), layer_(backend), pool_(backend) {
    while (weights_.contains(layer_prefix(depth_) + ".attention.self.query.weight")) ++depth_;
    if (depth_ == 0)
      throw input_error("luminal: BertEncoder: the weights have no 'encoder.layer.0.*' tensors (" +
                        std::to_string(weights_.size()) +
                        " tensors); is this a BERT checkpoint with Hugging Face's BertModel names?");
    check_weights(embed_, [](std::string_view name) { return std::string(name); });
    for (int i = 0; i < depth_; ++i) check_weights(layer_, [&](std::string_view leaf) { return layer_weight(i, leaf); });
  }
  BertEncoder(const BertEncoder&) = delete;
  BertEncoder& operator=(const BertEncoder&) = delete;
  ~BertEncoder() { release(); }

  /// Loads a model.safetensors (load_safetensors: every corruption refused with a message).
  /// Reads the header first: the depth follows from the layers' names, and every tensor
  /// the model needs is checked for name, type and shape before any data is read; other
  /// tensors (a pooler, anything else the file holds) are never read.
  static BertEncoder from_safetensors(const std::filesystem::path& file, B backend = {}) {
    const safetensors_header header = read_safetensors_header(file.string());
    int depth = 0;
    auto has = [&](const std::string& name) {
      return std::any_of(header.tensors.begin(), header.tensors.end(), [&](const tensor_spec& t) { return t.name == name; });
    };
    while (has(layer_prefix(depth) + ".attention.self.query.weight")) ++depth;
    if (depth == 0)
      throw input_error("luminal: BertEncoder: " + file.string() + " has no 'encoder.layer.0.*' tensors (" +
                        std::to_string(header.tensors.size()) +
                        " tensors); is this a BERT checkpoint with Hugging Face's BertModel names?");
    return BertEncoder(load_safetensors(file.string(), expected_tensors(depth), other_tensors::skip), backend);
  }

  /// The tensors a model of `depth` layers reads, with their types and shapes.
  static std::vector<tensor_spec> expected_tensors(int depth) {
    std::vector<tensor_spec> specs;
    add_specs<embed_program>(specs, [](std::string_view name) { return std::string(name); });
    for (int i = 0; i < depth; ++i)
      add_specs<layer_program>(specs, [&](std::string_view leaf) { return layer_weight(i, leaf); });
    return specs;
  }

  int depth() const { return depth_; }
  /// The parameters, by Hugging Face's names. Fine-tuning (bert_tape.hpp) updates them in
  /// place; keep each tensor's shape and element type.
  const tensor_store& weights() const { return weights_; }
  tensor_store& weights() { return weights_; }

  /// The last layer's hidden states, [batch, seq, Width], for token ids and a 0/1 mask,
  /// both i32 [batch, seq]; all token types 0 unless `token_types` is given.
  xt::xarray<float> last_hidden_state(const xt::xarray<int>& token_ids, const xt::xarray<int>& attention_mask,
                                      const xt::xarray<int>& token_types = {}) {
    const float* h = encode(token_ids, attention_mask, token_types);
    xt::xarray<float> out = xt::xarray<float>::from_shape({token_ids.shape()[0], token_ids.shape()[1], std::size_t(Width)});
    backend_.to_host(out.data(), h, out.size() * sizeof(float));
    return out;
  }

  /// sentence-transformers' embedding: the mean of the last hidden states over the tokens
  /// (mask 1), L2-normalized; [batch, Width].
  xt::xarray<float> sentence_embeddings(const xt::xarray<int>& token_ids, const xt::xarray<int>& attention_mask,
                                        const xt::xarray<int>& token_types = {}) {
    const float* h = encode(token_ids, attention_mask, token_types);
    pool_.bind_device("hidden", h, extents(token_ids, Width));
    pool_.bind("attention_mask", attention_mask);
    pool_.run();
    return pool_.output();
  }

 private:
  /// Where layer i's weights are stored: "encoder.layer.<i>" (also the prefix BertTape
  /// calls the layer block with).
  static std::string layer_prefix(int i) { return "encoder.layer." + std::to_string(i); }
  /// The stored name of the layer program's leaf "layer.<rest>" for layer i.
  static std::string layer_weight(int i, std::string_view leaf) {
    return layer_prefix(i) + std::string(leaf.substr(std::string_view("layer").size()));
  }
  static std::vector<index_t> extents(const xt::xarray<int>& token_ids, std::int64_t last) {
    return {index_t(token_ids.shape()[0]), index_t(token_ids.shape()[1]), index_t(last)};
  }

  template <class Program, class Rename>
  static void add_specs(std::vector<tensor_spec>& specs, Rename stored_name) {
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      if constexpr (L::role == leaf_role::parameter) {
        const auto static_extents = detail::extents_of(shape_t<L>{});
        specs.push_back({stored_name(L::name.view()), dtype_of<value_t<L>>(),
                         std::vector<index_t>(static_extents.begin(), static_extents.end()), true});
      }
    });
  }

  /// Every parameter leaf of `prog`, looked up as stored_name(leaf name), must be in the
  /// weights with the leaf's element type and shape.
  template <class Program, class Rename>
  void check_weights(Program&, Rename stored_name) const {
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      if constexpr (L::role == leaf_role::parameter) {
        const std::string name = stored_name(L::name.view());
        const auto static_extents = detail::extents_of(shape_t<L>{});
        const std::vector<index_t> expected(static_extents.begin(), static_extents.end());
        using luminal::detail::safetensors::format_shape;
        if (!weights_.contains(name))
          throw input_error("luminal: BertEncoder: the weights have no tensor '" + name + "' (the model needs " +
                            std::string(dtype_name<value_t<L>>()) + " " + format_shape(expected) + ")");
        const auto& e = weights_.at(name);
        if (e.dtype != dtype_of<value_t<L>>())
          throw input_error("luminal: BertEncoder: tensor '" + name + "' holds " + std::string(dtype_name(e.dtype)) +
                            ", but the model needs " + std::string(dtype_name<value_t<L>>()));
        if (e.shape != expected)
          throw input_error("luminal: BertEncoder: tensor '" + name + "' has shape " + format_shape(e.shape) +
                            ", but the model needs " + format_shape(expected));
      }
    });
  }

  /// Binds the parameter leaves of `prog` from the weights, in place where B can read
  /// host memory.
  template <class Program, class Rename>
  void bind_weights(Program& prog, Rename stored_name) const {
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      if constexpr (L::role == leaf_role::parameter) {
        const auto& e = weights_.at(stored_name(L::name.view()));
        const auto* data = reinterpret_cast<const value_t<L>*>(e.data.data());
        if constexpr (B::host_accessible) prog.bind_view(L::name.view(), data, std::span<const index_t>(e.shape));
        else prog.bind(L::name.view(), data, std::span<const index_t>(e.shape));
      }
    });
  }

  /// Token types are optional: a default-constructed (0-d) array means all 0.
  static bool given(const xt::xarray<int>& token_types) { return token_types.dimension() != 0; }

  static void check_batch(const xt::xarray<int>& token_ids, const xt::xarray<int>& attention_mask,
                          const xt::xarray<int>& token_types) {
    if (token_ids.dimension() != 2)
      throw input_error("luminal: BertEncoder: token ids must be [batch, seq], not of rank " +
                        std::to_string(token_ids.dimension()));
    if (attention_mask.shape() != token_ids.shape())
      throw input_error("luminal: BertEncoder: the attention mask must have the token ids' shape [batch, seq]");
    if (given(token_types) && token_types.shape() != token_ids.shape())
      throw input_error("luminal: BertEncoder: the token types must have the token ids' shape [batch, seq]");
    const std::size_t rows = token_ids.shape()[0], length = token_ids.shape()[1];
    if (rows == 0 || length == 0) throw input_error("luminal: BertEncoder: the batch is empty");
    if (std::int64_t(length) > MaxPositions)
      throw input_error("luminal: BertEncoder: a sequence of " + std::to_string(length) +
                        " tokens is longer than the model's " + std::to_string(MaxPositions) + " positions");
    for (std::size_t i = 0; i < rows; ++i) {
      int tokens = 0;
      for (std::size_t j = 0; j < length; ++j) {
        const int m = attention_mask(i, j);
        if (m != 0 && m != 1)
          throw input_error("luminal: BertEncoder: the attention mask holds " + std::to_string(m) + " at [" +
                            std::to_string(i) + ", " + std::to_string(j) + "]; it must be 0 or 1");
        tokens += m;
      }
      if (tokens == 0)
        throw input_error("luminal: BertEncoder: row " + std::to_string(i) + " of the attention mask has no token");
    }
  }

  /// Runs the embeddings and every layer; returns the last hidden states in B's memory.
  const float* encode(const xt::xarray<int>& token_ids, const xt::xarray<int>& attention_mask,
                      const xt::xarray<int>& token_types) {
    check_batch(token_ids, attention_mask, token_types);
    bind_weights(embed_, [](std::string_view name) { return std::string(name); });
    embed_.bind("input_ids", token_ids);
    if (given(token_types)) embed_.bind("token_type_ids", token_types);
    else embed_.bind("token_type_ids", xt::xarray<int>(xt::zeros<int>(token_ids.shape())));
    embed_.run();

    // The layer program reads one buffer and writes the other, alternating.
    const std::size_t bytes = token_ids.size() * std::size_t(Width) * sizeof(float);
    if (bytes > buffer_bytes_) {
      release();
      for (float*& b : buffers_) b = static_cast<float*>(backend_.allocate(bytes));
      buffer_bytes_ = bytes;
    }
    layer_.bind("attention_mask", attention_mask);
    const float* in = embed_.output_data();
    for (int i = 0; i < depth_; ++i) {
      float* out = buffers_[i % 2];
      bind_weights(layer_, [&](std::string_view leaf) { return layer_weight(i, leaf); });
      layer_.bind_device("hidden", in, extents(token_ids, Width));
      layer_.template write_output_to<0>(out);
      layer_.run();
      in = out;
    }
    return in;
  }

  void release() {
    for (float*& b : buffers_)
      if (b) backend_.deallocate(std::exchange(b, nullptr));
    buffer_bytes_ = 0;
  }

  tensor_store weights_;
  B backend_;
  int depth_ = 0;
  embed_program embed_;
  layer_program layer_;
  pool_program pool_;
  float* buffers_[2] = {nullptr, nullptr};
  std::size_t buffer_bytes_ = 0;
};

/// sentence-transformers/all-MiniLM-L6-v2 (and any BERT of its widths): vocabulary 30522,
/// hidden 384, 12 heads, intermediate 1536, 512 positions; 6 layers in its weights.
template <class B = host>
using MiniLM = BertEncoder<30522, 384, 12, 1536, 512, 2, B>;
using MiniLM_L6 = MiniLM<>;

}  // namespace luminal::nn
