// nn::llama (nn/llama.hpp): a small Llama written as a GGUF file here, against a plain
// double-precision forward pass of the same weights; the key/value cache against a recompute
// of the whole sequence; the files it refuses; and SmolLM2-135M-Instruct against
// transformers' dequantized f32 model (tests/fixtures/llama_smollm2.json).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <luminal/nn/llama.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/llama_tokenizer.hpp>
#include <luminal/nn/sampling.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fixture_dir.hpp"
#include "gguf_writer.hpp"
#include "smollm_path.hpp"

using namespace luminal;
using Catch::Matchers::Contains;

namespace {

/// A small Llama: its sizes, its weights as f32 (what the file holds, dequantized), and the
/// formats the file stores them in.
struct tiny_llama {
  std::int64_t vocab = 40, width = 64, layers = 2, heads = 4, kv_heads = 2, head_dim = 16, hidden = 96;
  float rope_base = 10000.0f, eps = 1e-5f;
  quant_format attention_format = quant_format::f16, ffn_format = quant_format::f32, table_format = quant_format::bf16;
  std::map<std::string, std::vector<float>> weights;  // row-major [rows, row length]
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> shapes;
};

/// Stores `values` (rows of `k`) in `format`, and keeps the values the stored bytes stand for.
std::string encode(quant_format format, std::vector<float>& values, std::int64_t k) {
  std::string bytes;
  const std::size_t rows = values.size() / std::size_t(k);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * std::size_t(k);
    for (std::int64_t c = 0; c < k; ++c) {
      if (format == quant_format::f32) {
        bytes.append(reinterpret_cast<const char*>(row + c), 4);
      } else {
        const std::uint16_t h = format == quant_format::f16 ? f32_to_f16(row[c]) : f32_to_bf16(row[c]);
        bytes += char(h & 0xff), bytes += char(h >> 8);
      }
    }
  }
  for (std::size_t r = 0; r < rows; ++r)  // what the file holds
    dequantize_row(format, bytes.data() + r * row_bytes(format, std::size_t(k)), values.data() + r * std::size_t(k),
                   std::size_t(k));
  return bytes;
}

/// A GGUF file of a random tiny Llama; fills m.weights with what it stores.
std::string write_tiny_llama(tiny_llama& m, const std::string& architecture = "llama") {
  test::gguf_writer w;
  w.string("general.architecture", architecture)
      .string("general.name", "tiny")
      .scalar("llama.block_count", gguf_type::u32, std::uint32_t(m.layers))
      .scalar("llama.embedding_length", gguf_type::u32, std::uint32_t(m.width))
      .scalar("llama.feed_forward_length", gguf_type::u32, std::uint32_t(m.hidden))
      .scalar("llama.attention.head_count", gguf_type::u32, std::uint32_t(m.heads))
      .scalar("llama.attention.head_count_kv", gguf_type::u32, std::uint32_t(m.kv_heads))
      .scalar("llama.context_length", gguf_type::u32, std::uint32_t(64))
      .scalar("llama.rope.freq_base", gguf_type::f32, m.rope_base)
      .scalar("llama.attention.layer_norm_rms_epsilon", gguf_type::f32, m.eps);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::int64_t rows, std::int64_t k, quant_format format, float scale, float mean) {
    std::vector<float> v(std::size_t(rows * k));
    for (float& x : v) x = mean + scale * normal(rng);
    const std::string bytes = encode(format, v, k);
    std::vector<std::uint64_t> ne{std::uint64_t(k)};
    if (rows > 1 || name.find("norm") == std::string::npos) ne.push_back(std::uint64_t(rows));
    w.tensor(name, ne, std::uint32_t(format), bytes);
    m.weights[name] = v;
    m.shapes[name] = {rows, k};
  };
  const float s = 1.0f / std::sqrt(float(m.width));
  add("token_embd.weight", m.vocab, m.width, m.table_format, 1.0f, 0.0f);
  add("output_norm.weight", 1, m.width, quant_format::f32, 0.1f, 1.0f);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1, m.width, quant_format::f32, 0.1f, 1.0f);
    add(p + "attn_q.weight", m.heads * m.head_dim, m.width, m.attention_format, s, 0);
    add(p + "attn_k.weight", m.kv_heads * m.head_dim, m.width, m.attention_format, s, 0);
    add(p + "attn_v.weight", m.kv_heads * m.head_dim, m.width, m.attention_format, s, 0);
    add(p + "attn_output.weight", m.width, m.heads * m.head_dim, m.attention_format, s, 0);
    add(p + "ffn_norm.weight", 1, m.width, quant_format::f32, 0.1f, 1.0f);
    add(p + "ffn_gate.weight", m.hidden, m.width, m.ffn_format, s, 0);
    add(p + "ffn_up.weight", m.hidden, m.width, m.ffn_format, s, 0);
    add(p + "ffn_down.weight", m.width, m.hidden, m.ffn_format, 1.0f / std::sqrt(float(m.hidden)), 0);
  }
  return w.bytes();
}

