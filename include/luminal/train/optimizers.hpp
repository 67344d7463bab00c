// Optimizers as graph nodes. An optimizer turns a parameter and its gradient into the
// expressions of the updated parameter and of its updated state (momentum, moments), so
// that forward, backward and update compile into one program (see train.hpp). The
// hyperparameters are runtime scalar inputs ("optim.lr", ...) computed on the host each
// step from the optimizer's fields and the step count: changing the learning rate, or a
// schedule, needs no recompilation. The update rules are PyTorch's (torch.optim.SGD,
// Adam, AdamW), so the same hyperparameters give the same trajectories.
//
//     auto step = compile_train_step(loss, adamw{.lr = 1e-3f, .weight_decay = 0.05f});
//     step.optimizer().lr = 3e-4f;          // takes effect at the next step
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>
#include <tuple>

#include "../ops/composite.hpp"
#include "../ops/reductions.hpp"

namespace luminal {

/// Optimizer state of parameter P (a leaf of role `state`), named `Prefix + P's name`,
/// e.g. "optimizer.exp_avg.fc1.weight". Checkpoints store it under that name.
template <fixed_string Prefix, class P>
using state_leaf = Leaf<Prefix + P::name, value_t<P>, shape_t<P>, leaf_role::state>;

/// A runtime scalar hyperparameter of element type T.
template <fixed_string Name, class T>
using hyperparameter = Input<Name, T, Shape<>>;

/// SGD with momentum, Nesterov momentum and L2 weight decay, as torch.optim.SGD
/// (dampening 0): g += wd p; v = momentum v + g; p -= lr (nesterov ? g + momentum v : v).
struct sgd {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;

  static constexpr std::string_view name = "sgd";
  template <class P>
  using states = boost::mp11::mp_list<state_leaf<"optimizer.momentum_buffer.", P>>;

  /// The updated parameter and momentum buffer of P, given its gradient g.
  template <class P, class G>
  static constexpr auto update(P p, G g) {
    using T = value_t<P>;
    hyperparameter<"optim.lr", T> lr;
    hyperparameter<"optim.momentum", T> momentum;
    hyperparameter<"optim.weight_decay", T> weight_decay;
    hyperparameter<"optim.nesterov", T> nesterov;  // 1 or 0
    state_leaf<"optimizer.momentum_buffer.", P> buffer;
    auto decayed = g + weight_decay * p;
    auto new_buffer = momentum * buffer + decayed;
    auto direction = new_buffer + nesterov * (decayed + momentum * new_buffer - new_buffer);
    auto new_p = p - lr * direction;
    // A list of types, not a std::tuple (see train.hpp).
    return boost::mp11::mp_list<decltype(new_p), decltype(new_buffer)>{};
  }

  /// The scalars of step `step` (counted from 1), passed to set(name, value).
  template <class Set>
  void hyperparameters(std::int64_t, Set&& set) const {
    set("optim.lr", lr);
    set("optim.momentum", momentum);
    set("optim.weight_decay", weight_decay);
    set("optim.nesterov", nesterov ? 1.0 : 0.0);
  }
};

namespace detail {
/// Adam and AdamW share one graph: g += l2 p; m = b1 m + (1 - b1) g;
/// v = b2 v + (1 - b2) g^2; p = keep p - step_size m / (sqrt(v) / sqrt(1 - b2^t) + eps),
/// with step_size = lr / (1 - b1^t), and l2 = wd, keep = 1 (Adam) or l2 = 0,
/// keep = 1 - lr wd (AdamW), as torch.optim.Adam / AdamW compute it.
struct adam_graph {
  template <class P>
  using states = boost::mp11::mp_list<state_leaf<"optimizer.exp_avg.", P>, state_leaf<"optimizer.exp_avg_sq.", P>>;

  template <class P, class G>
  static constexpr auto update(P p, G g) {
    using T = value_t<P>;
    hyperparameter<"optim.beta1", T> beta1;
    hyperparameter<"optim.one_minus_beta1", T> one_minus_beta1;
    hyperparameter<"optim.beta2", T> beta2;
    hyperparameter<"optim.one_minus_beta2", T> one_minus_beta2;
    hyperparameter<"optim.l2", T> l2;
    hyperparameter<"optim.keep", T> keep;
    hyperparameter<"optim.step_size", T> step_size;
    hyperparameter<"optim.inv_sqrt_bias_correction2", T> inv_sqrt_correction;
    hyperparameter<"optim.eps", T> eps;
    state_leaf<"optimizer.exp_avg.", P> m;
    state_leaf<"optimizer.exp_avg_sq.", P> v;
    auto decayed = g + l2 * p;
    auto new_m = beta1 * m + one_minus_beta1 * decayed;
    auto new_v = beta2 * v + one_minus_beta2 * square(decayed);
    auto new_p = keep * p - step_size * new_m / (sqrt(new_v) * inv_sqrt_correction + eps);
    return boost::mp11::mp_list<decltype(new_p), decltype(new_m), decltype(new_v)>{};
  }

