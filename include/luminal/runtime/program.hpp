// compile(outputs...) -> a program: binds inputs, plans buffers once per set of extents,
// and runs the fused kernels. A second run with the same extents allocates nothing.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <boost/mp11/algorithm.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>
#include <xtensor/xarray.hpp>

#include "../plan/arena.hpp"
#include "../core/backend.hpp"
#include "bindings.hpp"
#include "program_inputs.hpp"
#include "describe.hpp"
#include "dot.hpp"
#include "../exec/eval.hpp"
#include "../core/exceptions.hpp"
#include "../exec/kernels.hpp"
#include "../io/allocation_error.hpp"
#include "profile_report.hpp"

namespace luminal {

template <class N>
using is_leaf_node = std::bool_constant<N::kind == op_kind::input>;

/// The inputs of the program of Outputs on B: its leaves, among its nodes, by short names.
template <class B, class... Outputs>
using program_inputs_of = detail::program_inputs<B, list_name<filter_nodes<is_leaf_node, topo_nodes<Outputs...>>>,
                                                 list_name<topo_nodes<Outputs...>>>;

/// A compiled program for the outputs' graph on backend B. Move-only; owns its memory.
///
///     auto prog = compile(y);                  // or compile<kokkos<>>(y)
///     prog.bind("x", xt::xarray<float>{...});  // copies; bind_view() does not
///     prog.run();
///     xt::xarray<float> out = prog.output<0>();
/// Inputs are bound through the bind() family of detail::program_inputs (program_inputs.hpp).
template <class B, retention_policy Policy, expression... Outputs>
class program : public program_inputs_of<B, Outputs...> {
  static_assert(defined_backend<B>, LUMINAL_BACKEND_DEFINED_MESSAGE);
  using inputs = program_inputs_of<B, Outputs...>;
  using inputs::backend_, inputs::bindings_, inputs::formats_, inputs::extents_current_, inputs::leaf_table;

 public:
  using nodes = topo_nodes<Outputs...>;
  static constexpr std::array<int, sizeof...(Outputs)> output_ids{node_index<nodes, Outputs>::value...};
  /// Each output's element type, and whether it is an input (which no kernel writes).
  static constexpr std::array<dtype_tag, sizeof...(Outputs)> output_types{dtype_of<value_t<Outputs>>()...};
  static constexpr std::array<bool, sizeof...(Outputs)> output_is_input{(Outputs::kind == op_kind::input)...};
  using layout = program_layout<list_name<nodes>, output_ids, Policy, sums_gemm_batches<B>>;
  static constexpr std::size_t node_count = layout::node_count;
  static constexpr std::size_t max_rank = layout::max_rank;
  static constexpr auto plan = layout::plan;
  using leaves = filter_nodes<is_leaf_node, nodes>;
  static constexpr std::size_t leaf_count = boost::mp11::mp_size<leaves>::value;
  template <std::size_t I>
  using output_node = boost::mp11::mp_at_c<boost::mp11::mp_list<Outputs...>, I>;
  /// Whether the program holds exchange nodes (ops/exchange.hpp): it then needs a communicator.
  static constexpr bool exchanges = detail::needs_communicator<nodes>;
  /// Whether the program holds gathers, whose out-of-range indices run() reports: only
  /// such a run reads a flag back from the device, and so waits for its kernels.
  static constexpr bool checks_indices =
      detail::holds_kind(layout::table, op_kind::gather) || detail::any_reports_bad_indices<nodes>::value;

  explicit program(B backend = {}) : inputs(std::move(backend)) {
    dims_.assign(node_count * max_rank, 0);
    planned_dims_.assign(node_count * max_rank, -1);
    buffers_device_ = static_cast<void**>(backend_.allocate(node_count * sizeof(void*)));
    dims_device_ = static_cast<index_t*>(backend_.allocate(dims_.size() * sizeof(index_t)));
    error_device_ = static_cast<int*>(backend_.allocate(sizeof(int)));
  }
  program(const program&) = delete;
  program& operator=(const program&) = delete;
  program(program&& other) noexcept { swap(other); }
  program& operator=(program&& other) noexcept { swap(other); return *this; }
  ~program() { release(); }

  // ---- running ------------------------------------------------------------------------

  /// The communicator that runs the program's exchange kernels (a data-parallel training
  /// step sets it); it must outlive the runs.
  void set_communicator(communicator& comm) { exchange_.comm = &comm; }
  /// Seconds run() spent waiting for exchanges to arrive, summed over runs: the exchange
  /// time that the kernels between an exchange's start and its use did not hide.
  double exchange_wait_seconds() const { return exchange_.waited_seconds; }

