// train_step: the compiled training step that compile_train_step (train.hpp) returns, and
// what it does at run time: binding the step's tensors, running the gradient program,
// checking the loss (and, under loss scaling, the gradients), running the update, and
// saving and loading its state.
//
//     auto step = compile_train_step(loss, adamw{.lr = 1e-3f});   // a train_step<...>
//     float value = step.run();
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include "../core/communicator.hpp"
#include "optimizers.hpp"
#include "schedules.hpp"
#include "../grad/reverse.hpp"
#include "../io/safetensors.hpp"
#include "../ops/exchange.hpp"
#include "../runtime/parameter_store.hpp"
#include "buffers.hpp"
#include "loss_scaling.hpp"
#include "train_programs.hpp"

namespace luminal {

namespace detail {
// By the leaf's role, not a partial specialization on Param<Name, T, S>: nvcc does not
// deduce the fixed_string placeholder there and would find no parameters at all.
template <class N>
constexpr bool parameter_leaf() {
  if constexpr (requires { N::role; }) return N::role == leaf_role::parameter;
  else return false;
}
template <class N>
struct is_parameter_leaf : std::bool_constant<parameter_leaf<N>()> {};

/// Whether one of the leaves L is named `name` (over the leaves, not the program: see
/// detail::position_in).
template <class... L>
constexpr bool has_leaf(boost::mp11::mp_list<L...>, std::string_view name) {
  return ((L::name.view() == name) || ...);
}

/// splitmix64: a well-mixed 64-bit value of (seed, step) for the graph's "rng.seed".
constexpr std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace detail

/// A compiled training step: `GradientProgram` computes the loss (output 0) and the
/// gradients that the update reads (output GradientOutputs[i] is parameter i's, -1 where the
/// update recomputes it from leaves); `UpdateProgram` computes the new value of each of
/// `Slots` (an mp_list: the parameters first, then each parameter's state), output i for
/// slot i. The update runs only once the loss is known to be finite. `Assignments`: the
/// loss's buffer assignments (buffers.hpp), the gradient program's next outputs. Scaling:
/// detail::no_loss_scaling, or detail::scaled_loss (loss_scaling.hpp), whose check is the
/// gradient program's last output. Move-only.
template <class B, class Opt, gradient_clipping Clipping, class GradientProgram, class UpdateProgram, class Slots,
          auto GradientOutputs, class Assignments = boost::mp11::mp_list<>, class Scaling = detail::no_loss_scaling>
class train_step {
 public:
  using gradient_program_type = GradientProgram;
  using update_program_type = UpdateProgram;
  using loss_type = value_t<typename GradientProgram::template output_node<0>>;
  static constexpr std::size_t slot_count = boost::mp11::mp_size<Slots>::value;
  static constexpr std::size_t parameter_count = GradientOutputs.size();
  /// The buffers the step holds: those the loss assigns, then those it only reads.
  using buffers = detail::step_buffers<Assignments, GradientProgram, UpdateProgram>;
  /// The slots' names, roles, types and shapes, then the buffers', for loops that need no types.
  static constexpr auto& slots =
      detail::leaf_entries<list_name<boost::mp11::mp_append<Slots, buffers>>, list_name<typename UpdateProgram::nodes>>;
  /// Which slots the update writes over their current values (detail::slots_updated_in_place);
  /// the others go to the store's second buffers, which swap after the run.
  static constexpr std::array<bool, slot_count> in_place = detail::slots_updated_in_place<UpdateProgram>(Slots{});