  template <class Set>
  static void set_scalars(std::int64_t step, float lr, float beta1, float beta2, float eps, float l2, float keep,
                          Set&& set) {
    const double t = double(step);
    set("optim.beta1", beta1);
    set("optim.one_minus_beta1", 1.0 - double(beta1));
    set("optim.beta2", beta2);
    set("optim.one_minus_beta2", 1.0 - double(beta2));
    set("optim.l2", l2);
    set("optim.keep", keep);
    set("optim.step_size", double(lr) / (1.0 - std::pow(double(beta1), t)));
    set("optim.inv_sqrt_bias_correction2", 1.0 / std::sqrt(1.0 - std::pow(double(beta2), t)));
    set("optim.eps", eps);
  }
};
}  // namespace detail

/// Adam's options; Decoupled selects AdamW. Use the aliases `adam` and `adamw`.
template <bool Decoupled>
struct adam_options {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = Decoupled ? 0.01f : 0.0f;

  static constexpr std::string_view name = Decoupled ? "adamw" : "adam";
  template <class P>
  using states = detail::adam_graph::states<P>;
  template <class P, class G>
  static constexpr auto update(P p, G g) { return detail::adam_graph::update(p, g); }
  template <class Set>
  void hyperparameters(std::int64_t step, Set&& set) const {
    if constexpr (Decoupled) detail::adam_graph::set_scalars(step, lr, beta1, beta2, eps, 0.0f, 1.0f - lr * weight_decay, set);
    else detail::adam_graph::set_scalars(step, lr, beta1, beta2, eps, weight_decay, 1.0f, set);
  }
};

/// Adam with L2 weight decay added to the gradient, as torch.optim.Adam.
using adam = adam_options<false>;
/// Adam with decoupled weight decay (p -= lr wd p before the step), as torch.optim.AdamW
/// (default weight decay 0.01).
using adamw = adam_options<true>;

/// What a training step does with the gradients before the update.
enum class gradient_clipping {
  none,
  /// Scales every gradient by min(1, max_norm / (norm + 1e-6)), where norm is the L2 norm
  /// of all gradients together (torch.nn.utils.clip_grad_norm_). max_norm is the runtime
  /// scalar "optim.max_grad_norm" (train_step::max_grad_norm).
  global_norm,
};

namespace detail {
/// An optimizer's update (a std::tuple or an mp_list of expressions, or one expression),
/// as an mp_list.
template <class U>
struct as_list {
  using type = boost::mp11::mp_list<U>;
};
template <class... E>
struct as_list<std::tuple<E...>> {
  using type = boost::mp11::mp_list<E...>;
};
template <class... E>
struct as_list<boost::mp11::mp_list<E...>> {
  using type = boost::mp11::mp_list<E...>;
};

/// The gradients G scaled by the clipping coefficient, as a list of types (train.hpp puts
/// the step's graph together as types).
template <class... G>
constexpr auto clipped_by_global_norm(boost::mp11::mp_list<G...>) {
  using T = value_t<boost::mp11::mp_first<boost::mp11::mp_list<G...>>>;
  hyperparameter<"optim.max_grad_norm", T> max_norm;
  auto norm = sqrt((sum(square(G{})) + ...));
  auto coefficient = min(max_norm / (norm + c<1e-6>), c<1.0>);
  return boost::mp11::mp_list<decltype(G{} * coefficient)...>{};
}
template <gradient_clipping Clipping, class Grads>
constexpr auto clip_gradient_types(Grads grads) {
  if constexpr (Clipping == gradient_clipping::none || boost::mp11::mp_empty<Grads>::value) return grads;
  else return clipped_by_global_norm(grads);
}
/// The clipped gradients of the gradients Grads (an mp_list).
template <gradient_clipping Clipping, class Grads>
using clipped_gradients = decltype(clip_gradient_types<Clipping>(Grads{}));
}  // namespace detail

namespace detail {
/// A hyperparameter callback for the concept below: a named type, because nvcc rejects
/// every optimizer when the requirement is spelled with a lambda.
struct hyperparameter_sink {
  void operator()(std::string_view, double) const {}
};
}  // namespace detail

/// Whether O has the shape of an optimizer: update(p, g) and hyperparameters(step, set).
template <class O>
concept optimizer = requires(const O& o) {
  { O::name } -> std::convertible_to<std::string_view>;
  o.hyperparameters(std::int64_t{1}, detail::hyperparameter_sink{});
};

}  // namespace luminal
