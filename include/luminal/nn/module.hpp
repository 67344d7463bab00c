// What every nn module shares. A module is a small empty struct templated on its name
// prefix and static sizes. Its parameters are static members (`Linear<"fc1", 784, 256>::
// weight` is the leaf `param<"fc1.weight", f32>(shape<256, 784>)`), named and laid out as
// in torch.nn so that checkpoints (io/safetensors.hpp) load in PyTorch and back; its
// operator() builds the expression; initialize(store, seed) writes PyTorch's default
// initial values into a tensor_store, one random stream per (seed, parameter name).
//
//     nn::Linear<"fc1", 784, 256> fc1;
//     auto h = fc1(x);                          // matmul(x, transpose(weight)) + bias
//     luminal::tensor_store store;
//     fc1.initialize(store, 42);                // "fc1.weight", "fc1.bias"
//     auto [dw, db] = std::apply([&](auto... p) { return grad(loss, p...); }, fc1.parameters);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../io/tensor_store.hpp"
#include "../grad/reverse.hpp"
#include "../ops/all.hpp"
#include "init.hpp"

namespace luminal::nn {

/// The type of a parameter a module does not have (Linear<..., bias=false>::bias).
struct none {};

/// Which graph a module with train/eval behaviour builds (Dropout): `drop(x, nn::train)`.
struct train_mode {};
struct eval_mode {};
inline constexpr train_mode train{};
inline constexpr eval_mode eval{};
template <class M>
concept mode = std::is_same_v<M, train_mode> || std::is_same_v<M, eval_mode>;

/// Whether X's last axis has extent D: the input of a module over D features (Linear,
/// LayerNorm, RMSNorm). Each such module also has an overload that takes any other input
/// and is never defined, so that the error is at the caller's line and prints the input's
/// shape (errors.hpp).
template <class X, std::int64_t D>
concept features_of = expression<X> && (shape_t<X>::rank >= 1) && (shape_t<X>::dims[shape_t<X>::rank - 1] == Dim{D});

/// What a module's input must look like, for its refusal's error text: the shape around
/// the one extent the module fixes, as `before` extent `after`.
constexpr text<48> needed_shape(std::string_view before, std::int64_t extent, std::string_view after) {
  text<48> out;
  out.append(before);
  out.append_int(extent);
  out.append(after);
  return out;
}
/// "(..., 256)": the input of a module over D features.
constexpr text<48> needs_last_extent(std::int64_t d) { return needed_shape("(..., ", d, ")"); }
/// "(N, 3, H, W)": the input a Conv2d over C channels needs.
constexpr text<48> needs_channels(std::int64_t c) { return needed_shape("(N, ", c, ", H, W)"); }

namespace detail {
/// A static shape as a std::vector, for the initializers.
template <Dim... D>
std::vector<std::size_t> extents_of(Shape<D...>) {
  static_assert((D.is_static() && ...), "luminal: nn parameters need static shapes");
  return {std::size_t(D.offset)...};
}

/// Writes `value` into the store under the leaf's name, after checking its shape.
template <class Leaf, class T>
void store_param(tensor_store& store, Leaf, const xt::xarray<T>& value) {
  static_assert(std::is_same_v<value_t<Leaf>, T>, "luminal: internal error: initial value of the wrong element type");
  store.set(std::string(Leaf::name.view()), value);
}

/// U(-bound, bound) for the leaf, from the stream of (seed, its name).
template <class Leaf>
void store_uniform(tensor_store& store, Leaf leaf, std::uint64_t seed, double bound) {
  auto shape = extents_of(shape_t<Leaf>{});
  store_param(store, leaf, init::uniform<value_t<Leaf>>(shape, init::stream_seed(seed, Leaf::name.view()), -bound, bound));
}

/// A constant for the leaf.
template <class Leaf>
void store_constant(tensor_store& store, Leaf leaf, double value) {
  store_param(store, leaf, init::constant<value_t<Leaf>>(extents_of(shape_t<Leaf>{}), value));
}
}  // namespace detail

}  // namespace luminal::nn
