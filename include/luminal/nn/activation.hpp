// Activation and reshaping modules: thin wrappers over the ops, for model code that reads
// like torch.nn.Sequential. They have no parameters.
//
//     nn::Flatten flatten;  nn::ReLU act;
//     auto h = act(fc1(flatten(input<"x", f32>(shape<Batch, 1, 28, 28>))));   // [Batch, 784] in
#pragma once
#include "module.hpp"

namespace luminal::nn {

/// max(x, 0), as torch.nn.ReLU (gradient 0 at 0).
struct ReLU {
  template <expression X> constexpr auto operator()(X x) const { return relu(x); }
};
/// GELU, as torch.nn.GELU: `nn::GELU{}` is exact (erf), `nn::GELU{approximate::tanh}`
/// the tanh form.
template <class Approximate = approximate::none_t>
struct GELU {
  Approximate form{};
  template <expression X> constexpr auto operator()(X x) const { return gelu(x, form); }
};
/// tanh(x), as torch.nn.Tanh.
struct Tanh {
  template <expression X> constexpr auto operator()(X x) const { return tanh(x); }
};
/// 1 / (1 + e^-x), as torch.nn.Sigmoid.
struct Sigmoid {
  template <expression X> constexpr auto operator()(X x) const { return sigmoid(x); }
};

/// Keeps the first axis and merges all others into one, as torch.nn.Flatten():
/// [N, C, H, W] -> [N, C H W]. A view.
struct Flatten {
  template <expression X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    static_assert(S::rank >= 1, "luminal: Flatten needs an input of rank >= 1");
    constexpr Dim rest = [] {
      Dim n{1};
      for (std::size_t k = 1; k < S::rank; ++k) n = n * S::dims[k];
      return n;
    }();
    return reshape(x, Shape<S::dims[0], rest>{});
  }
};

}  // namespace luminal::nn
