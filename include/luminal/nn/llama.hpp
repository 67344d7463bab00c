// A Llama-class decoder (Llama 2/3, SmolLM2, TinyLlama, ...) run from a GGUF file or a
// Hugging Face checkpoint folder (config.json and safetensors in F32, F16 or BF16;
// nn/llama_hf.hpp): the weights stay in their blocks in the file's memory map, and a
// key/value cache grows in place as tokens are added.
//
//     nn::llama<> model("SmolLM2-135M-Instruct.Q4_1.gguf");     // or the folder "SmolLM2-135M-Instruct"
//     std::vector<std::int32_t> prompt = ...;                   // token ids (nn/llama_tokenizer.hpp)
//     std::span<const float> logits = model.forward(prompt);    // [vocab]: after the last token
//     logits = model.forward(std::array{next_id});              // one more token, from the cache
//
// Three programs, compiled once for every Llama size (their extents are symbols bound at
// run time: one binary runs any file): the embedding lookup, one decoder layer, and the
// head (final norm and the output projection, the embedding table when the file ties
// them). The layer program runs once per layer with that layer's weights bound in place.
// It takes S new positions and the P cached ones: a prompt is one run per layer with
// S = its length (prefill), each generated token one run with S = 1 (decode). Its keys and
// values are outputs written straight into the cache at rows P .. P + S - 1, and the
// attention reads the past rows where they lie (ops/cached_attention.hpp).
//
// The layer, as Hugging Face's LlamaDecoderLayer (RoPE on pairs as GGUF lays out the query
// and key weights: rope_pairs::interleaved):
//     h = x + o(attention(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))
//     y = h + down(silu(gate(n2(h))) * up(n2(h)))          n = RMSNorm
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "../core/quant_blocks.hpp"
#include "../ops/all.hpp"
#include "../runtime/program.hpp"
#include "llama_hf.hpp"
#include "llama_weights.hpp"