using matrix = std::vector<std::vector<double>>;

/// x [s, k] @ w^T for a weight of m stored as [rows, k].
matrix times(const tiny_llama& m, const std::string& name, const matrix& x) {
  const auto [rows, k] = m.shapes.at(name);
  const std::vector<float>& w = m.weights.at(name);
  matrix y(x.size(), std::vector<double>(std::size_t(rows)));
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (std::int64_t c = 0; c < k; ++c) acc += x[i][std::size_t(c)] * w[std::size_t(r * k + c)];
      y[i][std::size_t(r)] = acc;
    }
  return y;
}

matrix rms_norm(const tiny_llama& m, const std::string& name, const matrix& x) {
  matrix y = x;
  for (auto& row : y) {
    double squares = 0;
    for (double v : row) squares += v * v;
    const double scale = 1.0 / std::sqrt(squares / double(row.size()) + m.eps);
    for (std::size_t c = 0; c < row.size(); ++c) row[c] *= scale * m.weights.at(name)[c];
  }
  return y;
}

/// Rotates each head's interleaved pairs (2i, 2i + 1) of x [s, heads * head_dim].
void rope(const tiny_llama& m, matrix& x, std::int64_t heads) {
  for (std::size_t pos = 0; pos < x.size(); ++pos)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < m.head_dim / 2; ++i) {
        const double t = double(pos) * std::pow(double(m.rope_base), -2.0 * double(i) / double(m.head_dim));
        double& a = x[pos][std::size_t(h * m.head_dim + 2 * i)];
        double& b = x[pos][std::size_t(h * m.head_dim + 2 * i + 1)];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(t) - b0 * std::sin(t);
        b = b0 * std::cos(t) + a0 * std::sin(t);
      }
}