  train_step(GradientProgram gradients, UpdateProgram update, Opt optimizer, B backend = {}, Scaling scaling = {})
      : gradient_program_(std::move(gradients)), update_program_(std::move(update)), optimizer_(std::move(optimizer)),
        store_(backend), handed_over_(std::move(backend)), scaling_(std::move(scaling)) {
    for (const detail::leaf_entry& slot : slots) {
      std::vector<index_t> shape;
      for (std::size_t k = 0; k < slot.rank; ++k) {
        const Dim& d = slot.dims[k];
        if (!d.is_static())
          throw input_error("luminal: parameter '" + std::string(slot.name) + "' has the symbolic shape " +
                            std::string(slot.shape_text) + "; parameters need static extents");
        shape.push_back(d.offset);
      }
      store_.add(slot.name, slot.type, std::move(shape));
    }
    // The loss and each gradient the update reads get memory of their own: the update
    // program reads them where the gradient program wrote them.
    handed_over_.add("loss", dtype_of<loss_type>(), {});
    for (std::size_t i = 0; i < parameter_count; ++i)
      if (GradientOutputs[i] >= 0 && handed_over_source[std::size_t(GradientOutputs[i])] == GradientOutputs[i]) {
        std::vector<index_t> shape;
        for (std::size_t k = 0; k < slots[i].rank; ++k) shape.push_back(slots[i].dims[k].offset);
        handed_over_.add(output_name(GradientOutputs[i]), slots[i].type, std::move(shape));
      }
    for (std::size_t k = 0; k < handed_over_source.size(); ++k)  // found once, not by name every step
      handed_over_memory_[k] = handed_over_.at(output_name(handed_over_source[k])).current;
    for (std::size_t i = 0; i < slot_count; ++i) gradient_reads_slot_[i] = GradientProgram::reads_input(slots[i].name);
    for (std::size_t i = 0; i < parameter_count; ++i) gradient_names_[i] = std::string(detail::gradient_prefix.view()) + std::string(slots[i].name);
  }

  /// Binds a data input (copied), as program::bind does. Parameters, optimizer state and
  /// hyperparameters are bound by the step itself; naming one is an input_error.
  template <class E>
  void bind(std::string_view name, const xt::xexpression<E>& array) {
    require_data_input(name);
    // A data input that a recomputed gradient reads (detail::recomputed_by_update) goes to both.
    if (UpdateProgram::reads_input(name)) update_program_.bind(name, array);
    if (!UpdateProgram::reads_input(name) || GradientProgram::reads_input(name)) gradient_program_.bind(name, array);
  }
  template <element_type T>
  void bind(std::string_view name, const T* data, std::span<const index_t> shape) {
    require_data_input(name);
    if (UpdateProgram::reads_input(name)) update_program_.bind(name, data, shape);
    if (!UpdateProgram::reads_input(name) || GradientProgram::reads_input(name)) gradient_program_.bind(name, data, shape);
  }

  /// Binds a data input without copying: memory of the step's backend (a device pointer,
  /// a Kokkos::View's data through bind_view in kokkos.hpp) that stays valid and unchanged
  /// until run() returns.
  template <element_type T>
  void bind_device(std::string_view name, const T* data, std::span<const index_t> shape) {
    require_data_input(name);
    if (UpdateProgram::reads_input(name)) update_program_.bind_device(name, data, shape);
    if (!UpdateProgram::reads_input(name) || GradientProgram::reads_input(name))
      gradient_program_.bind_device(name, data, shape);
  }