namespace luminal::nn {

/// The graph of the three programs, with symbolic extents.
namespace llama_graph {
inline constexpr Dim Seq{"Seq"}, Past{"Past"}, Width{"Width"}, Heads{"Heads"}, KVHeads{"KVHeads"},
    RopeHalf{"RopeHalf"}, Hidden{"Hidden"}, Vocab{"Vocab"};
inline constexpr Dim HeadDim = 2 * RopeHalf;

/// RMSNorm over the last axis with the runtime epsilon "rms_eps" and the weight `Name`.
template <fixed_string Name, expression X>
constexpr auto rms_norm(X x) {
  auto eps = input<"rms_eps", f32>(shape<>);
  return x * rsqrt(mean<-1>(x * x, keepdim) + eps) * input<Name, f32>(shape<Width>);
}

/// token ids [Seq] -> embeddings [Seq, Width].
constexpr auto embedding() {
  return gather(quantized_weight<"token_embd.weight">(shape<Vocab, Width>), input<"tokens", i32>(shape<Seq>));
}

/// One decoder layer: (x [Seq, Width], the cache [Past, KVHeads, HeadDim] twice, the
/// cosines and sines of the new positions' RoPE angles [Seq, RopeHalf]) -> (the layer's
/// output, the new keys after RoPE and the new values [Seq, KVHeads, HeadDim]).
constexpr auto layer() {
  auto x = input<"x", f32>(shape<Seq, Width>);
  // The rotations of the new positions: computed once per forward() for every layer.
  auto cos_t = input<"rope.cos", f32>(shape<Seq, RopeHalf>);
  auto sin_t = input<"rope.sin", f32>(shape<Seq, RopeHalf>);
  auto h = rms_norm<"layer.attn_norm.weight">(x);
  auto q = rope<rope_pairs::interleaved>(
      reshape(linear(h, quantized_weight<"layer.attn_q.weight">(shape<Heads * HeadDim, Width>)), shape<Seq, Heads, HeadDim>),
      cos_t, sin_t);
  auto k = rope<rope_pairs::interleaved>(
      reshape(linear(h, quantized_weight<"layer.attn_k.weight">(shape<KVHeads * HeadDim, Width>)),
              shape<Seq, KVHeads, HeadDim>),
      cos_t, sin_t);
  auto v = reshape(linear(h, quantized_weight<"layer.attn_v.weight">(shape<KVHeads * HeadDim, Width>)),
                   shape<Seq, KVHeads, HeadDim>);
  auto attended = cached_attention(q, input<"k_past", f32>(shape<Past, KVHeads, HeadDim>),
                                   input<"v_past", f32>(shape<Past, KVHeads, HeadDim>), k, v);
  auto mixed = x + linear(reshape(attended, shape<Seq, Heads * HeadDim>),
                          quantized_weight<"layer.attn_output.weight">(shape<Width, Heads * HeadDim>));
  auto n2 = rms_norm<"layer.ffn_norm.weight">(mixed);
  auto gate = linear(n2, quantized_weight<"layer.ffn_gate.weight">(shape<Hidden, Width>));
  auto up = linear(n2, quantized_weight<"layer.ffn_up.weight">(shape<Hidden, Width>));
  auto down = linear(silu(gate) * up, quantized_weight<"layer.ffn_down.weight">(shape<Width, Hidden>));
  return std::make_tuple(mixed + down, k, v);
}

/// The final norm and the output projection: [Seq, Width] -> logits [Seq, Vocab].
constexpr auto head() {
  return linear(rms_norm<"output_norm.weight">(input<"x", f32>(shape<Seq, Width>)),
                quantized_weight<"output.weight">(shape<Vocab, Width>));
}

template <class B>
using embedding_program = decltype(compile<B>(embedding()));
template <class B, class Outputs>
struct program_of_outputs;
template <class B, class... Outputs>
struct program_of_outputs<B, std::tuple<Outputs...>> {
  using type = program<B, retention_policy::store_all, Outputs...>;
};
template <class B>
using layer_program = typename program_of_outputs<B, decltype(layer())>::type;
template <class B>
using head_program = decltype(compile<B>(head()));
}  // namespace llama_graph

/// A Llama model from a GGUF file or a Hugging Face folder on backend B, with its key/value
/// cache: feed it tokens, get logits. Move-only. The weights are read in place from the
/// file's memory map on a backend that reads host memory, and copied to the device once
/// otherwise.
template <class B>
class llama {
 public:
  /// Opens `path` and checks it (llama_error, gguf_error or checkpoint_error naming what is
  /// wrong): a folder, config.json or .safetensors path is a Hugging Face checkpoint, any
  /// other a GGUF file (open_llama_weights). The cache holds `context` positions (0: the
  /// model's context length), allocated as it is used.
  explicit llama(const std::string& path, std::int64_t context = 0, B backend = {})
      : llama(open_llama_weights(path), context, std::move(backend)) {}
  /// Runs the model of `weights` (a source of nn/llama_weights.hpp).
  explicit llama(std::unique_ptr<llama_weights> weights, std::int64_t context = 0, B backend = {})
      : weights_(std::move(weights)), config_(weights_->config()), backend_(std::move(backend)),
        embedding_(backend_), layer_(backend_), head_(backend_) {
    context_ = context > 0 ? context : config_.context;
    if (context_ <= 0)
      fail("has no context length (llama.context_length or max_position_embeddings) and none was given");
    const std::int64_t half = config_.head_dim / 2;
    inv_freq_.resize(std::size_t(half));
    // As Hugging Face: 1 / base^(2i / d), in f32.
    for (std::int64_t i = 0; i < half; ++i)
      inv_freq_[std::size_t(i)] = 1.0f / std::pow(config_.rope_base, float(2 * i) / float(config_.head_dim));
    eps_ = config_.rms_eps;
    bind_f32(layer_, "rms_eps", &eps_, {});
    bind_f32(head_, "rms_eps", &eps_, {});
    bind_weight(embedding_, "token_embd.weight", "token_embd.weight");
    bind_weight(head_, "output.weight", config_.tied_output ? "token_embd.weight" : "output.weight");
    bind_norm(head_, "output_norm.weight", "output_norm.weight");
    layers_.resize(std::size_t(config_.layers));
    for (std::int64_t i = 0; i < config_.layers; ++i) {
      const std::string prefix = "blk." + std::to_string(i) + ".";
      layer_weights& w = layers_[std::size_t(i)];
      for (std::size_t k = 0; k < w.matrices.size(); ++k) w.matrices[k] = weight(prefix + matrix_names[k]);
      w.attn_norm = norm(prefix + "attn_norm.weight");
      w.ffn_norm = norm(prefix + "ffn_norm.weight");
    }
  }
  llama(llama&&) = default;
  llama& operator=(llama&&) = default;
  ~llama() { release(); }

