// The storage formats of weights read from GGUF files (ggml's tensor types): full and half
// precision, and block-quantized formats in which a run of 32 elements along a row shares
// one scale (and, for Q4_1, one offset). A row of K elements is K / block_elements blocks
// laid end to end, so a [N, K] weight is N rows of row_bytes(format, K) bytes.
//
//     quant_format f = quant_format::q4_1;
//     std::size_t bytes = row_bytes(f, 576) * 1536;   // 18 blocks of 20 bytes per row
//
// Only facts of the formats live here; the block structs and their dequantization are in
// core/quant_blocks.hpp, the dot products in exec/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace luminal {

/// A weight's storage format. The values are ggml's type ids, as GGUF files store them.
enum class quant_format : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,   // 32 elements: f16 scale d, 16 bytes of 4-bit q; x = d * (q - 8)
  q4_1 = 3,   // 32 elements: f16 scale d, f16 minimum m, 16 bytes of 4-bit q; x = d * q + m
  q8_0 = 8,   // 32 elements: f16 scale d, 32 signed bytes q; x = d * q
  bf16 = 30,
};

/// Elements per block and bytes per block of a format (1 element per "block" for f32, f16
/// and bf16).
struct quant_format_info {
  std::string_view name;  // as ggml and llama.cpp spell it: "Q4_1", "F16", ...
  std::size_t block_elements;
  std::size_t block_bytes;
};

constexpr quant_format_info format_info(quant_format f) {
  switch (f) {
    case quant_format::f32: return {"F32", 1, 4};
    case quant_format::f16: return {"F16", 1, 2};
    case quant_format::q4_0: return {"Q4_0", 32, 18};
    case quant_format::q4_1: return {"Q4_1", 32, 20};
    case quant_format::q8_0: return {"Q8_0", 32, 34};
    case quant_format::bf16: return {"BF16", 1, 2};
  }
  return {"?", 0, 0};
}

/// The format of a ggml type id, or nothing if luminal does not read that type.
constexpr std::optional<quant_format> quant_format_of(std::uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return quant_format::f32;
    case 1: return quant_format::f16;
    case 2: return quant_format::q4_0;
    case 3: return quant_format::q4_1;
    case 8: return quant_format::q8_0;
    case 30: return quant_format::bf16;
    default: return std::nullopt;
  }
}

/// Bytes of one row of `elements` elements; `elements` must be a multiple of the format's
/// block size (callers check, with a message naming the tensor).
constexpr std::size_t row_bytes(quant_format f, std::size_t elements) {
  const quant_format_info info = format_info(f);
  return elements / info.block_elements * info.block_bytes;
}

}  // namespace luminal