  /// Runs one step and returns the loss (of the parameters before the update). A loss
  /// that is NaN or infinite throws run_error, and the parameters and state stay as they
  /// were before this step: the update program has not run. Under dynamic loss scaling a
  /// gradient that overflowed skips the update likewise, without an error (loss_scaling()).
  loss_type run() {
    if (comm_ && !synchronized_) synchronize();
    const std::int64_t t = step_ + 1;
    if constexpr (detail::has_learning_rate<Opt>)
      if (schedule_) optimizer_.lr = schedule_->lr_at(step_);
    optimizer_.hyperparameters(t, [&](std::string_view name, double value) { bind_scalar(name, value); });
    if constexpr (Clipping == gradient_clipping::global_norm) bind_scalar("optim.max_grad_norm", max_grad_norm);
    if constexpr (Scaling::dynamic) {
      bind_scalar("optim.loss_scale", scaling_.scale);
      bind_scalar("optim.inverse_loss_scale", 1.0 / scaling_.scale);
    }
    if constexpr (detail::has_leaf(typename GradientProgram::leaves{}, "rng.seed") ||
                  detail::has_leaf(typename UpdateProgram::leaves{}, "rng.seed"))
      bind_scalar("rng.seed", double(detail::mix(seed ^ detail::mix(std::uint64_t(t))) >> 40));  // exact in f32
    // Loops over the slots' entries, not a function per slot: each would be mangled with
    // the whole step's type, which names every parameter.
    for (std::size_t i = 0; i < slot_count; ++i) {
      const detail::leaf_entry& slot = slots[i];
      auto& s = store_.materialized(slot.name);
      if (gradient_reads_slot_[i]) gradient_program_.bind_device(slot.name, slot.type, s.current, s.shape);
      update_program_.bind_device(slot.name, slot.type, s.current, s.shape);
      update_program_.write_output_to(i, slot.type, in_place[i] ? s.current : store_.next_buffer(slot.name));
    }
    detail::bind_buffers<buffers, Assignments, handed_over_source.size()>(gradient_program_, update_program_, store_);
    for (std::size_t k = 0; k < handed_over_source.size(); ++k)
      if (handed_over_source[k] == int(k))
        gradient_program_.write_output_to(k, GradientProgram::output_types[k], handed_over_memory_[k]);
    gradient_program_.run();
    loss_type loss{};
    gradient_program_.template read_output<0>(std::span<loss_type>(&loss, 1));
    const bool finite = std::isfinite(double(loss));
    // Every rank applied the same mean: a loss that is not finite anywhere stops them all
    // alike (every rank asks, whatever its own loss, or the others would wait for it).
    if (comm_ ? comm_->any(!finite) : !finite)
      throw run_error("luminal: the loss is " +
                      (finite ? std::string("not finite on another rank")
                              : std::string(std::isnan(double(loss)) ? "NaN" : "infinite")) +
                      " at step " + std::to_string(t) +
                      "; the parameters and optimizer state are left as they were before this step");
    if constexpr (Scaling::dynamic) {
      loss_type check{};
      gradient_program_.template read_output<GradientProgram::output_ids.size() - 1>(std::span<loss_type>(&check, 1));
      if (!scaling_.record(std::isfinite(double(check)))) return loss;  // skipped: the scale backed off
    }
    for (std::size_t i = 0; i < parameter_count; ++i)
      if (const int k = GradientOutputs[i]; k >= 0)
        update_program_.bind_device(gradient_names_[i], slots[i].type, handed_over_memory_[std::size_t(k)],
                                    store_.at(slots[i].name).shape);
    update_program_.run();
    store_.swap_buffers();  // the slots not updated in place
    step_ = t;
    return loss;
  }

  /// Kernels one step runs: the gradient program's, then the update's.
  static constexpr int kernel_count() { return GradientProgram::kernel_count() + UpdateProgram::kernel_count(); }
  /// Times every kernel of the following steps (or stops timing): see profile().
  void set_profiling(bool on) {
    gradient_program_.set_profiling(on);
    update_program_.set_profiling(on);
  }
  /// Every kernel of a step, slowest first, as program::profile(); the update's kernels are
  /// labelled "update kernel k".
  std::string profile() const {
    auto rows = gradient_program_.profile_rows();
    for (auto& row : update_program_.profile_rows("update ")) rows.push_back(std::move(row));
    return detail::profile_report(std::move(rows), gradient_program_.profiled_runs());
  }
  /// program::describe() of the gradient program, then of the update program.
  std::string describe() const {
    const auto written_over = std::count(in_place.begin(), in_place.end(), true);
    return gradient_program_.describe() + "the update, once the loss is finite: " +
           std::to_string(UpdateProgram::kernel_count()) + " kernels of a program of its own, writing " +
           std::to_string(written_over) + " of " + std::to_string(slot_count) +
           " tensors over their current values\n" + update_program_.describe();
  }
  /// Seconds spent waiting for the gradients' exchanges (program::exchange_wait_seconds).
  double exchange_wait_seconds() const { return gradient_program_.exchange_wait_seconds(); }

  /// Makes the step data parallel over `comm` (compile_train_step with data_parallel does
  /// this): the next run() checks that every rank holds the same model and takes rank 0's
  /// parameters, optimizer state and step count. A GPU backend needs a communicator that
  /// sums device memory (nccl_communicator).
  void set_communicator(communicator& comm) {
    static_assert(GradientProgram::exchanges, "luminal: this step was not compiled with data_parallel");
    if (!B::host_accessible && !comm.sums_device_memory())
      throw distributed_error(std::string("luminal: data_parallel on the ") + B::name +
                              " backend needs a communicator that sums device memory (nccl_communicator, "
                              "luminal/distributed/nccl.hpp); this one sums host memory only");
    comm_ = &comm;
    gradient_program_.set_communicator(comm);
    synchronized_ = false;
  }
  /// The communicator of a data-parallel step, or nullptr.
  communicator* comm() const { return comm_; }

  /// Steps taken so far (the optimizer's bias corrections count from it).
  std::int64_t step_count() const { return step_; }
  void set_step_count(std::int64_t steps) { step_ = steps; }

  Opt& optimizer() { return optimizer_; }
  const Opt& optimizer() const { return optimizer_; }

