// One compiled training step: forward, backward and optimizer update as one program.
//
//     auto loss = nn::cross_entropy(model(x), labels);
//     auto step = compile_train_step(loss, adam{.lr = 1e-3f});   // every param of the loss
//     step.store().assign(initial_values);      // a tensor_store, e.g. from nn initializers
//     step.bind("x", images);  step.bind("labels", classes);
//     float value = step.run();                 // one step; the parameters are updated
//     step.optimizer().lr = 1e-4f;              // runtime: no recompilation
//     step.set_schedule(warmup_cosine_lr{.lr = 1e-3, .warmup_steps = 100, .t_max = 900});  // schedules.hpp
//     step.save("model.safetensors");           // parameters, optimizer state, step count, schedule
//
// Data parallel over the ranks of a communicator (distributed/mpi.hpp): each rank binds its
// own shard of the batch, and every rank applies the gradients' mean over the ranks:
//
//     luminal::mpi_communicator comm(MPI_COMM_WORLD);
//     auto step = compile_train_step(loss, adam{}, data_parallel{comm});
//
// The parameters are the loss's param<> leaves; their gradients come from the reverse
// pass, optionally clipped by their global norm, and feed the optimizer's update graph
// (grad/optimizers.hpp). A step is two programs: the loss and the gradients, then, once the
// loss is known to be finite, the update. The update writes the parameters and their state
// over their current values where no kernel reads them afterwards (Adam, AdamW and SGD: all
// of them), so the CPU's caches hold one copy, and a step with a NaN loss changes nothing.
// Buffers the loss assigns (BatchNorm's running statistics) are computed beside it: buffers.hpp.
#pragma once
#include <tuple>

#include "../grad/reverse.hpp"
#include "../ops/exchange.hpp"
#include "optimizers.hpp"
#include "train_step.hpp"