  /// Runs every kernel. Throws input_error for missing or inconsistent inputs. On a GPU it
  /// queues them and returns (reading an output waits), unless the program gathers.
  void run() {
    if constexpr (exchanges) {
      if (!exchange_.comm)
        throw input_error("luminal: this program averages gradients over ranks (it has exchange nodes); "
                          "give it a communicator with set_communicator() first");
      exchange_.in_flight.assign(exchange_.in_flight.size(), false);  // a run that threw left none pending
      exchange_.pending = 0;
    }
    resolve_extents();
    if (!planned_ || dims_ != planned_dims_) replan();
    for (std::size_t i = 0; i < leaf_count; ++i)
      buffers_[std::size_t(leaf_table[i].node)] = const_cast<void*>(bindings_[i].data);
    for (int id : output_ids)
      if (external_[id]) buffers_[id] = external_[id];
    if (!table_uploaded_ || buffers_ != uploaded_buffers_) {  // a training step alternates two tables
      backend_.to_device(buffers_device_, buffers_.data(), node_count * sizeof(void*));
      uploaded_buffers_ = buffers_;
      table_uploaded_ = true;
    }
    if constexpr (checks_indices) {
      int no_error = 0;
      backend_.to_device(error_device_, &no_error, sizeof(int));
    }
    kernel_context ctx{buffers_device_, dims_device_, error_device_};
    kernel_runner<B, layout> runner{backend_, ctx, buffers_.data(), dims_.data(), &exchange_, formats_.data(), op_states_.data()};
    auto launch_all = [&] {
      boost::mp11::mp_for_each<boost::mp11::mp_iota_c<plan.kernel_count>>(
          [&](auto K) { launch_kernel<int(decltype(K)::value)>(runner); });
    };
    // A backend that records launches (CUDA Graphs) gets everything they depend on as key.
    if constexpr (requires { backend_.launch(std::span<const std::byte>{}, launch_all); }) {
      if (profiling_) {
        launch_all();
      } else {
        std::array<std::byte, sizeof(buffers_) + sizeof(index_t) * node_count * max_rank> key;
        std::memcpy(key.data(), buffers_.data(), sizeof(buffers_));
        std::memcpy(key.data() + sizeof(buffers_), dims_.data(), sizeof(index_t) * dims_.size());
        backend_.launch(key, launch_all);
      }
    } else {
      launch_all();
    }
    profiled_runs_ += profiling_;
    ran_ = true;
    if constexpr (checks_indices) {
      int error = 0;
      backend_.to_host(&error, error_device_, sizeof(int));
      if (error) throw run_error("luminal: a gather index was outside the table's first axis");
    }
  }

  // ---- outputs ------------------------------------------------------------------------

  /// Output I as a new xtensor array (a copy).
  template <std::size_t I = 0>
  auto output() const {
    using N = output_node<I>;
    using T = typename N::value_type;
    constexpr int id = output_ids[I];
    require_ran();
    std::vector<std::size_t> shape(N::shape::rank);
    for (std::size_t k = 0; k < shape.size(); ++k) shape[k] = std::size_t(dims_[id * max_rank + k]);
    xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
    backend_copy_out(out.data(), buffers_[id], out.size() * sizeof(T));
    return out;
  }

  /// Copies output I into `destination`, which must hold exactly its element count.
  template <std::size_t I = 0>
  void read_output(std::span<typename output_node<I>::value_type> destination) const {
    using T = typename output_node<I>::value_type;
    require_ran();
    std::size_t count = element_count(output_ids[I]);
    if (destination.size() != count)
      throw input_error("luminal: output " + std::to_string(I) + " holds " + std::to_string(count) +
                        " elements, but the destination holds " + std::to_string(destination.size()));
    backend_copy_out(destination.data(), buffers_[output_ids[I]], count * sizeof(T));
  }

  /// Output I where it lies, in this backend's memory (device memory on a GPU), valid
  /// until the next run(): a tape copies or adds it into its own buffers on the device.
  template <std::size_t I = 0>
  const typename output_node<I>::value_type* output_data() const {
    require_ran();
    return static_cast<const typename output_node<I>::value_type*>(buffers_[output_ids[I]]);
  }

  /// Makes output I be written straight into `destination` (memory of this backend that
  /// holds its element count) instead of the program's arena, from the next run() on;
  /// nullptr gives it back to the arena. A training step points the updated parameters at
  /// the parameter store this way, so that no step copies them.
  template <std::size_t I>
  void write_output_to(typename output_node<I>::value_type* destination) {
    static_assert(output_node<I>::kind != op_kind::input,
                  "luminal: write_output_to: this output is an input, which no kernel writes");
    point_output(output_ids[I], destination);
  }

