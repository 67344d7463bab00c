// An optimizer over named tensors, for models whose gradients come from a tape (tape.hpp)
// rather than from one compiled training step. It runs the same update graph as
// compile_train_step (grad/optimizers.hpp), compiled once for a flat tensor of any
// length and run once per parameter, so the formulas, hyperparameters and state names
// ("optimizer.exp_avg.<name>", ...) are those of train_step and its checkpoints.
//
//     parameter_optimizer<adamw> opt({.lr = 3e-4f});
//     opt.max_grad_norm = 1.0;                       // optional global-norm clipping
//     opt.set_schedule(one_cycle_lr{.max_lr = 1e-3, .total_steps = 5000});  // optional (schedules.hpp)
//     t.backward(loss);
//     opt.step(params, t.gradients());               // updates params; clears the gradients
//     save_safetensors(opt.checkpoint(params), "model.safetensors");
//
// Over a parameter_store (a tape built on one: tape.hpp), the parameters, gradients and
// optimizer state stay in the backend's memory: each update writes the parameter and its
// state over their current values (one loop reads them and writes their updates), and
// only the gradients' norms (one scalar per tensor, read together) come to the host.
//
//     opt.step(device_params, t.device_gradients()); // then clears the gradients
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../io/safetensors.hpp"
#include "../io/tensor_store.hpp"
#include "../ops/all.hpp"
#include "../runtime/program.hpp"
#include "../runtime/parameter_store.hpp"
#include "optimizers.hpp"
#include "schedules.hpp"

namespace luminal {

/// Applies optimizer Opt to the T tensors of a tensor_store; see the file comment.
template <optimizer Opt, element_type T = f32, class B = host>
class parameter_optimizer {
  static constexpr Dim elements{"Elements"};
  using flat_parameter = Param<"p", T, Shape<elements>>;
  using flat_gradient = Input<"grad", T, Shape<elements>>;
  // Clipping scales the gradient inside the update: no pass over the gradients of its own.
  using gradient_scale = hyperparameter<"optim.grad_scale", T>;
  static auto make_program(B backend) {
    using update = decltype(Opt::update(flat_parameter{}, flat_gradient{} * gradient_scale{}));
    using outputs = typename detail::as_list<update>::type;
    return [&]<class... O>(boost::mp11::mp_list<O...>) { return program<B, retention_policy::store_all, O...>(backend); }(
        outputs{});
  }
  using update_program = decltype(make_program(B{}));
  using norm_program = program<B, retention_policy::store_all, decltype(sum(flat_gradient{} * flat_gradient{}))>;
  using state_leaves = typename Opt::template states<flat_parameter>;

  /// Whether no kernel of the update reads a parameter or a state after the kernel that
  /// computes its update, or beside it in another loop of its launch
  /// (kernel_groups::may_overwrite): then the device step may write each update over the
  /// tensor it replaces. (Every kernel reads an element's inputs at that element's index,
  /// the graph being elementwise over one flat axis, so the writer's own read comes first.)
  static constexpr bool updates_in_place = [] {
    using nodes = typename update_program::nodes;
    constexpr auto& plan = update_program::plan;
    bool safe = true;
    auto check = [&](auto leaf, int output) {
      constexpr std::size_t id = boost::mp11::mp_find<nodes, decltype(leaf)>::value;
      if constexpr (id < boost::mp11::mp_size<nodes>::value)
        safe = safe && detail::kernel_groups<typename update_program::layout>::may_overwrite(plan.kernel_of[output], int(id));
    };
    check(flat_parameter{}, update_program::output_ids[0]);
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<state_leaves>::value>>(
        [&](auto I) { check(boost::mp11::mp_at_c<state_leaves, I>{}, update_program::output_ids[1 + I]); });
    return safe;
  }();
  static_assert(updates_in_place, "luminal: parameter_optimizer: this optimizer's update reads a tensor after "
                                  "writing its new value, so the device step cannot update in place");

