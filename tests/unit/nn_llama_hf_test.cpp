// nn::llama from a Hugging Face checkpoint (nn/llama_hf.hpp): a random 2-layer Llama in
// BF16 as save_pretrained writes it (tests/fixtures/llama_hf_tiny/, with transformers'
// logits in llama_hf_tiny.json, from make_llama_hf_fixture.py) against transformers; the
// same weights in F32, F16 and in two shards; and the checkpoints it refuses, by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <luminal/backends/host.hpp>
#include <luminal/io/safetensors_mapped.hpp>
#include <luminal/nn/llama.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixture_dir.hpp"
#include "gguf_writer.hpp"

using namespace luminal;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path tiny_dir() { return test::fixture_dir() / "llama_hf_tiny"; }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out);
}

/// One tensor to write: its dtype ("F32", "F16", "BF16"), shape and bytes.
struct tensor_bytes {
  std::string dtype;
  std::vector<index_t> shape;
  std::string bytes;
};

/// A safetensors file of `tensors`, in name order, the header padded to 8 bytes as the
/// writers pad it.
void write_safetensors(const fs::path& path, const std::map<std::string, tensor_bytes>& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int k = 0; k < 8; ++k) file[std::size_t(k)] = char((std::uint64_t(text.size()) >> (8 * k)) & 0xff);
  write_text(path, file + text + data);
}

/// The fixture's tensors, each converted to `dtype` ("BF16" keeps them as they are).
std::map<std::string, tensor_bytes> fixture_tensors(const std::string& dtype = "BF16") {
  const mapped_safetensors file = mapped_safetensors::open((tiny_dir() / "model.safetensors").string());
  std::map<std::string, tensor_bytes> out;
  for (const mapped_tensor& t : file.tensors()) {
    REQUIRE(t.dtype == stored_dtype::bf16);
    tensor_bytes& o = out[t.name];
    o.dtype = dtype;
    o.shape = t.shape;
    const std::size_t n = t.bytes.size() / 2;
    std::vector<float> values(n);
    dequantize_row(quant_format::bf16, t.bytes.data(), values.data(), n);
    for (float v : values) {
      if (dtype == "F32") {
        o.bytes.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const std::uint16_t h = dtype == "F16" ? f32_to_f16(v) : f32_to_bf16(v);
        o.bytes += char(h & 0xff), o.bytes += char(h >> 8);
      }
    }
  }
  return out;
}

/// A copy of the fixture's folder in `dir`, with config.json changed by `edit`.
template <class Edit>
std::string config_variant(const test::scratch_dir& dir, const std::string& name, Edit edit) {
  const fs::path folder = dir.path / name;
  fs::create_directories(folder);
  fs::copy_file(tiny_dir() / "model.safetensors", folder / "model.safetensors");
  nlohmann::json config = read_json(tiny_dir() / "config.json");
  edit(config);
  write_text(folder / "config.json", config.dump(2));
  return folder.string();
}

/// Every logit of `ids` from `model`, from a reset cache.
std::vector<float> all_logits(nn::llama<host>& model, const std::vector<std::int32_t>& ids) {
  model.reset();
  const std::span<const float> logits = model.forward(ids, true);
  return {logits.begin(), logits.end()};
}

}  // namespace