  /// write_output_to for output i known at run time: `type` must be its element type
  /// (input_error otherwise, or for an output that is an input).
  void write_output_to(std::size_t i, dtype_tag type, void* destination) {
    if (i >= output_ids.size() || output_types[i] != type || output_is_input[i])
      throw input_error("luminal: write_output_to: program output " + std::to_string(i) +
                        (i >= output_ids.size() ? " does not exist"
                         : output_is_input[i]   ? " is an input, which no kernel writes"
                                                : " holds " + std::string(dtype_name(output_types[i])) + ", not " +
                                                      std::string(dtype_name(type))));
    point_output(output_ids[i], destination);
  }

  /// Works out every node's extents from the inputs bound now, without running (run()
  /// does the same first), so that output_shape() is valid before the run: a tape sizes
  /// the memory it then hands to write_output_to(). Throws input_error as run() would.
  void resolve_extents() {
    if (extents_current_) return;  // nothing was bound since they were worked out
    resolve_symbols();
    compute_dims();
    extents_current_ = true;
  }

  /// Runtime extents of output I after run() or resolve_extents().
  template <std::size_t I = 0>
  std::vector<index_t> output_shape() const {
    constexpr int id = output_ids[I];
    return {dims_.begin() + id * max_rank, dims_.begin() + id * max_rank + output_node<I>::shape::rank};
  }

  // ---- introspection ------------------------------------------------------------------

  /// The backend object this program runs on (its stream and transfer counters on CUDA).
  const B& backend() const { return backend_; }

  /// Number of kernels one run launches (fused elementwise groups, reductions, matmuls).
  static constexpr int kernel_count() { return plan.kernel_count; }
  /// Times every kernel of the following runs (or stops timing): see profile().
  void set_profiling(bool on) {
    profiling_ = on;
    kernel_seconds_.assign(plan.kernel_count, 0.0);
    profiled_runs_ = 0;
  }
  /// The kernels' mean times over the runs since set_profiling(true), slowest first: one
  /// line each with milliseconds per run, share of the total, and the node the kernel
  /// computes (op, element type, shape). Elementwise chains fused into a kernel are not
  /// listed separately.
  std::string profile() const { return detail::profile_report(profile_rows(), profiled_runs_); }
  /// profile()'s rows in run order (milliseconds per run, "<prefix>kernel k: <label>"), for
  /// a report over several programs (train_step::profile).
  std::vector<std::pair<double, std::string>> profile_rows(std::string_view prefix = {}) const {
    return detail::kernel_time_rows<layout>(kernel_seconds_, profiled_runs_, prefix);
  }
  /// Runs timed since set_profiling(true).
  std::size_t profiled_runs() const { return profiled_runs_; }

  /// Every kernel in run order: what it computes, how it loops (one flat loop, a loop
  /// nest and its inner extent, a reduction, a GEMM), the views and maps it fuses, the
  /// stored values it reads and the bytes it moves, for the extents of the last run().
  /// After profiled runs (set_profiling) also its time and GB/s or GFLOP/s.
  std::string describe() const {
    require_ran();
    return detail::describe_kernels<layout>(dims_, profiled_runs_ ? kernel_seconds_ : std::vector<double>{},
                                            profiled_runs_);
  }

  /// Bytes of the buffer arena planned for the current extents (0 before the first run).
  std::size_t arena_bytes() const { return arena_bytes_; }
  /// Sum of the bytes every stored intermediate would take without sharing memory.
  std::size_t unshared_bytes() const { return unshared_bytes_; }

