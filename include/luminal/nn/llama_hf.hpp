// A Llama in Hugging Face's format, for nn::llama: a folder with config.json and
// model.safetensors (or the shards that model.safetensors.index.json lists), as
// save_pretrained writes it, weights in F32, F16 or BF16. The weights are read in place from
// the files' memory maps, except the query and key projections: Hugging Face rotates the
// pairs (i, i + D/2) of each head, GGUF and the graph the pairs (2i, 2i + 1), so their rows
// are copied once into GGUF's order (GGUF row h*D + 2i + j is Hugging Face row
// h*D + j*D/2 + i). Tensors are answered by GGUF's names:
//
//     nn::hf_llama_weights w("SmolLM2-135M-Instruct");                // the folder
//     nn::llama_matrix q = w.matrix("blk.0.attn_q.weight");         // model.layers.0.self_attn.q_proj.weight
//     auto source = nn::open_llama_weights("model.gguf");             // a file: GGUF
//
// config.json must name LlamaForCausalLM among its architectures, and use the default RoPE
// (rope_scaling or rope_parameters of another rope_type, Llama 3.1's included, is refused),
// SiLU, and no biases; every refusal names the file and the key or tensor.
#pragma once
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../io/file_system.hpp"
#include "../io/mapped_file.hpp"
#include "../io/safetensors_mapped.hpp"
#include "llama_weights.hpp"

