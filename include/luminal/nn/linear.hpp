// Linear and Embedding, with torch.nn's parameter names, layouts and default init.
//
//     nn::Linear<"fc1", 784, 256> fc1;                     // fc1.weight [256, 784], fc1.bias [256]
//     nn::Embedding<"tok", 1000, 64> tok;                  // tok.weight [1000, 64]
//     auto x = input<"x", f32>(shape<Batch, 784>);
//     auto h = fc1(x);                                     // Shape<Batch, 256>
//     auto e = tok(input<"ids", i32>(shape<Batch, 16>));   // Shape<Batch, 16, 64>
//     tensor_store store;
//     fc1.initialize(store, 42);                           // U(-1/sqrt(784), 1/sqrt(784))
#pragma once
#include <cmath>

#include "module.hpp"

namespace luminal::error {
/// A module got an input whose extent on one axis is not the module's size.
template <auto Module, auto Shape, int Axis, long long Expected>
struct module_input_extent {
  static_assert(always_false<Module, Shape, Axis, Expected>,
                "luminal: the input's extent on this axis is not the size the module was declared "
                "with (see the module, the input shape, the axis and the expected extent above)");
};
/// A module got an input of the wrong rank.
template <auto Module, auto Shape, int Rank>
struct module_input_rank {
  static_assert(always_false<Module, Shape, Rank>,
                "luminal: the module needs an input of another rank (see the module, the input "
                "shape and the rank it needs above)");
};
}  // namespace luminal::error

namespace luminal::nn {

namespace detail {
/// Shape S with its last extent replaced by Last.
template <class S, std::int64_t Last>
constexpr auto with_last_extent() {
  return [&]<std::size_t... K>(std::index_sequence<K...>) { return Shape<S::dims[K]..., Dim{Last}>{}; }(
      std::make_index_sequence<S::rank - 1>{});
}
}  // namespace detail

/// y = x W^T + b over the last axis, as torch.nn.Linear(In, Out, bias): weight [Out, In],
/// bias [Out]. The transpose is a view the GEMM absorbs. Any leading axes are kept.
template <fixed_string Prefix, std::int64_t In, std::int64_t Out, bool Bias = true, element_type T = f32>
struct Linear {
  static_assert(In >= 1 && Out >= 1, "luminal: Linear needs In >= 1 and Out >= 1");
  static constexpr auto weight = param<Prefix + ".weight", T>(shape<Out, In>);
  static constexpr auto bias = [] {
    if constexpr (Bias) return param<Prefix + ".bias", T>(shape<Out>);
    else return none{};
  }();
  /// The parameter leaves, for grad and the optimizer: std::apply(f, parameters).
  static constexpr auto parameters = [] {
    if constexpr (Bias) return std::tuple{weight, bias};
    else return std::tuple{weight};
  }();

  template <features_of<In> X>
  constexpr auto operator()(X x) const {
    using S = shape_t<X>;
    // Leading axes fold into the GEMM's rows: one [rows, In] x [In, Out] product, whose
    // weight gradient is one GEMM too (a batched matmul would broadcast the weight over
    // the batch and sum per-batch gradients).
    auto y = [&] {
      if constexpr (S::rank == 1) {
        return reshape(matmul(reshape(x, shape<1, In>), transpose(weight)), shape<Out>);
      } else if constexpr (S::rank == 2) {
        return matmul(x, transpose(weight));
      } else {
        constexpr auto leading = [] {
          Dim rows{1};
          for (std::size_t k = 0; k + 1 < S::rank; ++k) rows = rows * S::dims[k];
          return rows;
        }();
        return reshape(matmul(reshape(x, shape<leading, In>), transpose(weight)),
                       detail::with_last_extent<S, Out>());
      }
    }();
    if constexpr (Bias) return y + bias;
    else return y;
  }
  template <auto Input>
  error::the_input_shape_does_not_fit_the_module<Prefix, Input, exact_string<needs_last_extent(In)>> operator()(
      const shaped<Input>&) const;

  /// PyTorch's default: weight kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(In), 1/sqrt(In)),
  /// and bias U(-1/sqrt(In), 1/sqrt(In)).
  void initialize(tensor_store& store, std::uint64_t seed) const {
    using W = std::remove_const_t<decltype(weight)>;
    detail::store_param(store, weight,
                        init::kaiming_uniform<T>(detail::extents_of(shape_t<W>{}), init::stream_seed(seed, W::name.view()),
                                                 std::sqrt(5.0)));
    if constexpr (Bias) detail::store_uniform(store, bias, seed, 1.0 / std::sqrt(double(In)));
  }
};

/// Rows of a [V, D] table picked by i32 ids, as torch.nn.Embedding(V, D): weight [V, D],
/// initialized N(0, 1). An id outside [0, V) makes run() throw.
template <fixed_string Prefix, std::int64_t V, std::int64_t D, element_type T = f32>
struct Embedding {
  static_assert(V >= 1 && D >= 1, "luminal: Embedding needs V >= 1 and D >= 1");
  static constexpr auto weight = param<Prefix + ".weight", T>(shape<V, D>);
  static constexpr auto parameters = std::tuple{weight};

  template <expression Ids>
  constexpr auto operator()(Ids ids) const { return gather(weight, ids); }

  void initialize(tensor_store& store, std::uint64_t seed) const {
    using W = std::remove_const_t<decltype(weight)>;
    detail::store_param(store, weight,
                        init::normal<T>(detail::extents_of(shape_t<W>{}), init::stream_seed(seed, W::name.view())));
  }
};

}  // namespace luminal::nn