  /// How many forward nodes the backward reads (outputs after the first are the backward).
  static constexpr std::size_t retained_count() {
    std::size_t n = 0;
    for (bool r : layout::retained) n += r;
    return n;
  }
  /// The retention set: one line per node, its op, type and shape, and whether the plan
  /// keeps it in a buffer ("stored") or recomputes it inside backward kernels. Under
  /// retention_policy::budget, for the extents of the last run: every forward buffer the
  /// backward needs, "[kept]" or "[recomputed]" (its kernel runs again in the backward).
  std::vector<std::string> retained_nodes() const {
    if constexpr (layout::has_recompute_entries) require_ran();
    std::vector<std::string> lines;
    constexpr auto& labels = detail::node_labels<nodes>;
    for (std::size_t i = 0; i < node_count; ++i) {
      if constexpr (layout::has_recompute_entries) {
        bool needed = plan.backward_last_use[i] >= 0 || retention_.last_recompute_read[i] >= 0;
        if (detail::is_forward_buffer(plan, int(i)) && needed)
          lines.push_back(detail::format_label(labels[i], " ") + (retention_.recompute[i] ? " [recomputed]" : " [kept]"));
      } else if (layout::retained[i]) {
        lines.push_back(detail::format_label(labels[i], " ") + (plan.stored[i] ? " [stored]" : " [recomputed]"));
      }
    }
    return lines;
  }
  /// Bytes of the forward's buffers that stay live into the backward (the values it reads,
  /// and those a recomputation or a recomputed elementwise value reads), for the extents
  /// of the last run().
  std::size_t retained_bytes() const {
    require_ran();
    return retention_.retained_bytes;
  }
  /// The same for the given symbol values, without running: prog.retained_bytes({{"Batch", 128}})
  std::size_t retained_bytes(std::initializer_list<std::pair<std::string_view, index_t>> values) const {
    return retention_at(values).retained_bytes;
  }
  /// FLOPs the backward spends recomputing forward values (retention_policy::budget), for
  /// the extents of the last run(), or, like retained_bytes, for given symbol values.
  double recomputed_flops() const {
    require_ran();
    return retention_.recomputed_flops;
  }
  double recomputed_flops(std::initializer_list<std::pair<std::string_view, index_t>> values) const {
    return retention_at(values).recomputed_flops;
  }

 private:
  /// Node id, an output, is written to `destination` from the next run on (nullptr: the arena).
  void point_output(int id, void* destination) {
    if ((external_[id] == nullptr) != (destination == nullptr)) planned_ = false;  // the arena changes
    external_[id] = destination;
  }

  void resolve_symbols() { detail::resolve_symbols(leaf_table, bindings_, symbols_); }

  void compute_dims() { layout::extents::resolve_all(symbols_, dims_.data()); }

  detail::recompute_choice retention_at(std::initializer_list<std::pair<std::string_view, index_t>> values) const {
    symbol_values symbols;
    for (const auto& [name, value] : values) symbols.set(name, value);
    std::vector<index_t> dims(node_count * max_rank, 0);
    layout::extents::resolve_all(symbols, dims.data());
    return detail::retention_for<layout>(dims);
  }

  std::size_t element_count(int id) const {
    std::size_t n = 1;
    for (std::size_t k = 0; k < std::size_t(layout::table[id].rank); ++k) n *= std::size_t(dims_[id * max_rank + k]);
    return n;
  }

  /// Places every stored intermediate in one arena: buffers whose lifetimes (producing
  /// kernel .. last reading kernel, widened to the groups that run as one loop) overlap
  /// get disjoint ranges; largest first.
  void replan() {
    retention_ = detail::retention_for<layout>(dims_);  // which recompute entries run
    std::vector<buffer_request> requests;
    requests.reserve(layout::buffers.size());
    unshared_bytes_ = 0;
    for (const detail::buffer_span& s : layout::buffers) {
      if (external_[std::size_t(s.id)]) continue;
      std::size_t bytes = (element_count(s.id) * std::size_t(layout::table[s.id].element_bytes) + 63) / 64 * 64;
      detail::set_lifetimes(retention_, s, requests.emplace_back(buffer_request{s.id, bytes}), &widen_to_groups);
      unshared_bytes_ += bytes;
    }
    std::size_t total = place_in_arena(requests);
    if (total > arena_capacity_) {
      if (arena_) backend_.deallocate(arena_);
      arena_ = nullptr, arena_capacity_ = 0, planned_ = false;  // nothing dangling if the allocation fails
      arena_ = allocate_named(total, [&] { return backend_.allocate(total); }, [&] {
        return "the arena of a program of " + std::to_string(kernel_count()) + " kernels (" +
               std::to_string(requests.size()) + " buffers for the bound extents)";
      });
      arena_capacity_ = total;
    }
    arena_bytes_ = total;
    for (const buffer_request& r : requests) buffers_[r.id] = static_cast<char*>(arena_) + r.offset;
    backend_.to_device(dims_device_, dims_.data(), dims_.size() * sizeof(index_t));
    planned_dims_ = dims_;
    planned_ = true;
  }

  /// A lifetime (first, last kernel) widened to the groups that run as one loop.
  static std::pair<int, int> widen_to_groups(int first, int last) {
    using groups = detail::kernel_groups<layout>;
    return {groups::first_of(first), groups::last_of(last)};
  }

