// The tape against the fully static compile of a GPT (tape_gpt_model.hpp: embeddings, a
// pre-norm transformer block, final norm, head, cross-entropy): the tape's blocks are
// compiled once and called with the parameters "h.<i>.*"; the static program is one
// graph, compiled in tape_gpt_reference.cpp. One layer: the static gradient of each
// further layer adds minutes of compile time, and a block called several times under
// several prefixes is tested in tape_backends_test.cpp.
#include "tape_gpt_model.hpp"
#include "tape_support.hpp"

using namespace luminal;
using namespace test::gpt;

namespace {
tensor_store gpt_parameters(int layers) {
  tensor_store params;
  nn::Embedding<"wte", vocab, width>{}.initialize(params, 1);
  nn::PositionEmbedding<"wpe", max_seq, width>{}.initialize(params, 2);
  nn::LayerNorm<"ln_f", width>{}.initialize(params, 3);
  nn::Linear<"lm_head", width, vocab>{}.initialize(params, 4);
  for (int i = 0; i < layers; ++i) {
    tensor_store one;
    nn::TransformerBlock<"layer", width, heads>{}.initialize(one, 10 + unsigned(i));
    for (const auto& [name, entry] : one)
      params.insert("h." + std::to_string(i) + name.substr(std::string_view("layer").size()), entry);
  }
  // LayerNorm starts at ones and zeros; perturb it so that its gradients are exercised.
  for (const auto& name : params.names()) {
    auto& e = params.at(name);
    float* v = reinterpret_cast<float*>(e.data.data());
    for (std::size_t i = 0; i < e.element_count(); ++i) v[i] += 0.05f * float(std::sin(double(i) + name.size()));
  }
  return params;
}

}  // namespace

TEST_CASE("tape: a GPT layer gives the static compile's loss and gradients", "[tape][gpt]") {
  auto x = input<"x", f32>(shape<Batch, Seq, width>);
  auto embedding = compile_block<"embed">(embed(tokens));
  auto layer = compile_block<"layer">(nn::TransformerBlock<"layer", width, heads>{}(x), x);
  auto head = compile_block<"head">(head_loss(x, targets), x);
  // The layer keeps what its backward reads; everything cheap is recomputed.
  REQUIRE(std::remove_reference_t<decltype(*layer)>::kept_count >= 5);

  const tensor_store params = gpt_parameters(1);
  auto ids = test::random_ints<int>({3, 7}, 5, 0, int(vocab) - 1);
  auto next = test::random_ints<int>({3, 7}, 6, 0, int(vocab) - 1);

  tape<> t(params);
  auto h = t.call(*embedding, "", {{"tokens", t.constant(ids)}});
  h = t.call(*layer, "h.0", {{"x", h}});
  auto loss = t.call(*head, "", {{"x", h}, {"targets", t.constant(next)}});
  t.backward(loss);

  const reference expected = static_reference(params, ids, next);  // tape_gpt_reference.cpp
  REQUIRE(t.item<float>(loss) == Approx(expected.loss).epsilon(1e-5));
  test::require_same_store(t.gradients(), expected.gradients);
}


TEST_CASE("tape: checkpointed layers give identical gradients and hold one layer's activations", "[tape][gpt]") {
  auto x = input<"x", f32>(shape<Batch, Seq, width>);
  auto embedding = compile_block<"embed">(embed(tokens));
  auto layer = compile_block<"layer">(nn::TransformerBlock<"layer", width, heads>{}(x), x);
  auto head = compile_block<"head">(head_loss(x, targets), x);
  auto ids = test::random_ints<int>({3, 7}, 7, 0, int(vocab) - 1);
  auto next = test::random_ints<int>({3, 7}, 8, 0, int(vocab) - 1);
  for (int layers : {4, 12}) {
    INFO(layers << " layers");
    const tensor_store params = gpt_parameters(layers);
    struct result {
      float loss;
      std::size_t held;
      tensor_store gradients;
    };
    auto train = [&](bool checkpointed) {
      tape<> t(params);
      auto h = t.call(*embedding, "", {{"tokens", t.constant(ids)}});
      for (int i = 0; i < layers; ++i) {
        const std::string prefix = "h." + std::to_string(i);
        h = checkpointed ? t.checkpoint(*layer, prefix, {{"x", h}}) : t.call(*layer, prefix, {{"x", h}});
      }
      auto loss = t.call(*head, "", {{"x", h}, {"targets", t.constant(next)}});
      const std::size_t held = t.held_bytes();
      t.backward(loss);
      return result{t.item<float>(loss), held, t.gradients()};
    };
    const result kept = train(false), recomputed = train(true);
    REQUIRE(kept.loss == recomputed.loss);
    REQUIRE(kept.gradients.size() == recomputed.gradients.size());
    for (const auto& name : kept.gradients.names()) {
      INFO("gradient of " << name);
      REQUIRE(recomputed.gradients.contains(name));
      REQUIRE(kept.gradients.at(name).data == recomputed.gradients.at(name).data);  // bit for bit
    }
    // Each checkpointed layer holds its output only: the kept activations per layer are
    // several times the layer's output, so the recording holds a fraction of the bytes.
    const std::size_t layer_output = 3 * 7 * std::size_t(width) * sizeof(float);
    WARN(layers << " layers: the tape holds " << kept.held << " bytes, checkpointed " << recomputed.held);
    REQUIRE(recomputed.held <= kept.held / 3);
    REQUIRE(recomputed.held < (std::size_t(layers) + 4) * layer_output + kept.held / std::size_t(layers));
  }
}