 public:
  explicit parameter_optimizer(Opt options = {}, B backend = {})
      : options_(std::move(options)), program_(make_program(backend)), norm_program_(backend), device_state_(backend),
        norm_parts_(backend) {}

  Opt& options() { return options_; }
  const Opt& options() const { return options_; }
  std::int64_t step_count() const { return step_; }

  /// Sets options().lr to schedule.lr_at(step_count()) before each step, as
  /// train_step::set_schedule (std::nullopt: none). Set it before load_state().
  void set_schedule(std::optional<lr_schedule> schedule) {
    static_assert(detail::has_learning_rate<Opt>, "luminal: set_schedule: this optimizer has no field lr to schedule");
    schedule_ = std::move(schedule);
  }
  const std::optional<lr_schedule>& schedule() const { return schedule_; }

  /// Global-norm clipping bound (torch.nn.utils.clip_grad_norm_); infinite: none.
  double max_grad_norm = std::numeric_limits<double>::infinity();

  /// One update of every parameter that has a gradient in `gradients` (which must be of
  /// type T and of the parameter's shape); the gradients are cleared afterwards. Returns the
  /// global L2 norm of the gradients before clipping. A non-finite norm throws run_error
  /// and changes nothing.
  double step(tensor_store& parameters, tensor_store& gradients) {
    double squared = 0;
    for (const auto& [name, g] : gradients) {
      require_matching(parameters, name, g);
      for (T v : values(g)) squared += double(v) * double(v);
    }
    const double norm = std::sqrt(squared);
    const std::int64_t t = bind_hyperparameters(norm);
    for (const std::string& name : gradients.names()) {
      auto& g = gradients.at(name);
      auto& p = parameters.at(name);
      const index_t count = index_t(p.element_count());
      const std::span<const index_t> flat(&count, 1);
      bind(flat_parameter::name.view(), p, flat);
      bind(flat_gradient::name.view(), g, flat);
      boost::mp11::mp_for_each<state_leaves>([&](auto leaf) {
        bind(decltype(leaf)::name.view(), state_of<decltype(leaf)>(name, p), flat);
      });
      program_.run();
      program_.template read_output<0>(values(p));
      boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<state_leaves>::value>>([&](auto I) {
        using L = boost::mp11::mp_at_c<state_leaves, I>;
        program_.template read_output<1 + I>(values(state_.at(state_name<L>(name))));
      });
    }
    gradients.clear();
    step_ = t;
    return norm;
  }

  /// The same update for parameters and gradients in the backend's memory (a tape over a
  /// parameter_store): nothing but one norm scalar per gradient crosses to the host. The
  /// gradients are cleared afterwards and kept for the next backward(), which writes over
  /// them (parameter_store::zero_lazily): they read as zeros until then, and a parameter
  /// whose gradient the next backward() does not reach is not updated by the next step.
  double step(parameter_store<B>& parameters, parameter_store<B>& gradients) {
    std::size_t reached = 0;
    for (const auto& [name, g] : gradients) {
      require_matching(parameters, name, g);
      reached += !g.zero_pending;  // a pending zero adds nothing
    }
    // Each gradient's sum of squares is written to its own element of `parts`, and the
    // host reads them together: on a GPU the step waits once, not once per tensor.
    double squared = 0;
    if (reached > 0) {
      T* parts = norm_parts(reached);
      for (const auto& [name, g] : gradients) {
        if (g.zero_pending) continue;
        const index_t count = index_t(g.bytes / sizeof(T));
        norm_program_.bind_device(flat_gradient::name.view(), static_cast<const T*>(g.current),
                                  std::span<const index_t>(&count, 1));
        norm_program_.template write_output_to<0>(parts++);
        norm_program_.run();
      }
      for (T part : norm_parts_.template get<T>("parts")) squared += double(part);
    }
    const double norm = std::sqrt(squared);
    const std::int64_t t = bind_hyperparameters(norm);
    for (const auto& [name, g] : gradients) {
      // Nothing reached this gradient since the last step: the parameter is left as it is,
      // as torch's optimizers skip a parameter whose .grad is None (and as the step over a
      // tensor_store, whose gradients hold only what backward() reached).
      if (g.zero_pending) continue;
      auto& p = parameters.materialized(name);
      const index_t count = index_t(p.bytes / sizeof(T));
      const std::span<const index_t> flat(&count, 1);
      program_.bind_device(flat_parameter::name.view(), static_cast<const T*>(p.current), flat);
      program_.bind_device(flat_gradient::name.view(), static_cast<const T*>(g.current), flat);
      program_.template write_output_to<0>(static_cast<T*>(p.current));
      boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<state_leaves>::value>>([&](auto I) {
        using L = boost::mp11::mp_at_c<state_leaves, I>;
        auto& state = device_state_of<L>(name, p);
        program_.bind_device(L::name.view(), static_cast<const T*>(state.current), flat);
        program_.template write_output_to<1 + I>(static_cast<T*>(state.current));
      });
      program_.run();
    }
    // The program's outputs go back to its arena: a later step over a tensor_store reads them there.
    program_.template write_output_to<0>(nullptr);
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<state_leaves>::value>>(
        [&](auto I) { program_.template write_output_to<1 + I>(nullptr); });
    for (const auto& [name, g] : gradients) gradients.zero_lazily(name);
    step_ = t;
    return norm;
  }

