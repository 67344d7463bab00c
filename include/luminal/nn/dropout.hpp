// Dropout with its random numbers computed inside the graph: no host RNG, no mask input.
// A counter-based hash of each element's flat index, the runtime scalar input "rng.seed"
// (f32, rebound each training step) and a per-layer compile-time Salt decides which
// elements are kept; kept elements are scaled by 1 / (1 - P), as torch.nn.Dropout.
//
//     nn::Dropout<0.5, 1> drop1;                        // give each layer its own Salt
//     auto h = drop1(relu(fc1(x)), nn::train);          // or drop1.train(...)
//     auto h_eval = drop1(relu(fc1(x)), nn::eval);      // x itself: another graph type
//     prog.bind("rng.seed", xt::xarray<float>(float(step)));
//
// The hash: z = i a + seed b + Salt c (in f64), u = |fract(sin(z) 43758.5453)| in [0, 1),
// keep when u >= P. Good enough for dropout, not for statistics.
#pragma once
#include "module.hpp"

namespace luminal::nn {

namespace detail {
/// The row-major flat index of every element of shape S, as f64: Horner's rule over
/// iota along each axis (symbolic extents are read at run time).
template <shape_type S, std::size_t K = 1, class Acc>
constexpr auto flat_index(Acc acc) {
  if constexpr (K >= S::rank) {
    return acc;
  } else {
    // No lambda here: nvcc does not let one read the enclosing function's constexpr locals.
    constexpr Dim d = S::dims[K];
    if constexpr (d.is_static()) return flat_index<S, K + 1>(acc * c<double(d.offset)> + iota<int(K), f64>(S{}));
    else return flat_index<S, K + 1>(acc * Extent<d, f64>{} + iota<int(K), f64>(S{}));
  }
}
template <shape_type S>
constexpr auto flat_index() {
  if constexpr (S::rank == 0) return constant<f64, 0.0>;
  else return flat_index<S>(iota<0, f64>(S{}));
}
}  // namespace detail

/// Zeroes each element with probability P and scales the rest by 1 / (1 - P) in
/// training; the identity in evaluation. Layers with the same Salt applied to tensors of
/// the same shape drop the same elements, so give each layer its own Salt.
template <double P, std::uint32_t Salt = 0>
struct Dropout {
  static_assert(P >= 0.0 && P <= 1.0, "luminal: Dropout needs 0 <= P <= 1");
  /// The runtime seed every dropout layer reads: bind a new value each step.
  static constexpr auto seed = input<"rng.seed", f32>(shape<>);

  /// The hash value u in [0, 1) of each element of shape S (f64).
  template <shape_type S>
  static constexpr auto uniform(S = {}) {
    constexpr double salt = double(Salt) * 17.724538509055159 + 0.5;
    auto z = detail::flat_index<S>() * c<12.9898> + cast<f64>(seed) * c<78.233> + c<salt>;
    return abs(mod(sin(z) * c<43758.5453>, c<1.0>));
  }
  /// Whether each element of shape S is dropped (bool): u < P.
  template <shape_type S>
  static constexpr auto drop_mask(S = {}) { return less_than(uniform<S>(), c<P>); }

  template <expression X>
  static constexpr auto train(X x) {
    static_assert(floating_element<value_t<X>>, "luminal: Dropout needs a floating-point input");
    if constexpr (P == 0.0) return x;
    else if constexpr (P == 1.0) return x * c<0.0>;
    else return where(drop_mask<shape_t<X>>(), c<0.0>, x * c<1.0 / (1.0 - P)>);
  }
  template <expression X>
  static constexpr auto eval(X x) { return x; }

  template <expression X, mode M>
  constexpr auto operator()(X x, M) const {
    if constexpr (std::is_same_v<M, train_mode>) return train(x);
    else return eval(x);
  }
};

}  // namespace luminal::nn
