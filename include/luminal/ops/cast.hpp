// cast<T>(x): element type conversion (bool -> 0/1, float -> int truncates toward zero).
#pragma once
#include "map.hpp"

namespace luminal {

namespace fn {
template <element_type To>
struct Cast {
  static constexpr std::string_view name = "cast";
  using cast_target = To;
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = true;
  template <class From> using result = To;
  template <class From> LUMINAL_HD static To apply(From x) { return static_cast<To>(x); }
};
}  // namespace fn

/// Converts the element type: `auto y = cast<f64>(x);` (x itself when already of type T).
/// To bf16 and f16 it rounds to nearest even (core/half_types.hpp); its gradient is the
/// cotangent cast back to x's type (grad/rules.hpp), as torch's `x.to(dtype)`.
template <element_type T, expression X>
constexpr auto cast(X x) {
  if constexpr (std::is_same_v<typename X::value_type, T>) return std::remove_cvref_t<X>{};
  else return make_unary<fn::Cast<T>>(x);
}

namespace detail {
/// Whether X holds bf16 or f16. Every primitive op on such values computes in f32 and
/// rounds its result, as each of PyTorch's ops does (exec/eval.hpp). A composite op (exp,
/// gelu, softmax...) is one op in PyTorch, which rounds once: on bf16 and f16 it runs on
/// widened(x) and casts its result back, rather than rounding after each primitive it is
/// written in (exp as exp2(x * log2 e) would round the product and lose the low bits).
template <class X>
concept half_valued = is_half_float<value_t<X>>;
/// x as an operand of a composite computed in f32: bf16 and f16 widened, others as they are.
template <class X>
constexpr auto widened(X x) {
  if constexpr (half_valued<X>) return cast<f32>(x);
  else return x;
}
}  // namespace detail

}  // namespace luminal