TEST_CASE("llama: a Hugging Face BF16 checkpoint computes transformers' logits", "[llama][llama_hf]") {
  const nlohmann::json fixture = read_json(test::fixture_dir() / "llama_hf_tiny.json");
  const std::vector<std::int32_t> ids = fixture["ids"];
  const std::vector<std::vector<float>> expected = fixture["logits"];
  nn::llama<host> model(tiny_dir().string());
  const nn::llama_config& c = model.config();
  REQUIRE(c.vocab == 40);
  REQUIRE(c.width == 64);
  REQUIRE(c.layers == 2);
  REQUIRE(c.heads == 4);
  REQUIRE(c.kv_heads == 2);
  REQUIRE(c.head_dim == 16);
  REQUIRE(c.hidden == 96);
  REQUIRE(c.context == 128);
  REQUIRE(c.rope_base == 5000.0f);
  REQUIRE(c.rms_eps == Approx(1e-5f));
  REQUIRE_FALSE(c.tied_output);
  REQUIRE(c.name == "llama_hf_tiny");
  const std::size_t vocab = std::size_t(c.vocab);
  const std::span<const float> whole = model.forward(ids, true);
  REQUIRE(whole.size() == ids.size() * vocab);
  float largest_error = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t v = 0; v < vocab; ++v) {
      const float want = expected[i][v], got = whole[i * vocab + v];
      largest_error = std::max(largest_error, std::abs(got - want));
      CAPTURE(i, v);
      REQUIRE(std::abs(got - want) <= 1e-3f + 1e-3f * std::abs(want));
    }
  WARN("largest |logit - transformers|: " << largest_error);
  // Token by token from the cache: the logits of the whole sequence at once.
  const std::vector<float> at_once(whole.begin(), whole.end());
  model.reset();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::span<const float> step = model.forward(std::span<const std::int32_t>(&ids[i], 1));
    for (std::size_t v = 0; v < vocab; ++v) REQUIRE(step[v] == Approx(at_once[i * vocab + v]).margin(1e-5));
  }
  // The config.json or model.safetensors path names the same folder.
  for (const char* file : {"config.json", "model.safetensors"}) {
    nn::llama<host> same((tiny_dir() / file).string());
    REQUIRE(all_logits(same, ids) == at_once);
  }
  // A Hugging Face model has no GGUF metadata to tokenize with.
  REQUIRE_THROWS_WITH(model.file(), Contains("is a Hugging Face checkpoint") && Contains("llama_hf_tiny"));
}

