// The byte-level BPE tokenizer (luminal/text/bpe.hpp) as a command, for bpe_compare.py, which
// checks it against Hugging Face tokenizers at scale and times both.
//
//     bpe_tokenize VOCAB.json encode < strings.jsonl > ids.txt
//     bpe_tokenize VOCAB.json time REPEATS FILE...
//     bpe_tokenize - split PRE < strings.jsonl > pieces.jsonl
//
// VOCAB.json holds luminal::bpe::vocabulary's fields (tokens, merges, token_types, pre, bos_id,
// eos_id); bpe_compare.py writes it from the GGUF. `encode` reads one JSON string a line and
// writes a line for each: the ids, a tab, then "ok" if decode(encode(s)) gives back s (less
// the bytes the vocabulary has no token for), else "roundtrip-mismatch"; or "error MESSAGE".
// `time` encodes each file whole, REPEATS times, and prints "bytes B seconds S cpu C ids N"
// per file: the fastest run's wall and thread CPU seconds (the caller sums them). `split`
// (no vocabulary) writes the pieces of pre-tokenizer PRE (gpt2, smollm, llama3, ...) of each
// string as a JSON list, or "error MESSAGE".
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <luminal/text/bpe.hpp>

namespace {

luminal::bpe::vocabulary read_vocabulary(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  const nlohmann::json j = nlohmann::json::parse(in);
  luminal::bpe::vocabulary v;
  v.tokens = j.at("tokens").get<std::vector<std::string>>();
  v.merges = j.at("merges").get<std::vector<std::string>>();
  v.token_types = j.value("token_types", std::vector<std::int32_t>{});
  v.pre = j.value("pre", std::string("gpt2"));
  v.bos_id = j.value("bos_id", -1);
  v.eos_id = j.value("eos_id", -1);
  return v;
}

int split_lines(const char* pre_name) {
  const luminal::bpe::pre_tokenizer pre = luminal::bpe::pre_tokenizer_from_name(pre_name);
  std::string line;
  while (std::getline(std::cin, line)) {
    try {
      const std::string text = nlohmann::json::parse(line).get<std::string>();
      nlohmann::json pieces = nlohmann::json::array();
      for (std::string_view piece : luminal::bpe::pre_tokenize(text, pre)) pieces.push_back(std::string(piece));
      std::cout << pieces.dump() << '\n';
    } catch (const std::exception& e) {
      std::string out = std::string("error ") + e.what();
      std::replace(out.begin(), out.end(), '\n', ' ');
      std::cout << out << '\n';
    }
  }
  return 0;
}

int encode_lines(const luminal::bpe::tokenizer& tok) {
  std::string line, out;
  while (std::getline(std::cin, line)) {
    out.clear();
    try {
      const std::string text = nlohmann::json::parse(line).get<std::string>();
      const std::vector<std::int32_t> ids = tok.encode(text);
      for (std::size_t k = 0; k < ids.size(); ++k) {
        if (k) out += ' ';
        out += std::to_string(ids[k]);
      }
      std::string kept;
      for (char b : text)
        if (tok.byte_id((unsigned char)b) >= 0) kept += b;
      out += tok.decode(ids) == kept ? "\tok" : "\troundtrip-mismatch";
    } catch (const std::exception& e) {
      out = std::string("error ") + e.what();
      std::replace(out.begin(), out.end(), '\n', ' ');
    }
    std::cout << out << '\n';
  }
  return 0;
}

/// CPU time of this thread: on a shared machine, wall time also counts other processes' turns.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

int time_files(const luminal::bpe::tokenizer& tok, int repeats, char** files, int count) {
  for (int f = 0; f < count; ++f) {
    std::ifstream in(files[f], std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    double best = 1e30, best_cpu = 1e30;
    std::size_t n_ids = 0;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_seconds();
      n_ids = tok.encode(text).size();
      best_cpu = std::min(best_cpu, thread_seconds() - c0);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::cout << "bytes " << text.size() << " seconds " << best << " cpu " << best_cpu << " ids " << n_ids << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: bpe_tokenize VOCAB.json encode < strings.jsonl\n"
                            "       bpe_tokenize VOCAB.json time REPEATS FILE...\n"
                            "       bpe_tokenize - split PRE < strings.jsonl\n";
  if (argc < 3) { std::cerr << usage; return 2; }
  try {
    if (std::string(argv[2]) == "split" && argc == 4) return split_lines(argv[3]);
    const auto t0 = std::chrono::steady_clock::now();
    const luminal::bpe::tokenizer tok(read_vocabulary(argv[1]));
    std::cerr << "bpe_tokenize: tokenizer built in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
    const std::string mode = argv[2];
    if (mode == "encode") return encode_lines(tok);
    if (mode == "time" && argc >= 5) return time_files(tok, std::max(1, std::atoi(argv[3])), argv + 4, argc - 4);
  } catch (const std::exception& e) {
    std::cerr << "bpe_tokenize: " << e.what() << '\n';
    return 1;
  }
  std::cerr << usage;
  return 2;
}
