// Where nn::llama (nn/llama.hpp) finds a model's sizes and weights: a GGUF file, as llama.cpp
// writes it, or a Hugging Face checkpoint (a folder with config.json and model.safetensors,
// or shards listed in model.safetensors.index.json; nn/llama_hf.hpp). Both answer in GGUF's
// names ("blk.3.attn_q.weight") and layout, and the weights stay where the source holds them
// (the file's memory map) but for Hugging Face's query and key matrices, whose rows are
// reordered once into the pairs the graph rotates.
//
//     nn::gguf_llama_weights w("SmolLM2-135M-Instruct.Q4_1.gguf");   // or nn::hf_llama_weights("folder")
//     std::int64_t layers = w.config().layers;
//     nn::llama_matrix q = w.matrix("blk.0.attn_q.weight");    // format, bytes, {rows, cols}
//
// open_llama_weights(path) (nn/llama_hf.hpp) picks the source from the path.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../core/dtype.hpp"
#include "../core/quant_format.hpp"
#include "../io/gguf.hpp"

namespace luminal::nn {

/// A Llama file that luminal cannot run: another architecture, missing or inconsistent
/// sizes, a missing tensor, a prompt past the context. The message names the file.
class llama_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The sizes and constants of a Llama model, from a GGUF file's metadata or a Hugging Face
/// config.json.
struct llama_config {
  std::string name;                 // general.name, or the Hugging Face folder's name
  std::int64_t vocab = 0, width = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, hidden = 0, context = 0;
  float rope_base = 10000.0f, rms_eps = 1e-5f;
  bool tied_output = false;         // no output.weight: the head reads token_embd.weight

  /// Reads `llama.*` from the metadata and checks it against the tensors. Throws
  /// llama_error naming the file and what is wrong.
  static llama_config from_gguf(const gguf_file& file);
};

/// A weight matrix [rows, cols] as its source holds it: rows of row_bytes(format, cols).
struct llama_matrix {
  quant_format format{};
  std::span<const std::byte> bytes;
  std::array<index_t, 2> shape{};
};
/// A norm's weight [length] as its source holds it.
struct llama_vector {
  quant_format format{};
  std::span<const std::byte> bytes;
  index_t length = 0;
};

/// A model's configuration and weights, by GGUF's tensor names. The views stay valid while
/// the source lives.
class llama_weights {
 public:
  virtual ~llama_weights() = default;
  /// The file or folder, for messages.
  const std::string& path() const { return path_; }
  const llama_config& config() const { return config_; }
  /// The matrix of that GGUF name; throws llama_error naming the file and the tensor when it
  /// is missing or not a matrix of a format the kernels read.
  virtual llama_matrix matrix(const std::string& name) const = 0;
  /// The norm weight of that GGUF name, likewise.
  virtual llama_vector vector(const std::string& name) const = 0;
  /// The GGUF file (with its tokenizer and chat template), or null for another source.
  virtual const gguf_file* gguf() const { return nullptr; }

 protected:
  std::string path_;
  llama_config config_;
  [[noreturn]] void fail(const std::string& what) const { throw llama_error("luminal: " + path_ + ": " + what); }
};

/// The weights of a GGUF file, read in place from its memory map.
class gguf_llama_weights final : public llama_weights {
 public:
  explicit gguf_llama_weights(const std::string& path) : file_(gguf_file::open(path)) {
    path_ = file_.path();
    config_ = llama_config::from_gguf(file_);
  }
  llama_matrix matrix(const std::string& name) const override {
    const gguf_tensor_info& t = file_.tensor(name);
    if (t.n_dims != 2) fail("tensor '" + name + "' has " + std::to_string(t.n_dims) + " dimensions, not 2");
    return {file_.tensor_format(t), t.data, {index_t(t.ne[1]), index_t(t.ne[0])}};
  }
  llama_vector vector(const std::string& name) const override {
    const gguf_tensor_info& t = file_.tensor(name);
    if (t.n_dims != 1) fail("tensor '" + name + "' has " + std::to_string(t.n_dims) + " dimensions, not 1");
    return {file_.tensor_format(t), t.data, index_t(t.ne[0])};
  }
  const gguf_file* gguf() const override { return &file_; }

 private:
  gguf_file file_;
};

inline llama_config llama_config::from_gguf(const gguf_file& file) {
  auto fail = [&](const std::string& what) -> void { throw llama_error("luminal: " + file.path() + ": " + what); };
  const std::string_view arch = file.get_string("general.architecture");
  if (arch != "llama")
    fail("general.architecture is '" + std::string(arch) + "'; luminal's Llama runs 'llama' models only");
  llama_config c;
  if (const gguf_value* v = file.find("general.name")) c.name = std::string(v->as_string());
  c.layers = file.get_u32("llama.block_count");
  c.width = file.get_u32("llama.embedding_length");
  c.hidden = file.get_u32("llama.feed_forward_length");
  c.heads = file.get_u32("llama.attention.head_count");
  c.kv_heads = file.contains("llama.attention.head_count_kv") ? file.get_u32("llama.attention.head_count_kv") : c.heads;
  c.context = file.contains("llama.context_length") ? file.get_u32("llama.context_length") : 0;
  if (file.contains("llama.rope.freq_base")) c.rope_base = file.get_f32("llama.rope.freq_base");
  c.rms_eps = file.get_f32("llama.attention.layer_norm_rms_epsilon");
  if (c.layers <= 0 || c.width <= 0 || c.hidden <= 0 || c.heads <= 0 || c.kv_heads <= 0)
    fail("has a zero size among llama.block_count, embedding_length, feed_forward_length, head_count");
  if (c.heads % c.kv_heads != 0)
    fail(std::to_string(c.heads) + " query heads cannot share " + std::to_string(c.kv_heads) + " key/value heads");
  const gguf_tensor_info& q = file.tensor("blk.0.attn_q.weight");
  if (q.n_dims != 2 || std::int64_t(q.ne[0]) != c.width || std::int64_t(q.ne[1]) % c.heads != 0)
    fail("blk.0.attn_q.weight does not fit " + std::to_string(c.heads) + " heads over a width of " +
         std::to_string(c.width));
  c.head_dim = std::int64_t(q.ne[1]) / c.heads;
  if (c.head_dim % 2 != 0) fail("has heads of an odd size (" + std::to_string(c.head_dim) + "); RoPE needs pairs");
  if (file.contains("llama.rope.dimension_count") &&
      std::int64_t(file.get_u32("llama.rope.dimension_count")) != c.head_dim)
    fail("rotates " + std::to_string(file.get_u32("llama.rope.dimension_count")) + " of each head's " +
         std::to_string(c.head_dim) + " dimensions; luminal rotates them all");
  if (!(c.rope_base > 0) || !(c.rms_eps >= 0)) fail("has a bad llama.rope.freq_base or RMS epsilon");
  const gguf_tensor_info& embedding = file.tensor("token_embd.weight");
  if (embedding.n_dims != 2 || std::int64_t(embedding.ne[0]) != c.width)
    fail("token_embd.weight should have rows of " + std::to_string(c.width));
  c.vocab = std::int64_t(embedding.ne[1]);
  if (file.contains("llama.vocab_size") && std::int64_t(file.get_u32("llama.vocab_size")) != c.vocab)
    fail("llama.vocab_size says " + std::to_string(file.get_u32("llama.vocab_size")) + " but token_embd.weight has " +
         std::to_string(c.vocab) + " rows");
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace luminal::nn