TEST_CASE("llama: the same Hugging Face weights in F32, F16 and two shards give the same logits", "[llama][llama_hf]") {
  const std::vector<std::int32_t> ids{3, 17, 0, 39, 8, 8, 21};
  nn::llama<host> reference(tiny_dir().string());
  const std::vector<float> expected = all_logits(reference, ids);
  test::scratch_dir dir;
  for (const char* dtype : {"F32", "F16"}) {
    const fs::path folder = dir.path / dtype;
    fs::create_directories(folder);
    fs::copy_file(tiny_dir() / "config.json", folder / "config.json");
    write_safetensors(folder / "model.safetensors", fixture_tensors(dtype));
    nn::llama<host> model(folder.string());
    const std::vector<float> got = all_logits(model, ids);
    CAPTURE(dtype);
    REQUIRE(got.size() == expected.size());
    // BF16 values are exact in F32; in F16 only the smallest lose bits.
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expected[i]).margin(std::string(dtype) == "F32" ? 1e-5 : 1e-3));
  }
  // Shards: layer 1 and the head in the second file, as model.safetensors.index.json says.
  const fs::path sharded = dir.path / "sharded";
  fs::create_directories(sharded);
  fs::copy_file(tiny_dir() / "config.json", sharded / "config.json");
  std::map<std::string, tensor_bytes> first, second;
  nlohmann::json index{{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (auto& [name, t] : fixture_tensors()) {
    const bool later = name.starts_with("model.layers.1.") || name.starts_with("lm_head") || name == "model.norm.weight";
    const std::string file = later ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    index["weight_map"][name] = file;
    (later ? second : first)[name] = std::move(t);
  }
  write_safetensors(sharded / "model-00001-of-00002.safetensors", first);
  write_safetensors(sharded / "model-00002-of-00002.safetensors", second);
  write_text(sharded / "model.safetensors.index.json", index.dump(2));
  nn::llama<host> model(sharded.string());
  REQUIRE(all_logits(model, ids) == expected);
}

TEST_CASE("llama: refuses a Hugging Face checkpoint it cannot run, naming the file and what is wrong",
          "[llama][llama_hf]") {
  test::scratch_dir dir;
  // A missing tensor.
  const fs::path missing = dir.path / "missing";
  fs::create_directories(missing);
  fs::copy_file(tiny_dir() / "config.json", missing / "config.json");
  auto tensors = fixture_tensors();
  tensors.erase("model.layers.1.mlp.up_proj.weight");
  write_safetensors(missing / "model.safetensors", tensors);
  REQUIRE_THROWS_AS(nn::llama<host>(missing.string()), nn::llama_error);
  REQUIRE_THROWS_WITH(nn::llama<host>(missing.string()),
                      Contains("missing/model.safetensors") && Contains("has no tensor 'model.layers.1.mlp.up_proj.weight'"));
  // A tensor of the wrong shape.
  tensors = fixture_tensors();
  tensors["model.norm.weight"].shape = {32, 2};
  write_safetensors(missing / "model.safetensors", tensors);
  REQUIRE_THROWS_WITH(nn::llama<host>(missing.string()),
                      Contains("tensor 'model.norm.weight' has shape [32, 2]") && Contains("need [64]"));
  // Another architecture, another rotation, a bias.
  const std::string mistral =
      config_variant(dir, "mistral", [](nlohmann::json& c) { c["architectures"] = {"MistralForCausalLM"}; });
  REQUIRE_THROWS_WITH(nn::llama<host>(mistral), Contains("mistral/config.json") && Contains("MistralForCausalLM") &&
                                                    Contains("runs LlamaForCausalLM models only"));
  const std::string llama3 =
      config_variant(dir, "llama3", [](nlohmann::json& c) { c["rope_parameters"]["rope_type"] = "llama3"; });
  REQUIRE_THROWS_WITH(nn::llama<host>(llama3), Contains("llama3/config.json") && Contains("rope_type 'llama3'") &&
                                                   Contains("default RoPE only"));
  const std::string scaled = config_variant(dir, "scaled", [](nlohmann::json& c) {
    c.erase("rope_parameters");
    c["rope_theta"] = 5000.0;
    c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  });
  REQUIRE_THROWS_WITH(nn::llama<host>(scaled), Contains("\"rope_scaling\" has rope_type 'linear'"));
  const std::string biased = config_variant(dir, "biased", [](nlohmann::json& c) { c["attention_bias"] = true; });
  REQUIRE_THROWS_WITH(nn::llama<host>(biased), Contains("\"attention_bias\" is true"));
  const std::string no_width = config_variant(dir, "no_width", [](nlohmann::json& c) { c.erase("hidden_size"); });
  REQUIRE_THROWS_WITH(nn::llama<host>(no_width), Contains("has no \"hidden_size\""));
  const std::string broken = config_variant(dir, "broken", [](nlohmann::json&) {});
  write_text(fs::path(broken) / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], ");
  REQUIRE_THROWS_WITH(nn::llama<host>(broken), Contains("broken/config.json") && Contains("JSON"));
  // An untied head without lm_head.weight.
  tensors = fixture_tensors();
  tensors.erase("lm_head.weight");
  write_safetensors(missing / "model.safetensors", tensors);
  REQUIRE_THROWS_WITH(nn::llama<host>(missing.string()), Contains("has no tensor 'lm_head.weight'"));
  // A folder without the files.
  fs::create_directories(dir.path / "empty");
  REQUIRE_THROWS_WITH(nn::llama<host>((dir.path / "empty").string()), Contains("has no config.json"));
  fs::copy_file(tiny_dir() / "config.json", dir.path / "empty" / "config.json");
  REQUIRE_THROWS_WITH(nn::llama<host>((dir.path / "empty").string()),
                      Contains("neither model.safetensors nor model.safetensors.index.json"));
}

TEST_CASE("safetensors: load_safetensors reads BF16 as bf16; mapped_safetensors reads it in place", "[llama_hf][io]") {
  const std::string path = (tiny_dir() / "model.safetensors").string();
  const tensor_store loaded = load_safetensors(path);
  REQUIRE(loaded.at("model.embed_tokens.weight").dtype == dtype_tag::bf16);
  REQUIRE(read_safetensors_header(path).tensors.front().dtype == dtype_tag::bf16);
  const mapped_safetensors file = mapped_safetensors::open(path);
  REQUIRE(file.tensors().size() == 21);
  const mapped_tensor& embedding = file.tensor("model.embed_tokens.weight");
  REQUIRE(embedding.dtype == stored_dtype::bf16);
  REQUIRE(embedding.shape == std::vector<index_t>{40, 64});
  REQUIRE(embedding.bytes.size() == 40 * 64 * 2);
  REQUIRE(std::equal(embedding.bytes.begin(), embedding.bytes.end(), loaded.at("model.embed_tokens.weight").data.begin()));
  REQUIRE(file.metadata().at("format") == "pt");
  REQUIRE_THROWS_WITH(file.tensor("nope"), Contains("has no tensor 'nope'"));
}