  /// Launches kernel K of the plan, or the group of kernels that K starts as one launch
  /// (detail::kernel_groups); a kernel inside a group ran in its first kernel's launch,
  /// and the group's time is counted for that first kernel.
  template <int K, class Runner>
  void launch_kernel(Runner& runner) {
    if constexpr (plan.is_recompute[K])
      if (!retention_.runs(K, plan.kernels[K])) return;
    constexpr int group_end = detail::kernel_groups<layout>::end[K];
    if constexpr (group_end >= 0) {
      auto start = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      if constexpr (group_end > K + 1) runner.template run_fused<K, group_end>();
      else runner.template run<node_at<nodes, plan.kernels[K]>>();
      if constexpr (exchanges)
        if (exchange_.pending > 0) exchange_.comm->progress();  // sums in flight advance between kernels
      if (profiling_) {
        wait_for_backend();
        kernel_seconds_[K] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }
  }

  /// Waits for the kernels launched so far where the backend launches asynchronously (a
  /// GPU), so that profiling times kernels, not launches. (Not inside run()'s lambda:
  /// nvcc compiles both branches of an if constexpr there.)
  void wait_for_backend() { detail::wait_for(backend_); }

  void require_ran() const {
    if (!ran_) throw input_error("luminal: read an output before run(); call run() first");
  }
  void backend_copy_out(void* dst, const void* src, std::size_t bytes) const {
    const_cast<B&>(backend_).to_host(dst, src, bytes);
  }

  void swap(program& other) noexcept {
    this->swap_inputs(other);
    std::swap(dims_, other.dims_);
    std::swap(planned_dims_, other.planned_dims_);
    std::swap(buffers_, other.buffers_);
    std::swap(external_, other.external_);
    std::swap(buffers_device_, other.buffers_device_);
    std::swap(uploaded_buffers_, other.uploaded_buffers_);
    std::swap(table_uploaded_, other.table_uploaded_);
    std::swap(dims_device_, other.dims_device_);
    std::swap(error_device_, other.error_device_);
    std::swap(arena_, other.arena_);
    std::swap(arena_capacity_, other.arena_capacity_);
    std::swap(arena_bytes_, other.arena_bytes_);
    std::swap(unshared_bytes_, other.unshared_bytes_);
    std::swap(symbols_, other.symbols_);
    std::swap(planned_, other.planned_);
    std::swap(ran_, other.ran_);
    std::swap(profiling_, other.profiling_);
    std::swap(kernel_seconds_, other.kernel_seconds_);
    std::swap(profiled_runs_, other.profiled_runs_);
    std::swap(exchange_, other.exchange_);
    std::swap(retention_, other.retention_);
  }
  void release() noexcept {
    if (arena_) backend_.deallocate(arena_);
    if (buffers_device_) backend_.deallocate(buffers_device_);
    if (dims_device_) backend_.deallocate(dims_device_);
    if (error_device_) backend_.deallocate(error_device_);
  }

  std::vector<index_t> dims_, planned_dims_;
  std::array<void*, node_count> buffers_{};
  std::array<void*, node_count> external_{};  // outputs written to the caller's memory
  void** buffers_device_ = nullptr;
  std::array<void*, node_count> uploaded_buffers_{};  // what buffers_device_ holds
  bool table_uploaded_ = false;
  index_t* dims_device_ = nullptr;
  int* error_device_ = nullptr;
  void* arena_ = nullptr;
  std::size_t arena_capacity_ = 0, arena_bytes_ = 0, unshared_bytes_ = 0;
  symbol_values symbols_{};
  bool planned_ = false, ran_ = false, profiling_ = false;
  std::vector<double> kernel_seconds_;
  std::size_t profiled_runs_ = 0;
  detail::exchange_state exchange_;
  detail::recompute_choice retention_;  // for the planned extents
  std::array<std::shared_ptr<void>, node_count> op_states_{};  // kept by opaque ops (kernel_runner::state_of)
};

/// Compiles the graph of `outputs` for backend B (host threads + BLAS by default).
///     auto prog = compile(loss, logits);
/// With a loss first and its gradients after, the forward values the gradients need (the
/// retention set) are kept as Policy says:
///     auto step = compile<host, retention_policy::recompute_elementwise>(loss, dw, db);
template <class B = host, retention_policy Policy = retention_policy::store_all, expression... Outputs>
auto compile(Outputs...) {
  static_assert(sizeof...(Outputs) > 0, "luminal: compile() needs at least one output");
  static_assert(defined_backend<B>, LUMINAL_BACKEND_DEFINED_MESSAGE);
  static_assert(!defined_backend<B> || backend<B>, "luminal: compile<B>: B does not model the backend concept (see backend.hpp)");
  return program<B, Policy, std::remove_cvref_t<Outputs>...>{};
}

}  // namespace luminal

// A scan's kernels run body programs (ops/scan.hpp): defined after program, wherever a
// program is.
#include "scan_execution.hpp"
