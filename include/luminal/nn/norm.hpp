// Normalization: over the last axis, LayerNorm and RMSNorm, as torch.nn.LayerNorm(D) and
// torch.nn.RMSNorm(D); over groups of channels of [N, C, ...], GroupNorm and InstanceNorm,
// as torch.nn.GroupNorm(G, C) and torch.nn.InstanceNorm1d/2d(C). BatchNorm, which carries
// running statistics, is nn/batch_norm.hpp.
//
//     nn::LayerNorm<"ln1", 256> ln1;                    // ln1.weight [256] = 1, ln1.bias [256] = 0
//     nn::RMSNorm<"norm", 256> norm;                    // norm.weight [256] = 1
//     auto y = norm(ln1(input<"x", f32>(shape<Batch, 256>)));
//     nn::GroupNorm<"gn", 4, 32> gn;                     // gn.weight [32] = 1, gn.bias [32] = 0
//     auto z = gn(input<"img", f32>(shape<Batch, 32, 8, 8>));
#pragma once
#include "linear.hpp"

namespace luminal::nn {

namespace detail {
/// A list of axes as a type, for the normalizations' reductions.
template <int... A>
struct axes {};
template <class Lead, class Seq, int Begin>
struct axes_appended;
template <int... L, std::size_t... K, int Begin>
struct axes_appended<axes<L...>, std::index_sequence<K...>, Begin> {
  using type = axes<L..., Begin + int(K)...>;
};
/// axes<Lead..., Begin, Begin + 1, ..., End - 1>.
template <int Begin, int End, int... Lead>
using axes_range =
    typename axes_appended<axes<Lead...>, std::make_index_sequence<std::size_t(End - Begin)>, Begin>::type;

/// (x - mean) / sqrt(var + Eps) over the axes A, with the population variance, as torch's
/// normalizations compute it in training.
template <double Eps, int... A, expression X>
constexpr auto standardized(X x, axes<A...>) {
  return (x - mean<A...>(x, keepdim)) * recip(sqrt(variance<A...>(x, keepdim) + c<Eps>));
}

/// A vector over the C channels of an [N, C, ...] tensor of rank R, as [C, 1, ...] so that
/// it broadcasts along the channel axis.
template <std::size_t R, expression V>
constexpr auto per_channel(V v) {
  constexpr auto dims = [] {
    dims_t<R - 1> d{};
    d[0] = shape_t<V>::dims[0];
    for (std::size_t k = 1; k < R - 1; ++k) d[k] = Dim{1};
    return d;
  }();
  return reshape(v, shape_from<dims>{});
}

/// y * weight + bias per channel of y ([N, C, ...]), or y itself without affine parameters.
template <class W, class Bias, expression Y>
constexpr auto channel_affine(Y y) {
  if constexpr (std::is_same_v<W, none>) return y;
  else return y * per_channel<shape_t<Y>::rank>(W{}) + per_channel<shape_t<Y>::rank>(Bias{});
}

/// A channel-wise module's weight and bias [C] (weight 1, bias 0), or none without Affine.
template <fixed_string Prefix, std::int64_t C, bool Affine, element_type T>
struct channel_parameters {
  static constexpr auto weight = [] {
    if constexpr (Affine) return param<Prefix + ".weight", T>(shape<C>);
    else return none{};
  }();
  static constexpr auto bias = [] {
    if constexpr (Affine) return param<Prefix + ".bias", T>(shape<C>);
    else return none{};
  }();
  static constexpr auto parameters = [] {
    if constexpr (Affine) return std::tuple{weight, bias};
    else return std::tuple{};
  }();
  void initialize(tensor_store& store, std::uint64_t) const {
    if constexpr (Affine) {
      store_constant(store, weight, 1.0);
      store_constant(store, bias, 0.0);
    }
  }

 protected:
  using weight_type = std::remove_const_t<decltype(weight)>;
  using bias_type = std::remove_const_t<decltype(bias)>;
};

/// Whether X is [N, C, ...] of rank Lo to Hi.
template <class X, std::int64_t C, std::size_t Lo, std::size_t Hi>
concept channels_first = expression<X> && shape_t<X>::rank >= Lo && shape_t<X>::rank <= Hi &&
                         (shape_t<X>::dims[1] == Dim{C});
}  // namespace detail

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

/// torch.nn.GroupNorm(Groups, Channels, eps, affine): the C channels of [N, C, ...] in
/// Groups groups of C / Groups, each normalized over its channels and the remaining axes
/// (population variance), then scaled and shifted per channel by weight [C] (ones) and
/// bias [C] (zeros) when Affine.
template <fixed_string Prefix, std::int64_t Groups, std::int64_t Channels, double Eps = 1e-5, bool Affine = true,
          element_type T = f32>
struct GroupNorm : detail::channel_parameters<Prefix, Channels, Affine, T> {
  static_assert(Groups >= 1 && Channels >= 1 && Channels % Groups == 0 && Eps >= 0,
                "luminal: GroupNorm needs Groups >= 1 dividing Channels, and Eps >= 0");

  template <detail::channels_first<Channels, 2, 15> X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    constexpr std::size_t R = S::rank;
    constexpr auto grouped = [] {  // [N, Groups, Channels / Groups, ...]
      dims_t<R + 1> d{};
      d[0] = S::dims[0];
      d[1] = Dim{Groups};
      d[2] = Dim{Channels / Groups};
      for (std::size_t k = 2; k < R; ++k) d[k + 1] = S::dims[k];
      return d;
    }();
    auto standardized = detail::standardized<Eps>(reshape(x, shape_from<grouped>{}), detail::axes_range<2, int(R) + 1>{});
    auto y = reshape(standardized, S{});
    return detail::channel_affine<typename GroupNorm::weight_type, typename GroupNorm::bias_type>(y);
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<needed_shape("(N, ", Channels, ", ...)")>>
  operator()(const shaped<Input>&) const;
};

/// torch.nn.InstanceNorm1d (Rank 3, [N, C, L]) and InstanceNorm2d (Rank 4, [N, C, H, W]):
/// each channel of each sample normalized over its L or H x W values (population
/// variance), then, when Affine, scaled by weight [C] and shifted by bias [C]. As torch's
/// defaults: no affine parameters and no running statistics (track_running_stats=False).
template <fixed_string Prefix, std::int64_t C, std::size_t Rank, double Eps = 1e-5, bool Affine = false,
          element_type T = f32>
struct InstanceNorm : detail::channel_parameters<Prefix, C, Affine, T> {
  static_assert(C >= 1 && Eps >= 0, "luminal: InstanceNorm needs C >= 1 and Eps >= 0");

  template <detail::channels_first<C, Rank, Rank> X>
  constexpr auto operator()(X x) const {
    auto y = detail::standardized<Eps>(x, detail::axes_range<2, int(Rank)>{});
    return detail::channel_affine<typename InstanceNorm::weight_type, typename InstanceNorm::bias_type>(y);
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<
      Prefix, Input, exact_string<needed_shape("(N, ", C, Rank == 3 ? ", L)" : ", H, W)")>>
  operator()(const shaped<Input>&) const;
};
template <fixed_string Prefix, std::int64_t C, double Eps = 1e-5, bool Affine = false, element_type T = f32>
using InstanceNorm1d = InstanceNorm<Prefix, C, 3, Eps, Affine, T>;
template <fixed_string Prefix, std::int64_t C, double Eps = 1e-5, bool Affine = false, element_type T = f32>
using InstanceNorm2d = InstanceNorm<Prefix, C, 4, Eps, Affine, T>;

}  // namespace luminal::nn
