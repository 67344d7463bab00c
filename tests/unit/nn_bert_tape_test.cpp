// Fine-tuning the pretrained all-MiniLM-L6-v2 through the tape (nn/bert_tape.hpp): the
// tape's embeddings are the encoder's, its ranking loss and gradients are PyTorch's
// (tests/fixtures/minilm_fixtures.json), and a few AdamW steps make the loss fall. (A separate file from nn_bert_test.cpp: the blocks' backward programs are
// the heavy part of the build.)
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/bert_tape.hpp>
#include <luminal/text/wordpiece.hpp>

#include "fixture_dir.hpp"
#include "minilm_dir.hpp"

using namespace luminal;
namespace fs = std::filesystem;

namespace {
nn::padded_batch encode(const wordpiece::tokenizer& tok, const std::vector<std::string>& texts) {
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& s : texts) ids.push_back(tok.encode(s));
  return nn::pad_batch(ids, tok.pad_id());
}
}  // namespace

TEST_CASE("fine-tuning all-MiniLM-L6-v2 on the tape lowers its in-batch ranking loss") {
  const fs::path dir = test::minilm_dir();
  const wordpiece::tokenizer tok(dir / "vocab.txt");
  nn::MiniLM_L6 bert = nn::MiniLM_L6::from_safetensors(dir / "model.safetensors");
  nn::BertTape<nn::MiniLM_L6> blocks;

  // Arbitrary pairings the pretrained model does not already make: the loss starts high.
  std::ifstream in(test::fixture_dir() / "minilm_fixtures.json");
  REQUIRE(in);
  const auto reference = nlohmann::json::parse(in).at("ranking_loss");
  const auto anchors = encode(tok, reference.at("anchors").get<std::vector<std::string>>());
  const auto positives = encode(tok, reference.at("positives").get<std::vector<std::string>>());

  SECTION("the tape's embeddings are the encoder's") {
    tape<> t(bert.weights());
    auto a = blocks.sentence_embeddings(t, bert.depth(), anchors.ids, anchors.mask);
    xt::xarray<float> on_tape = t.value<float>(a);
    xt::xarray<float> direct = bert.sentence_embeddings(anchors.ids, anchors.mask);
    REQUIRE(on_tape.shape() == direct.shape());
    for (std::size_t k = 0; k < direct.size(); ++k) REQUIRE(on_tape.flat(k) == Approx(direct.flat(k)).margin(1e-5));
  }

  SECTION("the loss and the parameters' gradients are PyTorch's") {
    tape<> t(bert.weights());
    auto a = blocks.sentence_embeddings(t, bert.depth(), anchors.ids, anchors.mask);
    auto p = blocks.sentence_embeddings(t, bert.depth(), positives.ids, positives.mask);
    auto loss = blocks.contrastive_loss(t, a, p);
    CHECK(t.item<float>(loss) == Approx(reference.at("loss").get<double>()).epsilon(1e-5));
    t.backward(loss);
    for (const auto& [name, expected] : reference.at("gradients").items()) {
      const xt::xarray<float> got = t.gradients().get<float>(name);
      const auto want = expected.get<std::vector<double>>();
      REQUIRE(got.size() == want.size());
      double worst = 0, scale = 0;
      for (std::size_t k = 0; k < want.size(); ++k) {
        worst = std::max(worst, std::abs(double(got.flat(k)) - want[k]));
        scale = std::max(scale, std::abs(want[k]));
      }
      INFO(name << ": largest difference " << worst << ", largest gradient " << scale);
      CHECK(worst <= 1e-4 * scale);
    }
  }

  SECTION("five AdamW steps lower the loss, and the encoder embeds with the new weights") {
    parameter_optimizer<adamw> optimizer({.lr = 1e-4f});
    tape<> t(bert.weights());
    xt::xarray<float> before = bert.sentence_embeddings(anchors.ids, anchors.mask);
    std::vector<float> losses;
    for (int step = 0; step < 6; ++step) {
      t.clear();
      auto a = blocks.sentence_embeddings(t, bert.depth(), anchors.ids, anchors.mask);
      auto p = blocks.sentence_embeddings(t, bert.depth(), positives.ids, positives.mask);
      auto loss = blocks.contrastive_loss(t, a, p);
      losses.push_back(t.item<float>(loss));
      if (step == 5) break;  // the sixth loss measures the fifth update
      t.backward(loss);
      REQUIRE(t.gradients().contains("encoder.layer.5.output.dense.weight"));
      REQUIRE(t.gradients().contains("embeddings.word_embeddings.weight"));
      optimizer.step(bert.weights(), t.gradients());
    }
    std::cout << "BERT fine-tuning, ranking loss per step:";
    for (float l : losses) std::cout << ' ' << l;
    std::cout << '\n';
    CHECK(losses.front() > 1.0f);  // 6 classes: chance is log 6 = 1.79
    CHECK(losses.back() < 0.5f * losses.front());
    xt::xarray<float> after = bert.sentence_embeddings(anchors.ids, anchors.mask);
    CHECK(xt::amax(xt::abs(after - before))() > 1e-3f);
  }
}