  /// Sets optimizer().lr to schedule.lr_at(step_count()) before each step (schedules.hpp),
  /// so optimizer().lr holds the rate of the last step; std::nullopt leaves the lr to
  /// optimizer().lr again. Set it before load(): a checkpoint records its schedule, and
  /// load_state() refuses to resume under another (checkpoint_error naming both).
  void set_schedule(std::optional<lr_schedule> schedule) {
    static_assert(detail::has_learning_rate<Opt>, "luminal: set_schedule: this optimizer has no field lr to schedule");
    schedule_ = std::move(schedule);
  }
  const std::optional<lr_schedule>& schedule() const { return schedule_; }

  parameter_store<B>& store() { return store_; }
  const parameter_store<B>& store() const { return store_; }
  /// The program of the loss and the gradients (forward and backward), and the program of
  /// the optimizer's update, which runs after it once the loss is finite.
  GradientProgram& gradient_program() { return gradient_program_; }
  const GradientProgram& gradient_program() const { return gradient_program_; }
  UpdateProgram& update_program() { return update_program_; }
  const UpdateProgram& update_program() const { return update_program_; }

  /// Parameters, optimizer state, step count, optimizer name and learning-rate schedule
  /// ("luminal.lr_schedule": lr_schedule::describe(), or "none") as one tensor_store.
  tensor_store state() const {
    tensor_store out = store_.to_tensors();
    out.metadata["luminal.step"] = std::to_string(step_);
    out.metadata["luminal.optimizer"] = std::string(Opt::name);
    out.metadata[detail::schedule_metadata] = detail::schedule_text(schedule_);
    scaling_.record_in(out.metadata);
    return out;
  }

  /// Loads what state() saved, or parameters alone (a model written by PyTorch): every
  /// parameter must be present with its dtype and shape; optimizer state must be all
  /// present or all absent (then it restarts at zero, with the step count). A checkpoint
  /// with optimizer state resumes its step count, so it must have been saved under this
  /// step's schedule (set_schedule(); see detail::require_same_schedule). Throws
  /// checkpoint_error naming what is missing or wrong; the store is unchanged then.
  void load_state(const tensor_store& values, const std::string& origin = "the checkpoint") {
    std::size_t params = 0, states = 0;
    for (const detail::leaf_entry& slot : slots) {
      const bool present = values.contains(slot.name);
      if (slot.role != leaf_role::state) {  // a parameter or a buffer
        if (!present)
          throw checkpoint_error("luminal: " + origin + " has no tensor '" + std::string(slot.name) + "', a " +
                                 (slot.role == leaf_role::buffer ? "buffer" : "parameter") + " of this model");
        ++params;
      } else {
        states += present;
      }
      if (present) {
        const auto& entry = values.at(slot.name);
        const auto& s = store_.at(slot.name);
        if (entry.dtype != s.dtype || entry.shape != s.shape)
          throw checkpoint_error("luminal: " + origin + " holds '" + std::string(slot.name) + "' as " +
                                 store_.describe(entry.dtype, entry.shape) + ", but this model's is " +
                                 store_.describe(s.dtype, s.shape));
      }
    }
    if (states != 0 && states != slots.size() - params)
      throw checkpoint_error("luminal: " + origin + " holds the optimizer state of only some parameters (" +
                             std::to_string(states) + " of " + std::to_string(slots.size() - params) + " tensors)");
    const std::int64_t steps = states != 0 ? detail::checkpoint_step_count(values, origin) : 0;
    if (states != 0) detail::require_same_schedule(values, schedule_, origin);
    if (states == 0) zero_state();
    scaling_.restore(values.metadata, origin);
    store_.assign(values);
    step_ = steps;
    synchronized_ = false;  // a data-parallel step takes rank 0's values again
  }

  /// What load_state() reads of a checkpoint, for load_safetensors(path, specs), which
  /// checks every name, element type and shape against the file's header before it reads
  /// any data: each parameter and buffer (required) and each optimizer state tensor
  /// (optional: a file of parameters alone restarts the state).
  ///     tensor_store saved = load_safetensors(path, step.checkpoint_tensors());  // nothing else in it
  static std::vector<tensor_spec> checkpoint_tensors() {
    std::vector<tensor_spec> specs;
    specs.reserve(slots.size());
    for (const detail::leaf_entry& slot : slots) {
      tensor_spec spec{std::string(slot.name), slot.type, {}, slot.role != leaf_role::state};
      for (std::size_t k = 0; k < slot.rank; ++k) spec.shape.push_back(slot.dims[k].offset);
      specs.push_back(std::move(spec));
    }
    return specs;
  }