/// The logits after every token, in double precision.
matrix reference_logits(const tiny_llama& m, const std::vector<std::int32_t>& ids) {
  matrix x;
  for (std::int32_t id : ids) {
    const float* row = m.weights.at("token_embd.weight").data() + std::size_t(id) * std::size_t(m.width);
    x.emplace_back(row, row + m.width);
  }
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const matrix n = rms_norm(m, p + "attn_norm.weight", x);
    matrix q = times(m, p + "attn_q.weight", n), k = times(m, p + "attn_k.weight", n), v = times(m, p + "attn_v.weight", n);
    rope(m, q, m.heads);
    rope(m, k, m.kv_heads);
    matrix attended(x.size(), std::vector<double>(std::size_t(m.heads * m.head_dim)));
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::int64_t h = 0; h < m.heads; ++h) {
        const std::int64_t g = h / (m.heads / m.kv_heads);
        std::vector<double> scores;
        double top = -INFINITY;
        for (std::size_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < m.head_dim; ++c)
            dot += q[i][std::size_t(h * m.head_dim + c)] * k[j][std::size_t(g * m.head_dim + c)];
          scores.push_back(dot / std::sqrt(double(m.head_dim)));
          top = std::max(top, scores.back());
        }
        double total = 0;
        for (double& s : scores) total += (s = std::exp(s - top));
        for (std::int64_t c = 0; c < m.head_dim; ++c) {
          double acc = 0;
          for (std::size_t j = 0; j <= i; ++j) acc += scores[j] * v[j][std::size_t(g * m.head_dim + c)];
          attended[i][std::size_t(h * m.head_dim + c)] = acc / total;
        }
      }
    const matrix o = times(m, p + "attn_output.weight", attended);
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t c = 0; c < x[i].size(); ++c) x[i][c] += o[i][c];
    const matrix n2 = rms_norm(m, p + "ffn_norm.weight", x);
    matrix gate = times(m, p + "ffn_gate.weight", n2);
    const matrix up = times(m, p + "ffn_up.weight", n2);
    for (std::size_t i = 0; i < gate.size(); ++i)
      for (std::size_t c = 0; c < gate[i].size(); ++c) gate[i][c] = gate[i][c] / (1 + std::exp(-gate[i][c])) * up[i][c];
    const matrix down = times(m, p + "ffn_down.weight", gate);
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t c = 0; c < x[i].size(); ++c) x[i][c] += down[i][c];
  }
  return times(m, "token_embd.weight", rms_norm(m, "output_norm.weight", x));
}

}  // namespace

TEST_CASE("llama: a small Llama from GGUF computes what a plain forward pass of its weights does", "[llama]") {
  test::scratch_dir dir;
  tiny_llama m;
  const std::string path = dir.write(write_tiny_llama(m));
  nn::llama<host> model(path);
  REQUIRE(model.config().heads == 4);
  REQUIRE(model.config().kv_heads == 2);
  REQUIRE(model.config().head_dim == 16);
  REQUIRE(model.config().tied_output);
  const std::vector<std::int32_t> ids{3, 17, 0, 39, 8, 8, 21};
  const matrix expected = reference_logits(m, ids);
  // The whole prompt at once.
  std::span<const float> all = model.forward(ids, true);
  REQUIRE(all.size() == ids.size() * std::size_t(m.vocab));
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t v = 0; v < m.vocab; ++v)
      REQUIRE(all[i * std::size_t(m.vocab) + std::size_t(v)] == Approx(expected[i][std::size_t(v)]).margin(2e-4));
  // Token by token from the cache, and in two pieces.
  model.reset();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::span<const float> logits = model.forward(std::span<const std::int32_t>(&ids[i], 1));
    for (std::int64_t v = 0; v < m.vocab; ++v) REQUIRE(logits[std::size_t(v)] == Approx(expected[i][std::size_t(v)]).margin(2e-4));
  }
  REQUIRE(model.position() == std::int64_t(ids.size()));
  model.truncate(3);
  std::span<const float> rest = model.forward(std::span<const std::int32_t>(ids.data() + 3, ids.size() - 3), true);
  for (std::size_t i = 3; i < ids.size(); ++i)
    for (std::int64_t v = 0; v < m.vocab; ++v)
      REQUIRE(rest[(i - 3) * std::size_t(m.vocab) + std::size_t(v)] == Approx(expected[i][std::size_t(v)]).margin(2e-4));
}

