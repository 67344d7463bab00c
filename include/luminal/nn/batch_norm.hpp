// BatchNorm1d and BatchNorm2d, as torch.nn.BatchNorm1d/2d(C, eps, momentum, affine): in
// training, each channel of [N, C, ...] is normalized with the batch's mean and population
// variance, and the running statistics move towards the batch's, with its unbiased
// variance: running = (1 - Momentum) running + Momentum batch; in evaluation, the running
// statistics normalize. weight [C] (ones) and bias [C] (zeros) are trained; running_mean
// [C] (zeros), running_var [C] (ones) and num_batches_tracked (an i32 scalar: torch's is
// int64, which safetensors loading narrows) are buffers (train/buffers.hpp), under torch's
// names, so a torch state_dict loads unchanged.
//
// The mode is chosen per graph, as for Dropout: `bn(x, nn::train)` (or bn.train(x)) and
// `bn(x, nn::eval)` (or bn.eval(x)). A training step compiled over a loss that reads a
// training-mode BatchNorm updates its running statistics in the step, from the batch it
// normalized, and keeps them in step.store(), where an evaluation program reads them:
//
//     nn::BatchNorm2d<"bn1", 16> bn1;
//     auto loss = nn::cross_entropy(head(relu(bn1(conv1(x), nn::train))), labels);
//     auto step = compile_train_step(loss, sgd{.lr = 0.1f});
//     tensor_store init;  conv1.initialize(init, 1);  bn1.initialize(init, 1);  ...
//     step.store().assign(init);
//     step.run();                                        // bn1.running_mean, ... updated
//     auto eval = compile(head(relu(bn1(conv1(x), nn::eval))));
//     step.store().bind(eval);                           // parameters and running statistics
//
// A training-mode BatchNorm is applied to one input per loss: on two inputs it would assign
// its buffers twice, which compile_train_step refuses (torch updates once per call; calls
// on the same input are one node here, and one update). A program that is not a training
// step ignores the assignments, so `bn(x, nn::train)` in an evaluation graph normalizes
// with the batch's statistics, as torch's track_running_stats=False. Not here:
// momentum=None (a cumulative average), and tape blocks (a block's graph carries no
// assignments: its running statistics would not move).
#pragma once
#include "../train/buffers.hpp"
#include "norm.hpp"

namespace luminal::nn {

/// BatchNorm over [N, C, ...] of rank LowRank to HighRank: [N, C] and [N, C, L]
/// (BatchNorm1d) or [N, C, H, W] (BatchNorm2d); see the file comment. Use the aliases below.
template <fixed_string Prefix, std::int64_t C, std::size_t LowRank, std::size_t HighRank, double Eps = 1e-5,
          double Momentum = 0.1, bool Affine = true, element_type T = f32>
struct BatchNorm : detail::channel_parameters<Prefix, C, Affine, T> {
  static_assert(C >= 1 && Eps >= 0 && Momentum >= 0 && Momentum <= 1,
                "luminal: BatchNorm needs C >= 1, Eps >= 0 and 0 <= Momentum <= 1");
  static constexpr auto running_mean = buffer<Prefix + ".running_mean", T>(shape<C>);
  static constexpr auto running_var = buffer<Prefix + ".running_var", T>(shape<C>);
  static constexpr auto num_batches_tracked = buffer<Prefix + ".num_batches_tracked", i32>(shape<>);
  static constexpr auto buffers = std::tuple{running_mean, running_var, num_batches_tracked};

  /// Normalized with the batch's statistics, carrying the running statistics' updates.
  template <detail::channels_first<C, LowRank, HighRank> X>
  static constexpr auto train(X x) {
    static_assert(std::is_same_v<value_t<X>, T>, "luminal: BatchNorm's input must have its element type");
    constexpr int R = int(shape_t<X>::rank);
    using over = detail::axes_range<2, R, 0>;  // every axis but the channels
    auto y = detail::channel_affine<typename BatchNorm::weight_type, typename BatchNorm::bias_type>(
        detail::standardized<Eps>(x, over{}));
    auto batch_mean = reshape(mean_over(x, over{}), shape<C>);
    auto batch_var = reshape(unbiased_var_over(x, over{}), shape<C>);  // torch's running_var is unbiased
    return assigning(y, assign(running_mean, c<1.0 - Momentum> * running_mean + c<Momentum> * batch_mean),
                     assign(running_var, c<1.0 - Momentum> * running_var + c<Momentum> * batch_var),
                     assign(num_batches_tracked, num_batches_tracked + c<1>));
  }
  /// Normalized with the running statistics.
  template <detail::channels_first<C, LowRank, HighRank> X>
  static constexpr auto eval(X x) {
    static_assert(std::is_same_v<value_t<X>, T>, "luminal: BatchNorm's input must have its element type");
    constexpr std::size_t R = shape_t<X>::rank;
    auto y = (x - detail::per_channel<R>(running_mean)) * detail::per_channel<R>(recip(sqrt(running_var + c<Eps>)));
    return detail::channel_affine<typename BatchNorm::weight_type, typename BatchNorm::bias_type>(y);
  }

  template <expression X, mode M>
    requires detail::channels_first<X, C, LowRank, HighRank>
  constexpr auto operator()(X x, M) const {
    if constexpr (std::is_same_v<M, train_mode>) return train(x);
    else return eval(x);
  }
  template <auto Input, mode M>
  error::the_input_shape_does_not_fit_the_module<
      Prefix, Input, exact_string<needed_shape("(N, ", C, LowRank == 4 ? ", H, W)" : "[, L])")>>
  operator()(const shaped<Input>&, M) const;

  /// weight 1 and bias 0 (when Affine), running_mean 0, running_var 1, num_batches_tracked 0.
  void initialize(tensor_store& store, std::uint64_t seed) const {
    detail::channel_parameters<Prefix, C, Affine, T>::initialize(store, seed);
    detail::store_constant(store, running_mean, 0.0);
    detail::store_constant(store, running_var, 1.0);
    detail::store_constant(store, num_batches_tracked, 0.0);
  }

 private:
  template <int... A, expression X>
  static constexpr auto mean_over(X x, detail::axes<A...>) { return mean<A...>(x, keepdim); }
  template <int... A, expression X>
  static constexpr auto unbiased_var_over(X x, detail::axes<A...>) { return var<A...>(x, keepdim); }
};

/// torch.nn.BatchNorm1d(C): over [N, C] or [N, C, L].
template <fixed_string Prefix, std::int64_t C, double Eps = 1e-5, double Momentum = 0.1, bool Affine = true,
          element_type T = f32>
using BatchNorm1d = BatchNorm<Prefix, C, 2, 3, Eps, Momentum, Affine, T>;
/// torch.nn.BatchNorm2d(C): over [N, C, H, W].
template <fixed_string Prefix, std::int64_t C, double Eps = 1e-5, double Momentum = 0.1, bool Affine = true,
          element_type T = f32>
using BatchNorm2d = BatchNorm<Prefix, C, 4, 4, Eps, Momentum, Affine, T>;

}  // namespace luminal::nn