  /// Writes state() to a safetensors file atomically (io/safetensors.hpp).
  void save(const std::string& path) const { save_safetensors(state(), path); }
  /// Reads a safetensors file with load_state(): only the tensors checkpoint_tensors()
  /// names are read (others, a PyTorch model's buffers say, are skipped), and each is
  /// checked against the header before any data is read.
  void load(const std::string& path) {
    load_state(load_safetensors(path, checkpoint_tensors(), other_tensors::skip), "'" + path + "'");
  }

  /// The loss scale, its settings and its counts (dynamic_loss_scale) when compiled with one.
  const Scaling& loss_scaling() const { return scaling_; }
  Scaling& loss_scaling() { return scaling_; }

  /// The global-norm bound when compiled with gradient_clipping::global_norm.
  double max_grad_norm = std::numeric_limits<double>::infinity();
  /// Seeds the graph's "rng.seed" input (dropout), mixed with the step count.
  std::uint64_t seed = 0;

 private:
  void require_data_input(std::string_view name) const {
    bool reserved = name.starts_with("optim.") || name == "rng.seed";
    for (const detail::leaf_entry& slot : slots)
      reserved = reserved || slot.name == name || (name.starts_with(detail::gradient_prefix.view()) &&
                                                  name.substr(detail::gradient_prefix.view().size()) == slot.name);
    if (reserved)
      throw input_error("luminal: '" + std::string(name) +
                        "' is bound by the training step (a parameter, optimizer state or hyperparameter); "
                        "change it through store(), optimizer() or the step's fields");
  }
  void bind_scalar(std::string_view name, double value) {
    const loss_type v = loss_type(value);
    const bool gradients = GradientProgram::reads_input(name);
    if (gradients) gradient_program_.bind(name, &v, std::span<const index_t>{});
    if (!gradients || UpdateProgram::reads_input(name)) update_program_.bind(name, &v, std::span<const index_t>{});
  }
  /// The memory an output of the gradient program is written to: "loss", "output k".
  static std::string output_name(int k) { return k == 0 ? "loss" : "output " + std::to_string(k); }
  /// For each output of the gradient program before the buffers' values, the first output that
  /// is the same node (the program writes a node once): a gradient that is also another's, or the loss.
  static constexpr auto handed_over_source = [] {
    constexpr auto& ids = GradientProgram::output_ids;
    std::array<int, ids.size() - boost::mp11::mp_size<Assignments>::value - Scaling::check_outputs> first{};
    for (std::size_t k = 0; k < first.size(); ++k) {
      first[k] = int(k);
      for (std::size_t j = 0; j < k; ++j)
        if (ids[j] == ids[k]) {
          first[k] = int(j);
          break;
        }
    }
    return first;
  }();
  /// Refuses ranks whose models differ, then makes every rank's store and step count rank 0's.
  void synchronize() {
    std::string description;
    for (const detail::leaf_entry& slot : slots) {
      const auto& s = store_.at(slot.name);
      description += detail::tensor_line(slot.name, s.dtype, s.shape);
    }
    check_same_model(description, *comm_);
    for (const auto& [name, s] : store_) comm_->broadcast(s.current, s.bytes, 0);
    comm_->broadcast(&step_, sizeof step_, 0);
    synchronized_ = true;
  }
  void zero_state() {
    for (const detail::leaf_entry& slot : slots)
      if (slot.role == leaf_role::state) store_.zero(slot.name);
  }

  GradientProgram gradient_program_;
  UpdateProgram update_program_;
  Opt optimizer_;
  parameter_store<B> store_;
  parameter_store<B> handed_over_;  // the loss and the gradients, from one program to the other
  std::array<void*, handed_over_source.size()> handed_over_memory_{};  // output k's memory in handed_over_
  std::array<bool, slot_count> gradient_reads_slot_{};  // whether the gradient program reads slot i
  std::array<std::string, parameter_count> gradient_names_;  // the update's input of parameter i's gradient
  std::int64_t step_ = 0;
  std::optional<lr_schedule> schedule_;
  Scaling scaling_;
  communicator* comm_ = nullptr;
  bool synchronized_ = false;
};

}  // namespace luminal