  /// The optimizer state ("optimizer.*" tensors), the step count and the schedule, as
  /// train_step saves them.
  tensor_store state() const {
    tensor_store out = state_;
    for (auto& [name, entry] : device_state_.to_tensors()) out.insert(name, std::move(entry));
    out.metadata["luminal.step"] = std::to_string(step_);
    out.metadata["luminal.optimizer"] = std::string(Opt::name);
    out.metadata[detail::schedule_metadata] = detail::schedule_text(schedule_);
    return out;
  }
  /// Parameters and optimizer state in one store, to save as a checkpoint.
  tensor_store checkpoint(const tensor_store& parameters) const {
    tensor_store out = state();
    for (const auto& [name, entry] : parameters) out.insert(name, entry);
    return out;
  }
  tensor_store checkpoint(const parameter_store<B>& parameters) const { return checkpoint(parameters.to_tensors()); }
  /// Takes the "optimizer.*" tensors and the step count of a checkpoint (other entries
  /// are ignored). Throws checkpoint_error if the step count is missing or malformed, or
  /// if the checkpoint was saved under another schedule (as train_step::load_state).
  void load_state(const tensor_store& checkpoint) {
    tensor_store loaded;
    for (const auto& [name, entry] : checkpoint)
      if (name.starts_with("optimizer.")) loaded.insert(name, entry);
    const std::int64_t steps = loaded.empty() ? 0 : detail::checkpoint_step_count(checkpoint, "the checkpoint");
    if (!loaded.empty()) detail::require_same_schedule(checkpoint, schedule_, "the checkpoint");
    state_ = std::move(loaded);
    device_state_.clear();  // a device step uploads the loaded state when it first needs it
    step_ = steps;
  }

