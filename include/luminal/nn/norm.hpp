// Normalization over the last axis: LayerNorm and RMSNorm, as torch.nn.LayerNorm(D) and
// torch.nn.RMSNorm(D).
//
//     nn::LayerNorm<"ln1", 256> ln1;                    // ln1.weight [256] = 1, ln1.bias [256] = 0
//     nn::RMSNorm<"norm", 256> norm;                    // norm.weight [256] = 1
//     auto y = norm(ln1(input<"x", f32>(shape<Batch, 256>)));
#pragma once
#include "linear.hpp"

namespace luminal::nn {

/// (x - mean) / sqrt(var + Eps) * weight + bias over the last axis (population variance,
/// as torch), with weight and bias of shape [D] initialized to ones and zeros.
template <fixed_string Prefix, std::int64_t D, double Eps = 1e-5, element_type T = f32>
struct LayerNorm {
  static_assert(D >= 1 && Eps >= 0, "luminal: LayerNorm needs D >= 1 and Eps >= 0");
  static constexpr auto weight = param<Prefix + ".weight", T>(shape<D>);
  static constexpr auto bias = param<Prefix + ".bias", T>(shape<D>);
  static constexpr auto parameters = std::tuple{weight, bias};

  template <features_of<D> X>
  constexpr auto operator()(X x) const {
    auto centered = x - mean<-1>(x, keepdim);
    auto inv_std = recip(sqrt(mean<-1>(centered * centered, keepdim) + c<Eps>));
    return centered * inv_std * weight + bias;
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<needs_last_extent(D)>> operator()(
      const shaped<Input>&) const;

  void initialize(tensor_store& store, std::uint64_t) const {
    detail::store_constant(store, weight, 1.0);
    detail::store_constant(store, bias, 0.0);
  }
};

/// x / sqrt(mean(x^2) + Eps) * weight over the last axis, weight [D] initialized to ones.
/// torch.nn.RMSNorm(D) defaults to eps = machine epsilon of the dtype; here Eps = 1e-6
/// (pass eps=1e-6 to torch for identical results).
template <fixed_string Prefix, std::int64_t D, double Eps = 1e-6, element_type T = f32>
struct RMSNorm {
  static_assert(D >= 1 && Eps >= 0, "luminal: RMSNorm needs D >= 1 and Eps >= 0");
  static constexpr auto weight = param<Prefix + ".weight", T>(shape<D>);
  static constexpr auto parameters = std::tuple{weight};

  template <features_of<D> X>
  constexpr auto operator()(X x) const {
    return x * recip(sqrt(mean<-1>(x * x, keepdim) + c<Eps>)) * weight;
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<needs_last_extent(D)>> operator()(
      const shaped<Input>&) const;

  void initialize(tensor_store& store, std::uint64_t) const { detail::store_constant(store, weight, 1.0); }
};

}  // namespace luminal::nn
