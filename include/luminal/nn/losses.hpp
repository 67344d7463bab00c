// Loss functions, each a scalar averaged over all elements (over the batch, and over any
// other leading axes), as torch.nn's losses with reduction="mean". The ones on logits are
// numerically stable for any logit magnitude.
//
//     auto logits = model(x);                                    // [Batch, 10]
//     auto labels = input<"labels", i32>(shape<Batch>);
//     auto loss = nn::cross_entropy(logits, labels);            // scalar
//     auto [value, dw] = value_and_grad(loss, fc1.weight);
#pragma once
#include "module.hpp"

namespace luminal::error {
template <auto Logits, auto Labels>
struct labels_shape_mismatch {
  static_assert(always_false<Logits, Labels>,
                "luminal: the labels must have the logits' shape without the class (last) axis "
                "(see the logits' and the labels' shapes above)");
};
}  // namespace luminal::error

namespace luminal::nn {

namespace detail {
template <class A, class B>
constexpr void require_same_shape() {
  if constexpr (!std::is_same_v<shape_t<A>, shape_t<B>>)
    (void)error::shapes_cannot_broadcast<shape_t<A>::text, shape_t<B>::text>{};
}
}  // namespace detail

/// mean((pred - target)^2), as torch.nn.MSELoss.
template <expression Pred, expression Target>
constexpr auto mse(Pred pred, Target target) {
  detail::require_same_shape<Pred, Target>();
  return mean(square(pred - target));
}

/// mean(logsumexp(logits) - logits[label]) over the class axis (the last one), as
/// torch.nn.CrossEntropyLoss on logits [Batch, C] and i32 labels [Batch] (or logits
/// [..., C] with labels [...]). Labels outside [0, C) pick nothing (contribute logsumexp).
template <expression Logits, expression Labels>
constexpr auto cross_entropy(Logits logits, Labels labels) {
  using S = shape_t<Logits>;
  using L = shape_t<Labels>;
  static_assert(S::rank >= 1, "luminal: cross_entropy needs logits of rank >= 1 (classes on the last axis)");
  static_assert(std::is_same_v<value_t<Labels>, i32>, "luminal: cross_entropy needs i32 labels");
  constexpr auto batch_dims = [] {
    dims_t<S::rank - 1> dims{};
    for (std::size_t k = 0; k + 1 < S::rank; ++k) dims[k] = S::dims[k];
    return dims;
  }();
  constexpr auto label_dims = [] {
    dims_t<S::rank> dims{};
    for (std::size_t k = 0; k + 1 < S::rank; ++k) dims[k] = S::dims[k];
    dims[S::rank - 1] = Dim{1};
    return dims;
  }();
  if constexpr (!std::is_same_v<shape_from<batch_dims>, L>) {
    (void)error::labels_shape_mismatch<S::text, L::text>{};
    return mean(logits);
  } else {
    constexpr int axis = int(S::rank) - 1;
    auto hit = equal(iota<axis, i32>(S{}), reshape(labels, shape_from<label_dims>{}));
    auto picked = sum<axis>(where(hit, logits, c<0.0>));
    return mean(logsumexp<axis>(logits) - picked);
  }
}

/// mean(softplus(x) - x t) = mean(-t log sigmoid(x) - (1 - t) log(1 - sigmoid(x))), as
/// torch.nn.BCEWithLogitsLoss: stable for any |x| (softplus is x above 20, log1p(e^x) below).
template <expression Logits, expression Targets>
constexpr auto binary_cross_entropy_with_logits(Logits logits, Targets targets) {
  detail::require_same_shape<Logits, Targets>();
  return mean(softplus(logits) - logits * targets);
}

/// Huber loss, as torch.nn.HuberLoss(delta=Delta): 0.5 d^2 where |d| < Delta, else
/// Delta (|d| - 0.5 Delta), with d = pred - target; averaged.
template <double Delta = 1.0, expression Pred, expression Target>
constexpr auto huber(Pred pred, Target target) {
  static_assert(Delta > 0, "luminal: huber needs Delta > 0");
  detail::require_same_shape<Pred, Target>();
  auto d = pred - target;
  auto a = abs(d);
  return mean(where(less_than(a, c<Delta>), d * d * c<0.5>, (a - c<0.5 * Delta>) * c<Delta>));
}

}  // namespace luminal::nn