TEST_CASE("llama: a prompt longer than a batch runs in batches, with the same logits", "[llama]") {
  test::scratch_dir dir;
  tiny_llama m;
  m.layers = 1;
  nn::llama<host> model(dir.write(write_tiny_llama(m)), 1200);
  std::mt19937 rng(3);
  std::vector<std::int32_t> ids(nn::llama<host>::max_batch * 2 + 17);
  for (auto& id : ids) id = std::int32_t(rng() % std::uint32_t(m.vocab));
  const std::span<const float> whole = model.forward(ids, true);
  const std::vector<float> batched(whole.begin(), whole.end());
  REQUIRE(batched.size() == ids.size() * std::size_t(m.vocab));
  model.reset();
  std::vector<float> pieces;
  for (std::size_t begin = 0; begin < ids.size(); begin += 300) {
    const std::size_t count = std::min<std::size_t>(300, ids.size() - begin);
    const std::span<const float> part = model.forward(std::span<const std::int32_t>(ids.data() + begin, count), true);
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) REQUIRE(batched[i] == Approx(pieces[i]).margin(1e-4));
  model.reset();
  const std::span<const float> last = model.forward(ids);
  for (std::int64_t v = 0; v < m.vocab; ++v)
    REQUIRE(last[std::size_t(v)] == Approx(batched[(ids.size() - 1) * std::size_t(m.vocab) + std::size_t(v)]).margin(1e-4));
}

TEST_CASE("llama: refuses what it cannot run, by name", "[llama]") {
  test::scratch_dir dir;
  tiny_llama m;
  REQUIRE_THROWS_WITH(nn::llama<host>(dir.write(write_tiny_llama(m, "gpt2"), "gpt2.gguf")),
                      Contains("general.architecture is 'gpt2'") && Contains("gpt2.gguf"));
  REQUIRE_THROWS_AS(nn::llama<host>((dir.path / "missing.gguf").string()), gguf_error);
  nn::llama<host> model(dir.write(write_tiny_llama(m)), 8);
  const std::vector<std::int32_t> nine(9, 1), bad{1, 40};
  REQUIRE_THROWS_WITH(model.forward(nine), Contains("exceed the context of 8"));
  REQUIRE_THROWS_WITH(model.forward(bad), Contains("token id 40 is outside the vocabulary of 40"));
  REQUIRE(model.position() == 0);
}

TEST_CASE("sampler: greedy at temperature 0, reproducible from a seed, only among top-k and top-p", "[llama]") {
  const std::vector<float> logits{0.0f, 3.0f, 1.0f, 3.0f, -2.0f};
  REQUIRE(nn::sampler({.temperature = 0}).operator()(logits) == 1);
  nn::sampler a({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 7}), b({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 7});
  std::vector<int> counts(5);
  for (int i = 0; i < 2000; ++i) {
    const std::int32_t x = a(logits);
    REQUIRE(x == b(logits));
    ++counts[std::size_t(x)];
  }
  REQUIRE(counts[4] < counts[0]);
  REQUIRE(counts[1] > 500);
  nn::sampler two({.temperature = 5.0f, .top_k = 2, .seed = 1});
  for (int i = 0; i < 200; ++i) {
    const std::int32_t x = two(logits);
    REQUIRE((x == 1 || x == 3));
  }
  nn::sampler nucleus({.temperature = 1.0f, .top_k = 0, .top_p = 0.4f, .seed = 1});
  for (int i = 0; i < 200; ++i) REQUIRE(nucleus(logits) == 1);  // the first of the two largest holds 45%
  REQUIRE_THROWS_AS(nn::sampler({.temperature = -1.0f}), std::invalid_argument);
  REQUIRE_THROWS_AS(nn::sampler({.top_p = 0.0f}), std::invalid_argument);
  const std::vector<float> nan{0.0f, std::nanf("")};
  REQUIRE_THROWS_AS(nn::sampler({})(nan), std::invalid_argument);
}