 private:
  static std::span<T> values(tensor_store::entry& e) {
    return {reinterpret_cast<T*>(e.data.data()), e.data.size() / sizeof(T)};
  }
  static std::span<const T> values(const tensor_store::entry& e) {
    return {reinterpret_cast<const T*>(e.data.data()), e.data.size() / sizeof(T)};
  }
  /// "optimizer.exp_avg.p" -> "optimizer.exp_avg.<name>".
  template <class L>
  static std::string state_name(const std::string& name) {
    std::string_view leaf = L::name.view();
    return std::string(leaf.substr(0, leaf.size() - flat_parameter::name.size())) + name;
  }
  template <class L>
  tensor_store::entry& state_of(const std::string& name, const tensor_store::entry& parameter) {
    const std::string key = state_name<L>(name);
    if (!state_.contains(key)) {
      tensor_store::entry zeros;
      zeros.dtype = dtype_of<T>();
      zeros.shape = parameter.shape;
      zeros.data.assign(parameter.data.size(), std::byte{0});
      state_.insert(key, std::move(zeros));
    }
    auto& e = state_.at(key);
    if (e.shape != parameter.shape || e.dtype != dtype_of<T>())
      throw checkpoint_error("luminal: optimizer state '" + key + "' does not have its parameter's shape");
    return e;
  }
  /// The gradient `g` of `name` has a parameter of its dtype (T) and shape.
  template <class Store, class Gradient>
  static void require_matching(const Store& parameters, const std::string& name, const Gradient& g) {
    if (!parameters.contains(name))
      throw input_error("luminal: parameter_optimizer: there is a gradient for '" + name +
                        "', but no parameter of that name");
    const auto& p = parameters.at(name);
    if (g.dtype != dtype_of<T>() || p.dtype != dtype_of<T>() || g.shape != p.shape)
      throw input_error("luminal: parameter_optimizer: parameter '" + name + "' and its gradient must be " +
                        std::string(dtype_name<T>()) + " of one shape");
  }
  /// Binds this step's hyperparameters and the clipping scale; returns the step number.
  /// A non-finite gradient norm throws run_error before anything changes.
  std::int64_t bind_hyperparameters(double norm) {
    if (!std::isfinite(norm))
      throw run_error("luminal: parameter_optimizer: the gradient norm is not finite at step " + std::to_string(step_ + 1) +
                      "; the parameters are left as they were");
    const std::int64_t t = step_ + 1;
    if constexpr (detail::has_learning_rate<Opt>)
      if (schedule_) options_.lr = schedule_->lr_at(step_);
    options_.hyperparameters(t, [&](std::string_view name, double value) {
      const T v = T(value);
      program_.bind(name, &v, std::span<const index_t>{});
    });
    const T scale = norm > max_grad_norm ? T(max_grad_norm / (norm + 1e-6)) : T(1);
    program_.bind(gradient_scale::name.view(), &scale, std::span<const index_t>{});
    return t;
  }
  /// The device buffers of optimizer state L of parameter `name`: zeros, or the state a
  /// checkpoint loaded (load_state), uploaded once.
  template <class L>
  typename parameter_store<B>::slot& device_state_of(const std::string& name, const typename parameter_store<B>::slot& parameter) {
    const std::string key = state_name<L>(name);
    if (!device_state_.contains(key)) {
      device_state_.add(key, dtype_of<T>(), parameter.shape);
      if (state_.contains(key)) {
        const auto& loaded = state_.at(key);
        if (loaded.shape != parameter.shape || loaded.dtype != dtype_of<T>())
          throw checkpoint_error("luminal: optimizer state '" + key + "' does not have its parameter's shape");
        tensor_store one;
        one.insert(key, loaded);
        device_state_.assign(one);
        state_.erase(key);
      }
    }
    auto& s = device_state_.at(key);
    if (s.shape != parameter.shape)
      throw checkpoint_error("luminal: optimizer state '" + key + "' does not have its parameter's shape");
    return s;
  }
  /// `count` elements of the backend's memory for the gradients' sums of squares.
  T* norm_parts(std::size_t count) {
    if (!norm_parts_.contains("parts") || norm_parts_.at("parts").shape[0] != index_t(count)) {
      norm_parts_.clear();
      norm_parts_.add("parts", dtype_of<T>(), {index_t(count)});
    }
    return static_cast<T*>(norm_parts_.at("parts").current);
  }
  void bind(std::string_view leaf, const tensor_store::entry& e, std::span<const index_t> flat) {
    const T* data = reinterpret_cast<const T*>(e.data.data());
    if constexpr (B::host_accessible) program_.bind_view(leaf, data, flat);
    else program_.bind(leaf, data, flat);
  }

  Opt options_;
  update_program program_;
  norm_program norm_program_;
  tensor_store state_;                // host steps' state, and state loaded but not yet on the device
  parameter_store<B> device_state_;   // device steps' state
  parameter_store<B> norm_parts_;     // device steps' per-gradient sums of squares
  std::int64_t step_ = 0;
  std::optional<lr_schedule> schedule_;
};

}  // namespace luminal
