// A GPT-2 style language model whose depth is a run-time value: token and position
// embeddings, `layers` pre-norm transformer blocks, a final layer norm and a linear head.
// Each piece is a block (block.hpp) compiled once; the layers are calls of one block with
// the parameters "h.<i>.*", recorded on a tape, so the build time does not grow with depth.
//
//     nn::GPT<256, 128, 4, 64> gpt(/*layers=*/6);      // vocab, width, heads, max context
//     tensor_store params = gpt.initial_parameters(/*seed=*/1);
//     parameter_optimizer<adamw> opt({.lr = 1e-3f});
//     tape<> t(params);
//     auto loss = gpt.loss(t, tokens, targets);        // i32 [batch, seq], seq <= 64
//     t.backward(loss);
//     opt.step(params, t.gradients());
//
// nn::GPT<256, 128, 4, 64, host, bf16> runs every matmul of its blocks in bf16 with f32
// parameters, as under torch.autocast (ops/autocast.hpp); the tape and the optimizer see
// f32 tensors as before.
//
// Parameter names follow the torch model in benchmarks/char_gpt.py: wte, wpe, h.<i>.ln1,
// h.<i>.attn.{q,k,v,proj}, h.<i>.ln2, h.<i>.mlp.fc, h.<i>.mlp.proj, ln_f, lm_head.
#pragma once
#include <memory>
#include <string>

#include "../ops/autocast.hpp"
#include "../tape/tape.hpp"
#include "attention.hpp"
#include "losses.hpp"

namespace luminal::nn {

template <std::int64_t Vocab, std::int64_t Width, std::int64_t Heads, std::int64_t MaxSeq, class B = host,
          element_type Autocast = f32>
class GPT {
 public:
  static constexpr Dim batch{"Batch"}, seq{"Seq"};
  static constexpr std::int64_t vocab = Vocab, width = Width, heads = Heads, max_context = MaxSeq;

 private:
  static constexpr auto tokens = input<"tokens", i32>(shape<batch, seq>);
  static constexpr auto targets = input<"targets", i32>(shape<batch, seq>);
  static constexpr auto hidden = input<"x", f32>(shape<batch, seq, Width>);
  static constexpr Embedding<"wte", Vocab, Width> wte{};
  static constexpr PositionEmbedding<"wpe", MaxSeq, Width> wpe{};
  static constexpr TransformerBlock<"layer", Width, Heads> layer{};
  static constexpr LayerNorm<"ln_f", Width> ln_f{};
  static constexpr Linear<"lm_head", Width, Vocab> lm_head{};

  static auto make_embed() { return compile_block<"embed", B>(wpe(wte(tokens))); }
  static auto make_layer() { return compile_block<"layer", B>(autocast<Autocast>(layer(hidden)), hidden); }
  static auto make_head() {
    return compile_block<"head", B>(autocast<Autocast>(cross_entropy(lm_head(ln_f(hidden)), targets)), hidden);
  }
  static auto make_logits() { return compile<B>(autocast<Autocast>(lm_head(ln_f(hidden)))); }

 public:
  explicit GPT(int layers)
      : layers_(layers), embed_(make_embed()), layer_(make_layer()), head_(make_head()), logits_(make_logits()) {
    if (layers < 1) throw std::invalid_argument("luminal: GPT needs at least one layer, not " + std::to_string(layers));
  }

  int layers() const { return layers_; }

  /// Records the layers with tape::checkpoint: backward() runs each layer's forward again
  /// instead of the tape keeping its activations, so the memory a recording holds grows
  /// by one layer's input per layer rather than by all its activations. Same gradients.
  void recompute_layers(bool on) { recompute_layers_ = on; }
  bool recomputes_layers() const { return recompute_layers_; }

  /// PyTorch's default initial values (nn.Embedding N(0, 1), nn.Linear uniform, LayerNorm
  /// ones and zeros) for every parameter, one random stream per (seed, name).
  tensor_store initial_parameters(std::uint64_t seed) const {
    tensor_store params;
    wte.initialize(params, seed);
    wpe.initialize(params, seed);
    ln_f.initialize(params, seed);
    lm_head.initialize(params, seed);
    for (int i = 0; i < layers_; ++i) {
      tensor_store one;
      const std::string prefix = layer_prefix(i);
      TransformerBlock<"layer", Width, Heads>{}.initialize(one, seed ^ (0x9e3779b97f4a7c15ull * std::uint64_t(i + 1)));
      for (const auto& [name, entry] : one) params.insert(prefix + name.substr(5), entry);  // "layer" -> "h.<i>"
    }
    return params;
  }

  /// The residual stream after the last layer, [batch, seq, width].
  typename tape<B>::tensor features(tape<B>& t, const xt::xarray<int>& token_ids) {
    check_context(token_ids);
    auto h = t.call(*embed_, "", {{"tokens", t.constant(token_ids)}});
    for (int i = 0; i < layers_; ++i)
      h = recompute_layers_ ? t.checkpoint(*layer_, layer_prefix(i), {{"x", h}}) : t.call(*layer_, layer_prefix(i), {{"x", h}});
    return h;
  }

  /// Mean next-token cross-entropy (nats) of predicting `target_ids` from `token_ids`.
  typename tape<B>::tensor loss(tape<B>& t, const xt::xarray<int>& token_ids, const xt::xarray<int>& target_ids) {
    if (target_ids.shape() != token_ids.shape())
      throw input_error("luminal: GPT::loss: the targets must have the tokens' shape [batch, seq]");
    auto h = features(t, token_ids);
    return t.call(*head_, "", {{"x", h}, {"targets", t.constant(target_ids)}});
  }

  /// Logits [batch, seq, vocab] (forward only; nothing is recorded for backward use).
  xt::xarray<float> logits(tape<B>& t, const xt::xarray<int>& token_ids) {
    auto h = features(t, token_ids);
    for (const char* name : {"ln_f.weight", "ln_f.bias", "lm_head.weight", "lm_head.bias"})
      t.template bind_parameter<float>(logits_, name);
    logits_.bind_device("x", t.template data<float>(h), t.shape(h));  // in place, on the device
    logits_.run();
    return logits_.output();
  }

  static std::string layer_prefix(int i) { return "h." + std::to_string(i); }
  /// The compiled transformer layer, embedding and head blocks (each a forward and a
  /// backward program): `gpt.layer_block().forward().set_profiling(true)` times each of
  /// their kernels (program::profile, program::describe).
  auto& layer_block() { return *layer_; }
  auto& embed_block() { return *embed_; }
  auto& head_block() { return *head_; }

 private:
  void check_context(const xt::xarray<int>& token_ids) const {
    if (token_ids.dimension() != 2)
      throw input_error("luminal: GPT: tokens must be [batch, seq], not of rank " + std::to_string(token_ids.dimension()));
    if (std::int64_t(token_ids.shape()[1]) > MaxSeq)
      throw input_error("luminal: GPT: a sequence of " + std::to_string(token_ids.shape()[1]) +
                        " tokens is longer than the model's context of " + std::to_string(MaxSeq));
  }

  int layers_;
  bool recompute_layers_ = false;
  decltype(make_embed()) embed_;
  decltype(make_layer()) layer_;
  decltype(make_head()) head_;
  decltype(make_logits()) logits_;
};

}  // namespace luminal::nn