  const llama_config& config() const { return config_; }
  const llama_weights& weights() const { return *weights_; }
  /// The GGUF file (its tokenizer and chat template); throws llama_error for a model read
  /// from Hugging Face safetensors, which has none.
  const gguf_file& file() const {
    if (const gguf_file* f = weights_->gguf()) return *f;
    fail("is a Hugging Face checkpoint, not a GGUF file: it has no GGUF metadata, so no tokenizer or chat template "
         "(luminal does not read tokenizer.json)");
  }
  /// Positions in the cache: the tokens fed since construction or reset().
  std::int64_t position() const { return position_; }
  std::int64_t context() const { return context_; }
  /// Forgets the cache: the next token is at position 0.
  void reset() { position_ = 0; }
  /// Forgets the cache from `position` on (a chat that rewinds, a prompt shared by runs).
  void truncate(std::int64_t position) {
    if (position < 0 || position > position_)
      throw llama_error("luminal: llama: cannot truncate the cache of " + std::to_string(position_) +
                        " positions to " + std::to_string(position));
    position_ = position;
  }

  /// Times every kernel of the following forward() calls (or stops timing): see profile().
  void set_profiling(bool on) {
    embedding_.set_profiling(on);
    layer_.set_profiling(on);
    head_.set_profiling(on);
    profiled_calls_ = 0;
  }
  /// The kernels' mean times per forward() call since set_profiling(true), slowest first:
  /// the embedding lookup, the layer program's kernels summed over the layers, the head.
  std::string profile() const {
    std::vector<std::pair<double, std::string>> rows;
    auto add = [&](const auto& program, std::string_view prefix) {
      const double runs_per_call = profiled_calls_ ? double(program.profiled_runs()) / double(profiled_calls_) : 0.0;
      for (auto [ms, label] : program.profile_rows(prefix)) rows.emplace_back(ms * runs_per_call, std::move(label));
    };
    add(embedding_, "embedding ");
    add(layer_, "layers ");
    add(head_, "head ");
    return luminal::detail::profile_report(std::move(rows), profiled_calls_);
  }

  /// Runs `tokens` at the next positions of the cache and returns the logits after the
  /// last of them ([vocab]), or after each of them ([tokens, vocab], row-major) when `all`.
  /// Valid until the next call. Throws llama_error when the tokens would pass the context
  /// or an id is outside the vocabulary (the cache is then unchanged).
  std::span<const float> forward(std::span<const std::int32_t> tokens, bool all = false) {
    const std::int64_t s = std::int64_t(tokens.size());
    if (s == 0) throw llama_error("luminal: llama: forward() needs at least one token");
    if (position_ + s > context_)
      throw llama_error("luminal: llama: " + std::to_string(position_) + " cached and " + std::to_string(s) +
                        " new positions exceed the context of " + std::to_string(context_));
    for (std::int32_t id : tokens)
      if (id < 0 || id >= config_.vocab)
        throw llama_error("luminal: llama: token id " + std::to_string(id) + " is outside the vocabulary of " +
                          std::to_string(config_.vocab));
    // A long prompt runs in batches: activations stay bounded whatever its length.
    if (s > max_batch) {
      std::vector<float> rows;
      for (std::int64_t begin = 0; begin < s; begin += max_batch) {
        const std::int64_t count = std::min(max_batch, s - begin);
        std::span<const float> part = run(tokens.subspan(std::size_t(begin), std::size_t(count)), all);
        if (all) rows.insert(rows.end(), part.begin(), part.end());
        else if (begin + count == s) rows.assign(part.begin(), part.end());
      }
      logits_ = std::move(rows);
      return logits_;
    }
    return run(tokens, all);
  }

