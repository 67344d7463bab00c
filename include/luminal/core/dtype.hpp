// Element types. A node's element type is an ordinary C++ type carried in its type.
#pragma once
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "half_types.hpp"

namespace luminal {

using f32 = float;
using f64 = double;
using i32 = std::int32_t;
using boolean = bool;

/// The element types a tensor may hold. bf16 and f16 (core/half_types.hpp) are stored in
/// 16 bits and computed in f32, each op's result rounded to them, as PyTorch does.
template <class T>
concept element_type = std::is_same_v<T, f32> || std::is_same_v<T, f64> || std::is_same_v<T, i32> ||
                       std::is_same_v<T, boolean> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

template <class T>
concept floating_element =
    std::is_same_v<T, f32> || std::is_same_v<T, f64> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

/// The element type of a weight stored in one of ggml's formats (core/quant_format.hpp:
/// Q4_0, Q4_1, Q8_0, F16, BF16 or F32), the format named when the data is bound
/// (program::bind_quantized). Only ops that read blocks take it (`linear`, `gather`, in
/// ops/quantized.hpp): one compiled program runs every quantization of a model.
struct quantized {};

/// What a leaf may hold: an element type, or quantized weights.
template <class T>
concept storage_type = element_type<T> || std::is_same_v<T, quantized>;

template <storage_type T>
constexpr std::string_view dtype_name() {
  if constexpr (std::is_same_v<T, f32>) return "f32";
  else if constexpr (std::is_same_v<T, f64>) return "f64";
  else if constexpr (std::is_same_v<T, i32>) return "i32";
  else if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, f16>) return "f16";
  else if constexpr (std::is_same_v<T, quantized>) return "quantized";
  else return "bool";
}

/// Runtime tag for the API edge (binding buffers whose type is only known at run time).
enum class dtype_tag { f32, f64, i32, boolean, quantized, bf16, f16 };

template <storage_type T>
constexpr dtype_tag dtype_of() {
  if constexpr (std::is_same_v<T, f32>) return dtype_tag::f32;
  else if constexpr (std::is_same_v<T, f64>) return dtype_tag::f64;
  else if constexpr (std::is_same_v<T, i32>) return dtype_tag::i32;
  else if constexpr (std::is_same_v<T, bf16>) return dtype_tag::bf16;
  else if constexpr (std::is_same_v<T, f16>) return dtype_tag::f16;
  else if constexpr (std::is_same_v<T, quantized>) return dtype_tag::quantized;
  else return dtype_tag::boolean;
}

constexpr std::string_view dtype_name(dtype_tag tag) {
  switch (tag) {
    case dtype_tag::f32: return "f32";
    case dtype_tag::f64: return "f64";
    case dtype_tag::i32: return "i32";
    case dtype_tag::bf16: return "bf16";
    case dtype_tag::f16: return "f16";
    case dtype_tag::quantized: return "quantized";
    default: return "bool";
  }
}

/// Index type for element offsets: 64-bit so that >2^31-element tensors work.
using index_t = std::int64_t;

}  // namespace luminal

#define LUMINAL_INLINE LUMINAL_HD inline
/// Always inlined. On a view's coordinate map (to_child, from_child, inside), so that the
/// kernel's loop can be strength-reduced: left to GCC's inliner, a large kernel (several
/// paths through one expression) can exhaust its budget and call the map once per element.
#if defined(__CUDACC__)
#define LUMINAL_ALWAYS_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define LUMINAL_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define LUMINAL_ALWAYS_INLINE inline
#endif
#define LUMINAL_COORDINATE_MAP LUMINAL_ALWAYS_INLINE
/// Always inlined, on a lambda (after its parameter list): a kernel's row body, so that
/// it is compiled with the kernel's own vector width (loop_kernels.hpp).
#if defined(__GNUC__) && !defined(__CUDACC__)
#define LUMINAL_LAMBDA_ALWAYS_INLINE __attribute__((always_inline))
#else
#define LUMINAL_LAMBDA_ALWAYS_INLINE
#endif
/// On the pointer a kernel writes through: its stores change none of the values the kernel
/// reads (inputs, broadcast scalars, the buffer table), so loads stay out of the loop and
/// the loop vectorizes.
#define LUMINAL_RESTRICT __restrict__
