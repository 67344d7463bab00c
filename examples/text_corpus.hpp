// The text the character models train on (char_gpt, char_lstm): a file, or every file of a
// directory (by default Debian's fortunes, /usr/share/games/fortunes), the entropy of its
// byte frequencies (the loss of a model that sees no context), the windows a step trains
// on, and a character drawn from a model's logits.
//
//     const std::string text = examples::read_corpus("/usr/share/games/fortunes");
//     const double floor = examples::unigram_entropy(text);   // nats per character
//     examples::fill_windows(text, 32, 64, [&](std::size_t n) { return draw(rng, n); }, tokens, targets);
//     generated += examples::sample_byte(logits, n - 1, 0.8, rng);
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#include <xtensor/xarray.hpp>

#include "example_options.hpp"

namespace luminal::examples {

/// The corpus's bytes: a file, or every regular file of a directory (sorted, skipping
/// the fortune index files *.dat and symbolic links). The files' sizes are summed first:
/// a corpus of more than half this machine's memory (a stray disk image in the directory)
/// is refused naming its largest file, before anything is read.
inline std::string read_corpus(const std::string& where) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(where)) {
    for (const auto& e : fs::directory_iterator(where))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(where)) {
    files.push_back(where);
  }
  if (files.empty())
    throw std::runtime_error("no text at '" + where + "': install the corpus with 'apt-get install fortunes' or pass --corpus");
  std::uint64_t total = 0, largest = 0;
  fs::path largest_file;
  for (const auto& f : files) {
    std::error_code error;
    const std::uint64_t bytes = fs::file_size(f, error);
    if (error) continue;  // read below, where the error is reported
    total += bytes;
    if (bytes >= largest) largest = bytes, largest_file = f;
  }
  if (const std::uint64_t memory = physical_memory_bytes(); memory != 0 && total > memory / 2)
    throw std::runtime_error("the corpus at '" + where + "' holds " + allocation_error::describe_bytes(total) +
                             ", more than half this machine's memory (" + allocation_error::describe_bytes(memory) +
                             "); its largest file is '" + largest_file.string() + "' (" +
                             allocation_error::describe_bytes(largest) + ")");
  std::string text;
  text.reserve(std::size_t(total));
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read the corpus file '" + f.string() + "'");
    try {
      text.append(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure& e) {  // a read error (libstdc++ throws it from underflow)
      throw std::runtime_error("cannot read the corpus file '" + f.string() + "': " + e.what());
    }
  }
  if (text.size() < 10000) throw std::runtime_error("the corpus at '" + where + "' has only " + std::to_string(text.size()) + " bytes");
  return text;
}

/// Entropy (nats) of the byte frequencies of `text`: the loss of a model without context.
inline double unigram_entropy(std::string_view text) {
  std::array<double, 256> count{};
  for (unsigned char ch : text) count[ch] += 1;
  double h = 0;
  for (double n : count)
    if (n > 0) h -= n / double(text.size()) * std::log(n / double(text.size()));
  return h;
}

/// Fills tokens [batch, context] with windows of text and targets with the byte after each
/// token. Window b starts at draw(n), a position in [0, n) for n = text.size() - context:
/// each example draws its own way (char_lstm as its PyTorch twin does).
template <class Draw>
void fill_windows(std::string_view text, int batch, int context, Draw&& draw, xt::xarray<int>& tokens,
                  xt::xarray<int>& targets) {
  tokens = xt::xarray<int>::from_shape({std::size_t(batch), std::size_t(context)});
  targets = tokens;
  for (int b = 0; b < batch; ++b) {
    const std::size_t s = draw(text.size() - std::size_t(context));
    for (int t = 0; t < context; ++t) {
      tokens(b, t) = static_cast<unsigned char>(text[s + t]);
      targets(b, t) = static_cast<unsigned char>(text[s + t + 1]);
    }
  }
}

/// The last min(text.size(), context) bytes of text as token ids, [1, n]: the window a
/// model sees when it continues the text.
inline xt::xarray<int> last_window(const std::string& text, std::size_t context) {
  const std::size_t n = std::min(text.size(), context);
  xt::xarray<int> window = xt::xarray<int>::from_shape({1, n});
  for (std::size_t k = 0; k < n; ++k) window(0, k) = static_cast<unsigned char>(text[text.size() - n + k]);
  return window;
}

/// A byte drawn from softmax(logits(0, position, :) / temperature) (logits [1, n, vocab]).
template <class Logits>
char sample_byte(const Logits& logits, std::size_t position, double temperature, std::mt19937_64& rng) {
  const std::size_t vocab = logits.shape()[2];
  std::vector<double> weights(vocab);
  double top = -1e30;
  for (std::size_t v = 0; v < vocab; ++v) top = std::max(top, double(logits(0, position, v)));
  for (std::size_t v = 0; v < vocab; ++v) weights[v] = std::exp((logits(0, position, v) - top) / temperature);
  return char(std::discrete_distribution<int>(weights.begin(), weights.end())(rng));
}

/// Seconds since `start`, for progress lines.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace luminal::examples