  /// Positions a prompt runs at once; a longer one runs in batches of this many.
  static constexpr std::int64_t max_batch = 512;

 private:
  /// forward() for at most max_batch tokens, checked.
  std::span<const float> run(std::span<const std::int32_t> tokens, bool all) {
    const std::int64_t s = std::int64_t(tokens.size());
    reserve(s);
    const std::int64_t w = config_.width, kv = config_.kv_heads * config_.head_dim;
    embedding_.bind("tokens", tokens.data(), {s});
    embedding_.template write_output_to<0>(activations_[0]);
    embedding_.run();
    // RoPE's angles as Hugging Face computes them: position * inv_freq in f32.
    const std::int64_t half = config_.head_dim / 2;
    rope_cos_.resize(std::size_t(s * half));
    rope_sin_.resize(std::size_t(s * half));
    for (std::int64_t i = 0; i < s; ++i)
      for (std::int64_t j = 0; j < half; ++j) {
        const float angle = float(position_ + i) * inv_freq_[std::size_t(j)];
        rope_cos_[std::size_t(i * half + j)] = std::cos(angle);
        rope_sin_[std::size_t(i * half + j)] = std::sin(angle);
      }
    bind_f32(layer_, "rope.cos", rope_cos_.data(), {s, half});
    bind_f32(layer_, "rope.sin", rope_sin_.data(), {s, half});
    int current = 0;
    for (std::int64_t i = 0; i < config_.layers; ++i) {
      const layer_weights& lw = layers_[std::size_t(i)];
      for (std::size_t k = 0; k < lw.matrices.size(); ++k) bind_weight(layer_, layer_matrix_names[k], lw.matrices[k]);
      bind_norm(layer_, "layer.attn_norm.weight", lw.attn_norm);
      bind_norm(layer_, "layer.ffn_norm.weight", lw.ffn_norm);
      bind_resident(layer_, "x", activations_[current], {s, w});
      float* keys = cache_[std::size_t(2 * i)];
      float* values = cache_[std::size_t(2 * i + 1)];
      bind_resident(layer_, "k_past", keys, {position_, config_.kv_heads, config_.head_dim});
      bind_resident(layer_, "v_past", values, {position_, config_.kv_heads, config_.head_dim});
      layer_.template write_output_to<0>(activations_[1 - current]);
      layer_.template write_output_to<1>(keys + position_ * kv);
      layer_.template write_output_to<2>(values + position_ * kv);
      layer_.run();
      current = 1 - current;
    }
    position_ += s;
    ++profiled_calls_;
    const std::int64_t rows = all ? s : 1;
    bind_resident(head_, "x", activations_[current] + (s - rows) * w, {rows, w});
    head_.run();
    logits_.resize(std::size_t(rows * config_.vocab));
    head_.template read_output<0>(logits_);
    return logits_;
  }

  static constexpr std::array<const char*, 7> matrix_names{"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                                            "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                                            "ffn_down.weight"};
  static constexpr std::array<const char*, 7> layer_matrix_names{
      "layer.attn_q.weight", "layer.attn_k.weight",    "layer.attn_v.weight",  "layer.attn_output.weight",
      "layer.ffn_gate.weight", "layer.ffn_up.weight", "layer.ffn_down.weight"};

  /// A weight matrix where the programs read it: the file's bytes, or their device copy.
  struct matrix {
    quant_format format{};
    const void* data = nullptr;
    std::array<index_t, 2> shape{};
  };
  struct layer_weights {
    std::array<matrix, 7> matrices;
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw llama_error("luminal: " + weights_->path() + ": " + what);
  }