namespace luminal {

namespace detail {
// The step's graph is put together as types: a std::tuple of expressions, even one built
// only inside a decltype, instantiates its members and names each of them with every
// expression's type, and GCC spent most of a training program's compile time mangling
// such names (see detail::position_in in graph.hpp).

/// The gradients as they reach the update: unchanged, or their mean over ranks.
struct no_exchange {
  template <class Grads>
  using apply = Grads;
};
template <std::size_t BucketBytes>
struct mean_over_ranks {
  template <class Grads>
  using apply =
      typename as_list<decltype(all_reduce_mean<BucketBytes>(boost::mp11::mp_rename<Grads, std::tuple>{}))>::type;
};

template <class Opt>
struct update_of {
  template <class P, class G>
  using fn = typename as_list<decltype(Opt::update(P{}, G{}))>::type;
};

template <class B, retention_policy Policy, class... O>
auto compile_outputs(boost::mp11::mp_list<O...>) {
  return program<B, Policy, O...>{};
}

/// Exchange: what happens to the gradients between the backward and the update
/// (no_exchange, or mean_over_ranks).
/// Scaling: no_loss_scaling, or scaled_loss (loss_scaling.hpp).
template <class B, retention_policy Policy, gradient_clipping Clipping, class Loss, class Opt, class Exchange,
          class Scaling, class... P>
auto build_train_step(Loss, Opt opt, Exchange, Scaling scaling, boost::mp11::mp_list<P...>) {
  static_assert(sizeof...(P) > 0, "luminal: compile_train_step: the loss has no param<> leaves to train");
  using T = value_t<Loss>;
  static_assert((std::is_same_v<value_t<P>, T> && ...),
                "luminal: compile_train_step: every parameter must have the loss's element type");
  require_scalar<Loss>();
  using pass = reverse_pass<Loss, typename Scaling::template seed<Loss>, P...>;
  using grads = boost::mp11::mp_list<decltype(pass::template gradient<P>())...>;
  using exchanged = typename Exchange::template apply<grads>;
  // The gradient program: the loss, the gradients the update reads, the buffers' new values.
  using handed_over = boost::mp11::mp_filter<is_handed_over, exchanged>;
  using assignments = typename buffer_assignments_of_loss<Loss>::type;
  static_assert(!Scaling::dynamic || !boost::mp11::mp_empty<handed_over>::value,
                "luminal: dynamic loss scaling checks the gradients the backward computes, and this loss has none");
  auto gradients = compile_outputs<B, Policy>(boost::mp11::mp_append<boost::mp11::mp_push_front<handed_over, Loss>,
                                                                     assigned_values<assignments>,
                                                                     typename Scaling::template checks<handed_over>>{});
  // The update program: each slot's new value, then each parameter's new optimizer state.
  using read = boost::mp11::mp_transform<boost::mp11::mp_if, boost::mp11::mp_transform<is_handed_over, exchanged>,
                                         boost::mp11::mp_list<gradient_input<P>...>, exchanged>;
  using unscaled = boost::mp11::mp_transform<Scaling::template unscaled, read>;
  using updates = boost::mp11::mp_transform_q<boost::mp11::mp_quote<update_of<Opt>::template fn>,
                                              boost::mp11::mp_list<P...>, clipped_gradients<Clipping, unscaled>>;
  using new_values = boost::mp11::mp_transform<boost::mp11::mp_first, updates>;
  using new_states =
      boost::mp11::mp_apply<boost::mp11::mp_append, boost::mp11::mp_transform<boost::mp11::mp_rest, updates>>;
  auto update = compile_outputs<B, retention_policy::store_all>(boost::mp11::mp_append<new_values, new_states>{});
  using slots = boost::mp11::mp_append<boost::mp11::mp_list<P...>, typename Opt::template states<P>...>;
  return train_step<B, Opt, Clipping, decltype(gradients), decltype(update), slots, gradient_outputs(exchanged{}),
                    assignments, Scaling>(std::move(gradients), std::move(update), std::move(opt), B{},
                                          std::move(scaling));
}
}  // namespace detail

/// Compiles forward, backward and the optimizer's update of every param<> leaf of `loss`,
/// on backend B (host by default): the loss and gradients as one program, the update as a
/// second that runs once the loss is finite (train_step). With
/// gradient_clipping::global_norm the gradients are scaled to step.max_grad_norm first.
///
///     auto step = compile_train_step(loss, sgd{.lr = 0.1f, .momentum = 0.9f});
///     auto clipped = compile_train_step<host, retention_policy::store_all,
///                                       gradient_clipping::global_norm>(loss, adamw{});
template <class B = host, retention_policy Policy = retention_policy::store_all,
          gradient_clipping Clipping = gradient_clipping::none, expression Loss, optimizer Opt>
auto compile_train_step(Loss loss, Opt opt) {
  static_assert(shape_t<Loss>::rank == 0, "luminal: compile_train_step needs a scalar loss (reduce it with mean)");
  using params = filter_nodes<detail::is_parameter_leaf, topo_nodes<Loss>>;
  return detail::build_train_step<B, Policy, Clipping>(loss, std::move(opt), detail::no_exchange{},
                                                       detail::no_loss_scaling{}, params{});
}

/// compile_train_step with dynamic loss scaling (loss_scaling.hpp), for f16 mixed
/// precision: the backward starts from the scale, the update unscales, and a step whose
/// gradients overflowed is skipped while the scale backs off.
///
///     auto step = compile_train_step(autocast<f16>(loss), adamw{}, dynamic_loss_scale{});
template <class B = host, retention_policy Policy = retention_policy::store_all,
          gradient_clipping Clipping = gradient_clipping::none, expression Loss, optimizer Opt>
auto compile_train_step(Loss loss, Opt opt, dynamic_loss_scale scaling) {
  static_assert(shape_t<Loss>::rank == 0, "luminal: compile_train_step needs a scalar loss (reduce it with mean)");
  using params = filter_nodes<detail::is_parameter_leaf, topo_nodes<Loss>>;
  return detail::build_train_step<B, Policy, Clipping>(loss, std::move(opt), detail::no_exchange{},
                                                       detail::scaled_loss{scaling}, params{});
}

/// compile_train_step, data parallel over `parallel.comm`'s ranks: the gradients' mean over
/// the ranks, exchanged in buckets while the backward runs, feeds the update (and the
/// clipping), so every rank applies the same update. Each rank binds its own shard of the
/// batch. The first run() refuses ranks whose models differ (naming the tensor and the
/// ranks) and makes every rank start from rank 0's parameters and state.
///
///     luminal::mpi_communicator comm(MPI_COMM_WORLD);
///     auto step = compile_train_step(loss, adamw{.lr = 1e-3f}, data_parallel{comm});
template <class B = host, retention_policy Policy = retention_policy::store_all,
          gradient_clipping Clipping = gradient_clipping::none, expression Loss, optimizer Opt,
          std::size_t BucketBytes>
auto compile_train_step(Loss loss, Opt opt, data_parallel<BucketBytes> parallel) {
  static_assert(shape_t<Loss>::rank == 0, "luminal: compile_train_step needs a scalar loss (reduce it with mean)");
  // The backward produces the last layers' gradients first: they fill the first buckets,
  // so each bucket travels while the next bucket's gradients are computed.
  using params = boost::mp11::mp_reverse<filter_nodes<detail::is_parameter_leaf, topo_nodes<Loss>>>;
  auto step = detail::build_train_step<B, Policy, Clipping>(
      loss, std::move(opt), detail::mean_over_ranks<BucketBytes>{}, detail::no_loss_scaling{}, params{});
  step.set_communicator(parallel.comm);
  return step;
}

}  // namespace luminal
