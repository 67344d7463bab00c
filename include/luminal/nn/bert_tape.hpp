// Fine-tuning a BertEncoder (bert.hpp) through the tape: its embeddings, layer and pooling
// as compiled blocks (each a forward and a derived backward program), with the encoder's
// own parameter names, so that gradients and the optimizer's update land on the same
// tensors the encoder runs. A separate class: programs that only embed do not compile the
// backward programs.
//
//     nn::MiniLM_L6 bert = nn::MiniLM_L6::from_safetensors(dir / "model.safetensors");
//     nn::BertTape<nn::MiniLM_L6> blocks;
//     parameter_optimizer<adamw> optimizer({.lr = 2e-5f});
//     tape<> t(bert.weights());
//     auto a = blocks.sentence_embeddings(t, bert.depth(), anchors.ids, anchors.mask);
//     auto p = blocks.sentence_embeddings(t, bert.depth(), positives.ids, positives.mask);
//     auto loss = blocks.contrastive_loss(t, a, p);
//     t.backward(loss);
//     optimizer.step(bert.weights(), t.gradients());   // bert embeds with the new weights
#pragma once
#include "../tape/tape.hpp"
#include "bert.hpp"
#include "losses.hpp"

namespace luminal::nn {

/// The blocks of encoder type Encoder (a BertEncoder) on a tape; see the file comment.
template <class Encoder>
class BertTape {
  using B = typename Encoder::backend_type;
  static constexpr Dim batch = Encoder::batch, seq = Encoder::seq;
  static constexpr auto anchor = input<"anchor", f32>(shape<batch, Encoder::width>);
  static constexpr auto positive = input<"positive", f32>(shape<batch, Encoder::width>);
  /// sentence-transformers' MultipleNegativesRankingLoss: cross-entropy of the cosine
  /// similarities (the embeddings are unit vectors) times 20, where anchor i's own positive
  /// is the right class and the other positives of the batch are negatives.
  static constexpr auto ranking_loss =
      cross_entropy(matmul(anchor, transpose(positive)) * c<20.0>, iota<0, i32>(shape<batch>));

  static auto make_embed() {
    return compile_block<"embeddings", B>(Encoder::embeddings(Encoder::ids, Encoder::types));
  }
  static auto make_layer() {
    return compile_block<"layer", B>(Encoder::layer(Encoder::hidden, Encoder::keep), Encoder::hidden);
  }
  static auto make_pool() {
    return compile_block<"pool", B>(masked_mean_normalized(Encoder::hidden, Encoder::mask), Encoder::hidden);
  }
  static auto make_loss() { return compile_block<"loss", B>(ranking_loss, anchor, positive); }

 public:
  BertTape() : embed_(make_embed()), layer_(make_layer()), pool_(make_pool()), loss_(make_loss()) {}

  /// Records the embeddings of a padded batch (ids and mask i32 [batch, seq]) through
  /// `depth` layers: the unit-length mean of the last hidden states, [batch, width].
  typename tape<B>::tensor sentence_embeddings(tape<B>& t, int depth, const xt::xarray<int>& token_ids,
                                               const xt::xarray<int>& attention_mask) {
    Encoder::check_batch(token_ids, attention_mask, {});
    auto mask = t.constant(attention_mask);
    auto types = t.constant(xt::xarray<int>(xt::zeros<int>(token_ids.shape())));
    auto h = t.call(*embed_, "", {{"input_ids", t.constant(token_ids)}, {"token_type_ids", types}});
    for (int i = 0; i < depth; ++i)
      h = t.call(*layer_, Encoder::layer_prefix(i), {{"hidden", h}, {"attention_mask", mask}});
    return t.call(*pool_, "", {{"hidden", h}, {"attention_mask", mask}});
  }

  /// The in-batch ranking loss of anchor and positive embeddings, both [batch, width].
  typename tape<B>::tensor contrastive_loss(tape<B>& t, typename tape<B>::tensor anchors,
                                            typename tape<B>::tensor positives) {
    return t.call(*loss_, "", {{"anchor", anchors}, {"positive", positives}});
  }

 private:
  decltype(make_embed()) embed_;
  decltype(make_layer()) layer_;
  decltype(make_pool()) pool_;
  decltype(make_loss()) loss_;
};

}  // namespace luminal::nn