  matrix weight(const std::string& name) {
    const llama_matrix m = weights_->matrix(name);
    return {m.format, on_device(m.bytes.data(), m.bytes.size()), m.shape};
  }
  /// A norm's weight as f32, converted once if the file stores it otherwise.
  const float* norm(const std::string& name) {
    const llama_vector v = weights_->vector(name);
    if (v.length != config_.width) fail("tensor '" + name + "' should have shape [" + std::to_string(config_.width) + "]");
    if (v.format == quant_format::f32 && reinterpret_cast<std::uintptr_t>(v.bytes.data()) % alignof(float) == 0)
      return static_cast<const float*>(on_device(v.bytes.data(), v.bytes.size()));
    std::vector<float>& converted = converted_.emplace_back(std::size_t(v.length));
    dequantize_row(v.format, v.bytes.data(), converted.data(), converted.size());
    return static_cast<const float*>(on_device(converted.data(), converted.size() * sizeof(float)));
  }
  /// Host memory the backend reads: itself, or a device copy made now and kept.
  const void* on_device(const void* data, std::size_t bytes) {
    if constexpr (B::host_accessible) {
      return data;
    } else {
      void* copy = backend_.allocate(bytes);
      backend_.to_device(copy, data, bytes);
      owned_.push_back(copy);
      return copy;
    }
  }

  template <class P>
  void bind_weight(P& program, std::string_view leaf, const std::string& tensor) {
    bind_weight(program, leaf, weight(tensor));
  }
  template <class P>
  void bind_weight(P& program, std::string_view leaf, const matrix& m) {
    program.bind_quantized_device(leaf, m.format, m.data, m.shape);
  }
  template <class P>
  void bind_norm(P& program, std::string_view leaf, const std::string& tensor) {
    bind_norm(program, leaf, norm(tensor));
  }
  template <class P>
  void bind_norm(P& program, std::string_view leaf, const float* data) {
    program.bind_device(leaf, data, std::array<index_t, 1>{config_.width});
  }
  /// Binds f32 data of host memory: in place where the backend reads it, else a copy.
  template <class P>
  void bind_f32(P& program, std::string_view leaf, const float* data, std::initializer_list<index_t> shape) {
    if constexpr (B::host_accessible) program.bind_view(leaf, data, shape);
    else program.bind(leaf, data, shape);
  }
  /// Binds f32 data of the backend's memory (activations, the cache) in place.
  template <class P>
  void bind_resident(P& program, std::string_view leaf, const float* data, std::initializer_list<index_t> shape) {
    program.bind_device(leaf, data, std::span<const index_t>(shape.begin(), shape.size()));
  }

  /// Activations for `s` positions and the cache's memory, grown as needed.
  void reserve(std::int64_t s) {
    const std::size_t rows = std::size_t(std::max<std::int64_t>(s, 1));
    if (rows > activation_rows_) {
      for (float*& a : activations_) {
        if (a) backend_.deallocate(a);
        a = static_cast<float*>(backend_.allocate(rows * std::size_t(config_.width) * sizeof(float)));
      }
      activation_rows_ = rows;
    }
    if (cache_.empty()) {
      const std::size_t bytes = std::size_t(context_ * config_.kv_heads * config_.head_dim) * sizeof(float);
      for (std::int64_t i = 0; i < 2 * config_.layers; ++i)
        cache_.push_back(static_cast<float*>(backend_.allocate(bytes)));
    }
  }
  void release() noexcept {
    for (float* a : activations_)
      if (a) backend_.deallocate(a);
    for (float* c : cache_) backend_.deallocate(c);
    for (void* p : owned_) backend_.deallocate(p);
    activations_ = {};
    cache_.clear();
    owned_.clear();
  }

  std::unique_ptr<llama_weights> weights_;  // on the heap: the views stay valid when the model moves
  llama_config config_;
  B backend_;
  llama_graph::embedding_program<B> embedding_;
  llama_graph::layer_program<B> layer_;
  llama_graph::head_program<B> head_;
  std::vector<layer_weights> layers_;
  std::vector<float> inv_freq_, rope_cos_, rope_sin_;
  float eps_ = 0;
  std::int64_t context_ = 0, position_ = 0;
  std::size_t profiled_calls_ = 0;
  std::array<float*, 2> activations_{};
  std::size_t activation_rows_ = 0;
  std::vector<float*> cache_;           // per layer: keys, values [context, KVHeads, HeadDim]
  std::vector<float> logits_;
  std::vector<std::vector<float>> converted_;  // norms the file does not store as f32
  std::vector<void*> owned_;            // device copies of the weights
};

}  // namespace luminal::nn