TEST_CASE("llama: SmolLM2-135M-Instruct matches transformers' dequantized f32 model", "[llama][smollm]") {
  const std::string path = test::smollm_gguf().string();
  std::ifstream in(test::fixture_dir() / "llama_smollm2.json");
  REQUIRE(in);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  nn::llama<host> model(path, 256);
  const bpe::tokenizer tokenizer = nn::llama_tokenizer(model.file());
  const std::size_t vocab = std::size_t(model.config().vocab);
  int identical_continuations = 0;
  for (const auto& prompt : fixture["prompts"]) {
    const std::string name = prompt["name"];
    // Where transformers' GGUF tokenizer lacks SmolLM2's digit split, the references for
    // llama.cpp's (the model's own) tokens are the ones to meet.
    const bool agree = prompt["tokenizers_agree"];
    const std::string prefix = agree ? "" : "llama_cpp_";
    const std::vector<std::int32_t> expected_ids = prompt[agree ? "prompt_ids" : "llama_cpp_ids"];
    const std::vector<std::int32_t> ids = tokenizer.encode(prompt["text"].get<std::string>());
    CAPTURE(name);
    REQUIRE(ids == expected_ids);
    model.reset();
    std::span<const float> logits = model.forward(ids, true);
    const std::vector<double> nll = prompt[prefix + "nll"];
    double total = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      std::span<const float> row = logits.subspan(i * vocab, vocab);
      const double top = *std::max_element(row.begin(), row.end());
      double sum = 0;
      for (float l : row) sum += std::exp(double(l) - top);
      total += std::abs(top + std::log(sum) - double(row[std::size_t(ids[i + 1])]) - nll[i]);
    }
    const double mean_error = nll.empty() ? 0.0 : total / double(nll.size());
    std::span<const float> last = logits.subspan((ids.size() - 1) * vocab, vocab);
    const std::vector<std::int32_t> top5 = prompt[prefix + "top5_ids"];
    const std::int32_t argmax = nn::sampler::greedy(last);
    // A greedy continuation from the cache.
    const std::vector<std::int32_t> expected_greedy = prompt[prefix + "greedy_ids"];
    std::vector<std::int32_t> greedy{argmax};
    while (greedy.size() < expected_greedy.size())
      greedy.push_back(nn::sampler::greedy(model.forward(std::span<const std::int32_t>(&greedy.back(), 1))));
    std::size_t same = 0;
    while (same < greedy.size() && greedy[same] == expected_greedy[same]) ++same;
    identical_continuations += same == greedy.size();
    WARN(name << ": " << ids.size() << " tokens, mean |nll - transformers| " << mean_error << ", argmax "
              << (argmax == top5[0] ? "agrees" : "DIFFERS") << ", greedy continuation " << same << " of "
              << greedy.size() << " tokens identical");
    REQUIRE(mean_error <= 0.03);
    REQUIRE(argmax == top5[0]);
  }
  // "Most": a near tie between two tokens may go either way at some point of 24 steps.
  REQUIRE(identical_continuations * 2 > int(fixture["prompts"].size()));
}

TEST_CASE("llama: SmolLM2's logits from the cache equal those of the whole sequence at once", "[llama][smollm]") {
  nn::llama<host> model(test::smollm_gguf().string(), 64);
  const bpe::tokenizer tokenizer = nn::llama_tokenizer(model.file());
  const std::vector<std::int32_t> ids = tokenizer.encode("def fibonacci(n):\n    if n < 2:\n        return n\n");
  const std::size_t vocab = std::size_t(model.config().vocab);
  const std::span<const float> whole = model.forward(ids, true);
  const std::vector<float> at_once(whole.begin(), whole.end());
  model.reset();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::span<const float> step = model.forward(std::span<const std::int32_t>(&ids[i], 1));
    float largest = 0, difference = 0;
    for (std::size_t v = 0; v < vocab; ++v) {
      largest = std::max(largest, std::abs(at_once[i * vocab + v]));
      difference = std::max(difference, std::abs(step[v] - at_once[i * vocab + v]));
    }
    CAPTURE(i);
    // The same int8 activations and weights; only the order of f32 sums differs.
    REQUIRE(difference <= 1e-4f * largest);
    REQUIRE(nn::sampler::greedy(step) == nn::sampler::greedy(std::span<const float>(at_once).subspan(i * vocab, vocab)));
  }
}