namespace luminal::nn {

namespace detail::llama_hf {

/// A scalar of config.json: its kind, and for a number or a string its text.
struct json_scalar {
  char kind = 0;  // 'n' number, 's' string, 't' true, 'f' false, 'z' null, '[' array, '{' object
  std::string text;
};
/// A top-level value: a scalar, an array (its string elements) or an object (its members'
/// scalars; deeper values are skipped).
struct json_value : json_scalar {
  std::vector<std::string> strings;
  std::vector<std::pair<std::string, json_scalar>> members;
  const json_scalar* member(std::string_view key) const {
    for (const auto& [k, v] : members)
      if (k == key && v.kind != 'z') return &v;
    return nullptr;
  }
};

inline json_scalar read_scalar(luminal::detail::safetensors::json_scanner& scan) {
  const char c = scan.peek_value();
  if (c == '"') return {'s', scan.read_string()};
  if (c == '-' || (c >= '0' && c <= '9')) return {'n', std::string(scan.read_number())};
  scan.skip_value();
  return {c == 'n' ? 'z' : c, {}};
}

/// The members of the JSON object in `path`. Throws llama_error naming the file.
inline std::map<std::string, json_value, std::less<>> read_json_object(const std::string& path) {
  namespace st = luminal::detail::safetensors;
  const mapped_file file = mapped_file::open(path);
  const std::string_view text(reinterpret_cast<const char*>(file.bytes().data()), file.size());
  std::map<std::string, json_value, std::less<>> out;
  try {
    if (st::invalid_utf8_at(text) != std::string_view::npos) st::fail(path, "is not UTF-8");
    st::json_scanner scan(text, path);
    scan.open('{');
    if (!scan.close_if_empty()) do {
        std::string key = scan.read_key();
        json_value v;
        const char c = scan.peek_value();
        if (c == '[' || c == '{') {
          scan.open(c);
          v.kind = c;
          if (!scan.close_if_empty()) do {
              std::string member = c == '{' ? scan.read_key() : std::string();
              json_scalar s = read_scalar(scan);
              if (c == '{') v.members.emplace_back(std::move(member), std::move(s));
              else if (s.kind == 's') v.strings.push_back(std::move(s.text));
            } while (scan.next_member());
        } else {
          static_cast<json_scalar&>(v) = read_scalar(scan);
        }
        out[std::move(key)] = std::move(v);
      } while (scan.next_member());
    if (!scan.at_end()) scan.syntax_error("unexpected " + scan.describe_next() + " after the closing '}'");
  } catch (const checkpoint_error& e) {
    throw llama_error("luminal: " + path + ": is not the JSON object it should be (" + e.what() + ")");
  }
  return out;
}

/// Hugging Face's name of a GGUF tensor name of a Llama ("blk.3.ffn_up.weight" ->
/// "model.layers.3.mlp.up_proj.weight"), or "" for another name.
inline std::string hf_name(std::string_view gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  if (!gguf.starts_with("blk.")) return "";
  const std::size_t dot = gguf.find('.', 4);
  if (dot == std::string_view::npos) return "";
  static constexpr std::pair<std::string_view, std::string_view> parts[] = {
      {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},    {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"}};
  for (auto [from, to] : parts)
    if (gguf.substr(dot + 1) == from) return "model.layers." + std::string(gguf.substr(4, dot - 4)) + "." + std::string(to);
  return "";
}

}  // namespace detail::llama_hf

/// A Hugging Face Llama checkpoint folder, read in place (the file comment above).
class hf_llama_weights final : public llama_weights {
 public:
  /// Reads `folder`/config.json and opens the weights; throws llama_error naming the file and
  /// the key or tensor that is missing or wrong (checkpoint_error for a corrupt safetensors file).
  explicit hf_llama_weights(const std::string& folder) {
    namespace files = luminal::detail::files;
    path_ = folder;
    config_path_ = files::join(folder, "config.json");
    if (files::inspect(config_path_).kind != files::entry_kind::regular)
      fail("has no config.json; a Hugging Face model folder holds config.json and model.safetensors");
    read_config();
    open_shards();
    check_and_place();
  }

  llama_matrix matrix(const std::string& name) const override {
    if (auto it = matrices_.find(name); it != matrices_.end()) return it->second;
    fail("has no weight matrix '" + name + "' (" + detail::llama_hf::hf_name(name) + ")");
  }
  llama_vector vector(const std::string& name) const override {
    if (auto it = vectors_.find(name); it != vectors_.end()) return it->second;
    fail("has no norm weight '" + name + "' (" + detail::llama_hf::hf_name(name) + ")");
  }

 private:
  std::string config_path_, weights_path_;  // weights_path_: model.safetensors or its index
  std::vector<mapped_safetensors> shards_;
  std::map<std::string, llama_matrix, std::less<>> matrices_;
  std::map<std::string, llama_vector, std::less<>> vectors_;
  std::vector<std::vector<std::byte>> copies_;  // reordered query and key rows, realigned tensors

  [[noreturn]] void fail_in(const std::string& file, const std::string& what) const {
    throw llama_error("luminal: " + file + ": " + what);
  }

  void read_config() {
    using detail::llama_hf::json_scalar;
    const auto json = detail::llama_hf::read_json_object(config_path_);
    auto bad = [&](const std::string& what) { fail_in(config_path_, what); };
    auto find = [&](std::string_view key) -> const detail::llama_hf::json_value* {
      auto it = json.find(key);
      return it == json.end() || it->second.kind == 'z' ? nullptr : &it->second;
    };
    auto number = [&](std::string_view key, const json_scalar* v, double fallback) {
      if (!v) return fallback;
      double x = 0;
      const auto [end, ec] = std::from_chars(v->text.data(), v->text.data() + v->text.size(), x);
      if (v->kind != 'n' || ec != std::errc() || end != v->text.data() + v->text.size())
        bad("\"" + std::string(key) + "\" is not a number");
      return x;
    };
    auto integer = [&](std::string_view key, std::int64_t fallback, bool required) {
      const json_scalar* v = find(key);
      if (!v && required) bad("has no \"" + std::string(key) + "\"");
      const double x = number(key, v, double(fallback));
      if (!(x >= 0 && x <= 1e15) || x != double(std::int64_t(x)))
        bad("\"" + std::string(key) + "\" is " + (v ? v->text : std::string()) + ", not a non-negative integer");
      return std::int64_t(x);
    };
    auto is_true = [&](std::string_view key) {
      const json_scalar* v = find(key);
      if (v && v->kind != 't' && v->kind != 'f') bad("\"" + std::string(key) + "\" is not true or false");
      return v && v->kind == 't';
    };
    const auto* architectures = find("architectures");
    bool causal_llama = false;
    if (architectures)
      for (const std::string& a : architectures->strings) causal_llama |= a == "LlamaForCausalLM";
    if (!causal_llama) {
      std::string named;
      if (architectures)
        for (const std::string& a : architectures->strings) named += (named.empty() ? "" : ", ") + a;
      bad("\"architectures\" is [" + named + "]; luminal's Llama runs LlamaForCausalLM models only");
    }
    if (const auto* act = find("hidden_act"); act && act->text != "silu")
      bad("\"hidden_act\" is '" + act->text + "'; luminal's Llama runs SiLU only");
    for (const char* bias : {"attention_bias", "mlp_bias"})
      if (is_true(bias)) bad("\"" + std::string(bias) + "\" is true; luminal's Llama has no biases");
    llama_config& c = config_;
    c.name = luminal::detail::files::file_name(path_.ends_with('/') ? path_.substr(0, path_.size() - 1) : path_);
    c.width = integer("hidden_size", 0, true);
    c.hidden = integer("intermediate_size", 0, true);
    c.layers = integer("num_hidden_layers", 0, true);
    c.heads = integer("num_attention_heads", 0, true);
    c.kv_heads = integer("num_key_value_heads", c.heads, false);
    c.vocab = integer("vocab_size", 0, false);
    c.context = integer("max_position_embeddings", 0, false);
    c.rms_eps = float(number("rms_norm_eps", find("rms_norm_eps"), 1e-6));
    double theta = number("rope_theta", find("rope_theta"), 10000.0);
    // transformers 5 keeps the RoPE settings in rope_parameters, earlier versions the
    // scaling in rope_scaling: anything but the default rotation is refused.
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      const auto* rope = find(key);
      if (!rope) continue;
      if (rope->kind != '{') bad("\"" + std::string(key) + "\" is not an object");
      const json_scalar* type = rope->member("rope_type");
      if (!type) type = rope->member("type");
      if (type && type->text != "default")
        bad("\"" + std::string(key) + "\" has rope_type '" + type->text +
            "'; luminal's Llama runs the default RoPE only (no scaling)");
      theta = number("rope_theta", rope->member("rope_theta"), theta);
      if (number("partial_rotary_factor", rope->member("partial_rotary_factor"), 1.0) != 1.0)
        bad("\"" + std::string(key) + "\" rotates part of each head; luminal rotates them all");
    }
    c.rope_base = float(theta);
    if (c.width <= 0 || c.hidden <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0)
      bad("has a zero size among hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and "
          "num_key_value_heads");
    if (c.heads % c.kv_heads != 0)
      bad(std::to_string(c.heads) + " query heads cannot share " + std::to_string(c.kv_heads) + " key/value heads");
    if (!find("head_dim") && c.width % c.heads != 0)
      bad("has no \"head_dim\", and hidden_size " + std::to_string(c.width) + " is not a multiple of " +
          std::to_string(c.heads) + " heads");
    c.head_dim = integer("head_dim", c.width / c.heads, false);
    if (c.head_dim <= 0 || c.head_dim % 2 != 0)
      bad("has heads of size " + std::to_string(c.head_dim) + "; RoPE needs an even, positive size");
    if (c.head_dim > std::numeric_limits<std::int64_t>::max() / c.heads)  // the query rows, heads * head_dim
      bad("has " + std::to_string(c.heads) + " heads of size " + std::to_string(c.head_dim) + ", too many rows to count");
    if (!(c.rope_base > 0) || !(c.rms_eps >= 0)) bad("has a bad rope_theta or rms_norm_eps");
    c.tied_output = is_true("tie_word_embeddings");
  }

  /// model.safetensors, or every shard that model.safetensors.index.json maps a tensor to.
  void open_shards() {
    namespace files = luminal::detail::files;
    const std::string index = files::join(path_, "model.safetensors.index.json");
    weights_path_ = files::join(path_, "model.safetensors");
    if (files::inspect(weights_path_).kind == files::entry_kind::regular) {
      shards_.push_back(mapped_safetensors::open(weights_path_));
      return;
    }
    if (files::inspect(index).kind != files::entry_kind::regular)
      fail("has neither model.safetensors nor model.safetensors.index.json");
    weights_path_ = index;
    const auto json = detail::llama_hf::read_json_object(index);
    auto map = json.find("weight_map");
    if (map == json.end() || map->second.kind != '{') fail_in(index, "has no \"weight_map\" object");
    std::vector<std::string> names;
    for (const auto& [tensor, shard] : map->second.members) {
      if (shard.kind != 's' || shard.text.empty() || shard.text.find_first_of(files::separators) != std::string::npos ||
          shard.text == "..")
        fail_in(index, "maps '" + tensor + "' to '" + shard.text + "', which is not a file name in the folder");
      if (std::find(names.begin(), names.end(), shard.text) == names.end()) names.push_back(shard.text);
    }
    for (const std::string& name : names) shards_.push_back(mapped_safetensors::open(files::join(path_, name)));
  }

  const mapped_tensor* find(std::string_view name) const {
    for (const mapped_safetensors& shard : shards_)
      if (const mapped_tensor* t = shard.find(name)) return t;
    return nullptr;
  }

  /// The tensor `hf`, checked to be a float tensor of `shape`, in memory its kernels may read.
  std::pair<quant_format, std::span<const std::byte>> tensor(const std::string& hf, std::vector<index_t> shape) {
    const mapped_tensor* t = find(hf);
    if (!t) fail_in(weights_path_, "has no tensor '" + hf + "', which the Llama of config.json needs");
    auto text = [](const std::vector<index_t>& s) { return luminal::detail::safetensors::format_shape(s); };
    if (t->shape != shape)
      fail_in(weights_path_, "tensor '" + hf + "' has shape " + text(t->shape) + "; config.json's sizes need " + text(shape));
    const std::optional<quant_format> format = quant_format_of(t->dtype);
    if (!format)
      fail_in(weights_path_, "tensor '" + hf + "' has dtype " + std::string(stored_dtype_name(t->dtype)) +
                                 "; luminal's Llama reads F32, F16 and BF16 weights");
    std::span<const std::byte> bytes = t->bytes;
    // safetensors aligns nothing; a tensor at an odd offset is read from a copy.
    if (reinterpret_cast<std::uintptr_t>(bytes.data()) % format_info(*format).block_bytes != 0)
      bytes = copies_.emplace_back(bytes.begin(), bytes.end());
    return {*format, bytes};
  }

  /// Checks every tensor the model needs and keeps its view, reordering queries and keys.
  void check_and_place() {
    llama_config& c = config_;
    const mapped_tensor* embedding = find("model.embed_tokens.weight");
    if (embedding && embedding->shape.size() == 2 && c.vocab == 0) c.vocab = embedding->shape[0];
    if (!c.tied_output && !find("lm_head.weight"))
      fail_in(weights_path_, "has no tensor 'lm_head.weight', and config.json's tie_word_embeddings is not true");
    const index_t q_rows = c.heads * c.head_dim, kv_rows = c.kv_heads * c.head_dim;
    auto add_matrix = [&](const std::string& gguf, index_t rows, index_t cols, index_t heads = 0) {
      auto [format, bytes] = tensor(detail::llama_hf::hf_name(gguf), {rows, cols});
      if (heads > 0) bytes = to_interleaved_pairs(bytes, heads);
      matrices_[gguf] = llama_matrix{format, bytes, {rows, cols}};
    };
    auto add_vector = [&](const std::string& gguf) {
      auto [format, bytes] = tensor(detail::llama_hf::hf_name(gguf), {c.width});
      vectors_[gguf] = llama_vector{format, bytes, c.width};
    };
    add_matrix("token_embd.weight", c.vocab, c.width);
    if (c.vocab == 0)  // vocab_size 0 or absent, and an embedding of no rows
      fail_in(weights_path_, "tensor 'model.embed_tokens.weight' has no rows: a vocabulary of no tokens");
    if (!c.tied_output) add_matrix("output.weight", c.vocab, c.width);
    add_vector("output_norm.weight");
    for (std::int64_t l = 0; l < c.layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      add_matrix(p + "attn_q.weight", q_rows, c.width, c.heads);
      add_matrix(p + "attn_k.weight", kv_rows, c.width, c.kv_heads);
      add_matrix(p + "attn_v.weight", kv_rows, c.width);
      add_matrix(p + "attn_output.weight", c.width, q_rows);
      add_matrix(p + "ffn_gate.weight", c.hidden, c.width);
      add_matrix(p + "ffn_up.weight", c.hidden, c.width);
      add_matrix(p + "ffn_down.weight", c.width, c.hidden);
      add_vector(p + "attn_norm.weight");
      add_vector(p + "ffn_norm.weight");
    }
  }

  /// A copy of a query or key projection with its rows in GGUF's order: row h*D + 2i + j
  /// from row h*D + j*D/2 + i.
  std::span<const std::byte> to_interleaved_pairs(std::span<const std::byte> rows, index_t heads) {
    const std::size_t d = std::size_t(config_.head_dim), half = d / 2;
    const std::size_t row = rows.size() / (std::size_t(heads) * d);
    std::vector<std::byte>& out = copies_.emplace_back(rows.size());
    for (std::size_t h = 0; h < std::size_t(heads); ++h)
      for (std::size_t i = 0; i < half; ++i)
        for (std::size_t j = 0; j < 2; ++j)
          std::copy_n(rows.data() + (h * d + j * half + i) * row, row, out.data() + (h * d + 2 * i + j) * row);
    return out;
  }
};

/// The weights at `path`: a folder, a config.json or a .safetensors file is a Hugging Face
/// checkpoint (the folder that holds it), anything else a GGUF file. Throws llama_error,
/// gguf_error or checkpoint_error naming the file and what is wrong.
inline std::unique_ptr<llama_weights> open_llama_weights(const std::string& path) {
  namespace files = luminal::detail::files;
  if (files::inspect(path).kind == files::entry_kind::directory) return std::make_unique<hf_llama_weights>(path);
  if (path.ends_with(".json") || path.ends_with(".safetensors"))
    return std::make_unique<hf_llama_weights>(files::parent_directory(path));
  return std::make_unique<gguf_llama_weights>(path);
}

}  // namespace luminal::nn
