// libFuzzer harness: nn::hf_llama_weights on any Hugging Face folder made of the input must
// open the weights or throw llama_error or checkpoint_error: no other exception, crash, read
// out of bounds, undefined behaviour, or time or memory beyond a small multiple of the input.
//
// The input is split at the first "\n--st--\n": the bytes before it are config.json, those
// after it model.safetensors. An input without the separator is config.json alone, a folder
// without weights that must be refused. What opens is checked against its config (sizes
// positive, heads shared evenly, even heads) and walked whole: every matrix and norm weight
// the config implies, of a float format and the size its shape needs, touched byte by byte.
//
//     ./fuzz_llama_hf -max_len=16384 corpus/llama_hf
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <luminal/nn/llama_hf.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_input_file.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view separator = "\n--st--\n";

unsigned sum_bytes(std::span<const std::byte> bytes) {
  unsigned sum = 0;
  for (std::byte b : bytes) sum += std::to_integer<unsigned>(b);  // every byte readable
  return sum;
}

std::size_t element_bytes(luminal::quant_format f) {
  switch (f) {
    case luminal::quant_format::f32: return 4;
    case luminal::quant_format::f16: case luminal::quant_format::bf16: return 2;
    default: std::abort();  // the loader hands out float formats only
  }
}

unsigned walk_matrix(const luminal::nn::llama_weights& w, const std::string& name, std::int64_t rows, std::int64_t cols) {
  const luminal::nn::llama_matrix m = w.matrix(name);
  check(m.shape[0] == rows && m.shape[1] == cols);
  check(m.bytes.size() == std::size_t(rows) * std::size_t(cols) * element_bytes(m.format));
  check(reinterpret_cast<std::uintptr_t>(m.bytes.data()) % element_bytes(m.format) == 0);  // as kernels read it
  return sum_bytes(m.bytes);
}

unsigned walk_vector(const luminal::nn::llama_weights& w, const std::string& name, std::int64_t size) {
  const luminal::nn::llama_vector v = w.vector(name);
  check(v.length == size);
  check(v.bytes.size() == std::size_t(size) * element_bytes(v.format));
  check(reinterpret_cast<std::uintptr_t>(v.bytes.data()) % element_bytes(v.format) == 0);
  return sum_bytes(v.bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& folder = fuzz::own_folder();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find(separator);
  const std::size_t config_size = split == std::string_view::npos ? size : split;
  fuzz::write_file(folder / "config.json", data, config_size);
  const std::filesystem::path weights = folder / "model.safetensors";
  if (split == std::string_view::npos) {
    std::filesystem::remove(weights);
  } else {
    const std::size_t begin = split + separator.size();
    fuzz::write_file(weights, data + begin, size - begin);
  }

  std::optional<luminal::nn::hf_llama_weights> opened;
  try {
    opened.emplace(folder.string());
  } catch (const luminal::nn::llama_error&) {
    return 0;  // refused: the expected outcome for most inputs
  } catch (const luminal::checkpoint_error&) {
    check(split != std::string_view::npos);  // a corrupt safetensors file, which must exist
    return 0;
  } catch (const std::exception&) {
    std::abort();  // any other exception escapes the loader's contract
  }
  check(split != std::string_view::npos);  // no weights cannot open

  const luminal::nn::hf_llama_weights& w = *opened;
  const luminal::nn::llama_config& c = w.config();
  check(c.vocab > 0 && c.width > 0 && c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.kv_heads > 0);
  check(c.heads % c.kv_heads == 0 && c.head_dim > 0 && c.head_dim % 2 == 0);
  check(c.rope_base > 0 && c.rms_eps >= 0);
  std::int64_t q_rows = 0, kv_rows = 0;
  check(!__builtin_mul_overflow(c.heads, c.head_dim, &q_rows) && !__builtin_mul_overflow(c.kv_heads, c.head_dim, &kv_rows));

  unsigned sum = walk_matrix(w, "token_embd.weight", c.vocab, c.width);
  if (!c.tied_output) sum += walk_matrix(w, "output.weight", c.vocab, c.width);
  sum += walk_vector(w, "output_norm.weight", c.width);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    sum += walk_matrix(w, p + "attn_q.weight", q_rows, c.width);
    sum += walk_matrix(w, p + "attn_k.weight", kv_rows, c.width);
    sum += walk_matrix(w, p + "attn_v.weight", kv_rows, c.width);
    sum += walk_matrix(w, p + "attn_output.weight", c.width, q_rows);
    sum += walk_matrix(w, p + "ffn_gate.weight", c.hidden, c.width);
    sum += walk_matrix(w, p + "ffn_up.weight", c.hidden, c.width);
    sum += walk_matrix(w, p + "ffn_down.weight", c.width, c.hidden);
    sum += walk_vector(w, p + "attn_norm.weight", c.width);
    sum += walk_vector(w, p + "ffn_norm.weight", c.width);
  }
  // A name the config does not imply is refused by the loader's own error type.
  try {
    (void)w.matrix("blk." + std::to_string(c.layers) + ".attn_q.weight");
    std::abort();
  } catch (const luminal::nn::llama_error&) {
  }
  volatile unsigned keep = sum;  // the reads above may not be optimized away
  (void)keep;
  return 0;
}
