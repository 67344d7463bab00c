// The tape joins compiled blocks (block.hpp) at run time: it records each call with its
// inputs and the activations the block's backward needs, and backward() walks the calls
// in reverse, running each block's compile-time derived backward program. Loop counts and
// control flow are ordinary C++ around the calls, so they may depend on computed values;
// each block type is compiled once however many times it is called.
//
//     tensor_store params;                        // "h.0.fc.weight", "h.1.fc.weight", ...
//     auto layer = compile_block<"layer">(y, x);  // y built from input<"x"> and "layer.*"
//     tape<> t(params);
//     auto h = t.constant(batch);                 // no gradient
//     for (int i = 0; i < depth; ++i)             // depth: a run-time value
//       h = t.call(*layer, "h." + std::to_string(i), {{"x", h}});
//     auto loss = t.call(*head, "", {{"x", h}, {"labels", t.constant(labels)}});
//     t.backward(loss);                           // t.gradients(): "h.0.fc.weight", ...
//     float value = t.item<float>(loss);
//
// Values, their cotangents and the kept activations live in the backend's memory (a GPU's)
// for the whole recording: blocks bind them without copying and write their outputs and
// gradients into them on the device; only what the caller hands in (constant(),
// variable()) or reads out (value(), item(), gradient()) crosses to the host. Parameters
// come from either store:
//  - a tensor_store (host memory): bound by pointer on host backends, copied in at every
//    call on a GPU; gradients accumulate in gradients(), a tensor_store;
//  - a parameter_store<B> (the backend's memory): bound by pointer everywhere; gradients
//    accumulate in device_gradients(), a parameter_store<B>, and parameter_optimizer
//    updates the parameters there, so a GPU training step moves no parameter, gradient
//    or activation across PCIe:
//
//     parameter_store<cuda> params;
//     params.add_all(gpt.initial_parameters(1));
//     tape<cuda> t(params);
//     parameter_optimizer<adamw, f32, cuda> optimizer;
//     ... t.backward(loss); optimizer.step(params, t.device_gradients());
#pragma once
#include <bit>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "block.hpp"
#include "../train/gradient_listener.hpp"
#include "../io/allocation_error.hpp"
#include "../io/tensor_store.hpp"
#include "../runtime/parameter_store.hpp"
#include <xtensor/xbuilder.hpp>

namespace luminal {

static_assert(std::endian::native == std::endian::little,
              "luminal: the tape binds tensor_store bytes (little-endian) as native values");

/// Records calls of compiled blocks over values held by the tape; see the file comment.
template <class B = host>
class tape {
 public:
  /// A value on the tape: an input given to it, or an output of a recorded call.
  struct tensor {
    int id = -1;
  };
  /// One named input of a call: `{"x", h}`.
  struct argument {
    std::string_view name;
    tensor value;
  };

  /// Parameters in host memory, read by name at every call (not copied on host backends);
  /// their gradients accumulate in gradients() under the same names.
  explicit tape(const tensor_store& parameters, B backend = {})
      : backend_(backend), host_parameters_(&parameters), device_gradients_(backend) {}
  /// Parameters in the backend's memory, bound without copying; their gradients
  /// accumulate in device_gradients(), in the backend's memory too.
  explicit tape(const parameter_store<B>& parameters, B backend = {})
      : backend_(backend), device_parameters_(&parameters), device_gradients_(backend) {}
  tape(const tape&) = delete;
  tape& operator=(const tape&) = delete;
  ~tape() {
    for (slot& s : slots_) release(s);
  }

  /// A value that gets no gradient (data, token ids, labels).
  template <element_type T>
  tensor constant(const xt::xarray<T>& value) { return add_value(value, false); }
  /// A value whose gradient backward() computes (read it with gradient()).
  template <element_type T>
  tensor variable(const xt::xarray<T>& value) { return add_value(value, true); }

  /// Runs `blk` on the named inputs, with its own parameters renamed to `prefix` (see
  /// block::parameter_name), and records the call. Returns the output (or, for a block
  /// of several outputs, a std::array of them).
  template <class Block>
  auto call(Block& blk, std::string_view prefix, std::initializer_list<argument> inputs) {
    return record_call(blk, prefix, inputs, false);
  }

  /// As call(), but the tape keeps only the block's outputs, not the activations its
  /// backward reads: backward() runs the block's forward again from the call's inputs
  /// (which the tape holds anyway) just before its backward, as
  /// torch.utils.checkpoint does. A stack of checkpointed layers then holds each layer's
  /// input and output plus one layer's activations at a time, for one more forward per
  /// layer. The block must compute the same values when run again (it does: blocks have
  /// no state, and a dropout mask is a function of the seed input the call binds).
  ///
  ///     for (int i = 0; i < depth; ++i) h = t.checkpoint(*layer, "h." + std::to_string(i), {{"x", h}});
  template <class Block>
  auto checkpoint(Block& blk, std::string_view prefix, std::initializer_list<argument> inputs) {
    return record_call(blk, prefix, inputs, true);
  }

  /// The value as an xtensor array (a copy, from the device on a GPU).
  template <element_type T>
  xt::xarray<T> value(tensor t) const { return as_array<T>(t, false); }
  /// The value of a one-element tensor.
  template <element_type T>
  T item(tensor t) const {
    const slot& s = checked<T>(t, "item");
    if (s.value.bytes != sizeof(T))
      throw input_error("luminal: tape::item needs a one-element tensor; this one has " +
                        std::to_string(s.value.bytes / sizeof(T)) + " elements");
    T out{};
    const_cast<B&>(backend_).to_host(&out, s.value.data, sizeof(T));
    return out;
  }
  /// The value where it lies, in the backend's memory, valid until clear(): bind it to
  /// another program with bind_device(), without copying.
  template <element_type T>
  const T* data(tensor t) const { return static_cast<const T*>(checked<T>(t, "data").value.data); }
  /// Extents of the value.
  const std::vector<index_t>& shape(tensor t) const { return slot_at(require_tensor(t, "shape")).shape; }

  /// Back-propagates from the one-element floating-point `output` (seeded with 1):
  /// parameters' gradients add into gradients() (or device_gradients()), variables' into
  /// gradient(). A second call recomputes the variables' gradients and adds the
  /// parameters' once more.
  ///
  /// With a listener (a tape over a tensor_store only), each parameter's gradient is
  /// announced as soon as no earlier call can add to it.
  void backward(tensor output, gradient_listener* listener = nullptr) {
    const int id = require_tensor(output, "backward");
    slot& s = slot_at(id);
    if (s.value.bytes != dtype_size(s.dtype) || (s.dtype != dtype_tag::f32 && s.dtype != dtype_tag::f64))
      throw input_error("luminal: tape::backward needs a one-element floating-point output (a loss); this one is " +
                        std::string(dtype_name(s.dtype)) + " " + detail::extents_text(s.shape));
    if (!s.requires_grad)
      throw input_error("luminal: tape::backward: the output depends on no parameter or variable");
    for (std::size_t i = 0; i < live_slots_; ++i) slots_[i].has_cotangent = false;
    reserve(s.cotangent, s.value.bytes);
    const double one_f64 = 1.0;
    const float one_f32 = 1.0f;
    backend_.to_device(s.cotangent.data, s.dtype == dtype_tag::f32 ? static_cast<const void*>(&one_f32) : &one_f64,
                       s.value.bytes);
    s.has_cotangent = true;
    std::vector<std::vector<std::size_t>> final_after;  // per call: the parameters it finalizes
    std::vector<gradient_listener::parameter> order;
    if (listener) final_after = announce_order(*listener, order);
    for (std::size_t call = records_.size(); call-- > 0;) {
      const call_record& record = records_[call];
      bool reached = false;
      for (int kept_id : record.kept) reached = reached || (kept_id >= 0 && slot_at(kept_id).has_cotangent);
      if (reached) record.block->run_backward(*this, call);
      if (listener)
        for (std::size_t index : final_after[call]) {
          const auto& p = order[index];
          if (!gradients_.contains(p.name)) add_zero_gradient(p.name, p.dtype, p.shape);
          listener->final(index);
        }
    }
  }

  /// d output / d variable after backward().
  template <element_type T>
  xt::xarray<T> gradient(tensor variable) const { return as_array<T>(variable, true); }

  /// Parameter gradients accumulated by backward() since they were last cleared, by the
  /// parameter store's names, for a tape over a tensor_store.
  tensor_store& gradients() {
    require_host_parameters("gradients()", "device_gradients()");
    return gradients_;
  }
  const tensor_store& gradients() const {
    require_host_parameters("gradients()", "device_gradients()");
    return gradients_;
  }
  /// The same, for a tape over a parameter_store: in the backend's memory.
  /// parameter_optimizer::step zeroes them after the update.
  parameter_store<B>& device_gradients() {
    if (!device_parameters_)
      throw input_error("luminal: tape::device_gradients(): this tape's parameters are a tensor_store; "
                        "its gradients are in gradients()");
    return device_gradients_;
  }
  /// The parameters of a tape over a tensor_store.
  const tensor_store& parameters() const {
    require_host_parameters("parameters()", "the parameter_store it was given");
    return *host_parameters_;
  }

  /// Binds the stored parameter `name` to the input `name` of `prog` from whichever store
  /// this tape reads (without copying where the program can read it in place).
  template <element_type T, class Program>
  void bind_parameter(Program& prog, std::string_view name) const {
    bind_parameter<T>(prog, name, std::string(name), {}, "the program");
  }

  /// Forgets the values and calls, keeping gradients(). The values' memory is kept for
  /// the next recording: a training loop that records the same calls every step
  /// allocates nothing after the first (large buffers would otherwise be returned to the
  /// system and page-faulted in again every step, or cudaMalloc'ed and freed on a GPU).
  void clear() {
    live_slots_ = 0;
    records_.clear();
  }
  /// Releases the memory clear() keeps.
  void shrink() {
    for (std::size_t i = live_slots_; i < slots_.size(); ++i) release(slots_[i]);
    slots_.resize(live_slots_);
    slots_.shrink_to_fit();
  }

  std::size_t call_count() const { return records_.size(); }
  /// Bytes of values held: inputs, outputs and the activations kept for backward.
  std::size_t held_bytes() const {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < live_slots_; ++i) bytes += slots_[i].value.bytes;
    return bytes;
  }

  // ---- used by block -------------------------------------------------------------------
  /// Memory of the backend, kept across clear() and grown when a larger value needs it.
  struct buffer {
    void* data = nullptr;
    std::size_t bytes = 0, capacity = 0;
  };
  struct slot {
    dtype_tag dtype = dtype_tag::f32;
    std::vector<index_t> shape;
    buffer value;
    buffer cotangent;
    bool has_cotangent = false;  // false: none reached this value (zero)
    bool requires_grad = false;
  };
  struct call_record {
    block_interface<B>* block = nullptr;
    std::string prefix;
    std::vector<std::pair<std::string, int>> inputs;
    std::vector<int> kept;  // the block's outputs, then what its backward reads (-1: not kept)
    bool checkpointed = false;  // recorded by checkpoint(): backward runs the forward again
    int argument(std::string_view name) const {
      for (const auto& [n, id] : inputs)
        if (n == name) return id;
      return -1;
    }
    std::string argument_names() const {
      std::string names;
      for (const auto& [n, id] : inputs) names += (names.empty() ? "'" : ", '") + n + "'";
      return names.empty() ? "nothing" : names;
    }
  };
  slot& slot_at(int id) { return slots_[std::size_t(id)]; }
  const slot& slot_at(int id) const { return slots_[std::size_t(id)]; }
  const call_record& record_at(std::size_t call) const { return records_[call]; }
  int new_slot(dtype_tag dtype, std::span<const index_t> shape, bool requires_grad) {
    if (live_slots_ == slots_.size()) slots_.emplace_back();
    slot& s = slots_[live_slots_];
    s.dtype = dtype;
    s.shape.assign(shape.begin(), shape.end());
    reserve(s.value, element_count(shape) * dtype_size(dtype));
    s.has_cotangent = false;
    s.requires_grad = requires_grad;
    return int(live_slots_++);
  }
  /// Copies `source` (backend memory holding the slot's byte count) into slot `id`.
  void copy_into(int id, const void* source) {
    slot& s = slot_at(id);
    backend_.device_copy(s.value.data, source, s.value.bytes);
  }
  /// Slot `id`'s cotangent, zero-filled on the device if nothing has reached it.
  const void* cotangent_or_zeros(int id) {
    slot& s = slot_at(id);
    if (!s.has_cotangent) {
      reserve(s.cotangent, s.value.bytes);
      fill_zero(backend_, s.cotangent.data, s.cotangent.bytes);
      s.has_cotangent = true;
    }
    return s.cotangent.data;
  }
  /// Adds `incoming` (backend memory, the slot's element count) into slot `id`'s cotangent.
  template <class T>
  void add_to_cotangent(int id, const T* incoming) {
    slot& s = slot_at(id);
    const bool fresh = !s.has_cotangent;
    if (fresh) reserve(s.cotangent, s.value.bytes);
    copy_or_add(static_cast<T*>(s.cotangent.data), fresh, incoming, s.value.bytes / sizeof(T));
    s.has_cotangent = true;
  }
  /// Where a backward run may write slot `id`'s cotangent itself, instead of handing it to
  /// add_to_cotangent: its memory while nothing has reached it, else nullptr. After the
  /// run, cotangent_written(id) records it (a run that throws leaves it unreached).
  void* fresh_cotangent(int id) {
    slot& s = slot_at(id);
    if (s.has_cotangent) return nullptr;
    reserve(s.cotangent, s.value.bytes);
    return s.cotangent.data;
  }
  void cotangent_written(int id) { slot_at(id).has_cotangent = true; }
  /// Where a backward run may write the gradient of parameter `name` itself, instead of
  /// handing it to add_to_parameter_gradient: the gradient's memory in device_gradients()
  /// while nothing has reached it since it was cleared, else nullptr (and always on a
  /// tape over a tensor_store). After the run, parameter_gradient_written(name) records
  /// it; until then the gradient reads as zero, so a run that throws adds nothing.
  template <class T>
  T* fresh_parameter_gradient(const std::string& name, std::span<const index_t> shape) {
    if (!device_parameters_) return nullptr;
    const bool held = device_gradients_.contains(name);
    auto& target = device_gradients_.add(name, dtype_of<T>(), std::vector<index_t>(shape.begin(), shape.end()));
    if (held && !target.zero_pending) return nullptr;
    target.zero_pending = true;
    return static_cast<T*>(target.current);
  }
  void parameter_gradient_written(const std::string& name) { device_gradients_.at(name).zero_pending = false; }
  /// Adds `incoming` (backend memory) into the gradient of parameter `name`.
  template <class T>
  void add_to_parameter_gradient(const std::string& name, std::span<const index_t> shape, const T* incoming) {
    const std::size_t count = element_count(shape);
    if (device_parameters_) {
      const bool held = device_gradients_.contains(name);
      auto& target = device_gradients_.add(name, dtype_of<T>(), std::vector<index_t>(shape.begin(), shape.end()));
      copy_or_add(static_cast<T*>(target.current), !held || target.zero_pending, incoming, count);
      target.zero_pending = false;
      return;
    }
    if (!gradients_.contains(name)) add_zero_gradient(name, dtype_of<T>(), shape);
    auto& target = gradients_.at(name).data;
    const T* addend = incoming;
    if constexpr (!B::host_accessible) {
      scratch_.resize(count * sizeof(T));
      backend_.to_host(scratch_.data(), incoming, count * sizeof(T));
      addend = reinterpret_cast<const T*>(scratch_.data());
    }
    T* sum = reinterpret_cast<T*>(target.data());
    for (std::size_t i = 0; i < count; ++i) sum[i] += addend[i];
  }
  /// Binds stored parameter `stored_name` to the leaf `leaf` of `prog`; `expected` (when
  /// not empty) is the shape the leaf declares, and `who` names the reader in errors.
  template <element_type T, class Program>
  void bind_parameter(Program& prog, std::string_view leaf, const std::string& stored_name,
                      std::optional<std::vector<index_t>> expected, const std::string& who) const {
    const void* data = nullptr;
    dtype_tag dtype{};
    const std::vector<index_t>* shape = nullptr;
    if (device_parameters_) {
      if (device_parameters_->contains(stored_name)) {
        const auto& s = device_parameters_->materialized(stored_name);
        data = s.current, dtype = s.dtype, shape = &s.shape;
      }
    } else if (host_parameters_->contains(stored_name)) {
      const auto& e = host_parameters_->at(stored_name);
      data = e.data.data(), dtype = e.dtype, shape = &e.shape;
    }
    if (!shape)
      throw input_error("luminal: " + who + " needs the parameter '" + stored_name + "' (its leaf '" +
                        std::string(leaf) + "'), which the parameter store does not hold");
    if (dtype != dtype_of<T>() || (expected && *shape != *expected))
      throw input_error("luminal: parameter '" + stored_name + "' is " + std::string(dtype_name(dtype)) + " " +
                        detail::extents_text(*shape) + " in the store, but " + who + " needs " +
                        std::string(dtype_name<T>()) + (expected ? " " + detail::extents_text(*expected) : ""));
    const T* values = static_cast<const T*>(data);
    if (device_parameters_ || B::host_accessible) prog.bind_device(leaf, values, *shape);
    else prog.bind(leaf, values, std::span<const index_t>(*shape));
  }

 private:
  static std::size_t element_count(std::span<const index_t> shape) {
    std::size_t count = 1;
    for (index_t e : shape) count *= std::size_t(e);
    return count;
  }
  /// The first contribution to a gradient is copied in; later ones are added, on the device.
  template <class T>
  void copy_or_add(T* target, bool fresh, const T* incoming, std::size_t count) {
    if (fresh) backend_.device_copy(target, incoming, count * sizeof(T));
    else add_into(backend_, target, incoming, count);
  }
  void release(slot& s) {
    backend_.deallocate(s.value.data);
    backend_.deallocate(s.cotangent.data);
  }
  void reserve(buffer& b, std::size_t bytes) {
    if (b.capacity < bytes) {
      backend_.deallocate(b.data);
      b.data = nullptr, b.capacity = 0;  // nothing dangling if allocate throws
      b.data = allocate_named(bytes, [&] { return backend_.allocate(bytes); }, [&] {
        return "a value of the tape, which holds " + allocation_error::describe_bytes(held_bytes()) +
               " already (fewer layers, a smaller batch or tape::checkpoint need less)";
      });
      b.capacity = bytes;
    }
    b.bytes = bytes;
  }
  void require_host_parameters(const char* what, const char* instead) const {
    if (!host_parameters_)
      throw input_error(std::string("luminal: tape::") + what + ": this tape's parameters are a parameter_store; use " +
                        instead);
  }
  int require_tensor(tensor t, const char* what) const {
    if (t.id < 0 || std::size_t(t.id) >= live_slots_)
      throw input_error(std::string("luminal: tape: ") + what +
                        " is not a value of this tape (default-constructed, or recorded before clear())");
    return t.id;
  }
  template <element_type T>
  const slot& checked(tensor t, const char* what) const {
    const slot& s = slot_at(require_tensor(t, what));
    if (s.dtype != dtype_of<T>())
      throw input_error(std::string("luminal: tape::") + what + "<" + std::string(dtype_name<T>()) +
                        ">: the value holds " + std::string(dtype_name(s.dtype)));
    return s;
  }
  template <element_type T>
  xt::xarray<T> as_array(tensor t, bool cotangent) const {
    const slot& s = checked<T>(t, cotangent ? "gradient" : "value");
    if (cotangent && !s.requires_grad)
      throw input_error("luminal: tape::gradient: the value is a constant; make it with variable() to get its gradient");
    std::vector<std::size_t> shape(s.shape.begin(), s.shape.end());
    xt::xarray<T> out = xt::zeros<T>(shape);
    const buffer& source = cotangent ? s.cotangent : s.value;
    if (!cotangent || s.has_cotangent) const_cast<B&>(backend_).to_host(out.data(), source.data, s.value.bytes);
    return out;
  }
  template <element_type T>
  tensor add_value(const xt::xarray<T>& value, bool requires_grad) {
    std::vector<index_t> shape(value.shape().begin(), value.shape().end());
    int id = new_slot(dtype_of<T>(), shape, requires_grad);
    xt::xarray<T, xt::layout_type::row_major> contiguous = value;
    backend_.to_device(slots_[std::size_t(id)].value.data, contiguous.data(), contiguous.size() * sizeof(T));
    return tensor{id};
  }

  /// Lists the parameters in the order their gradients become final (calls from the last;
  /// a parameter with the first call that reads it) and tells the listener; returns, per
  /// call, the positions in that order it finalizes.
  std::vector<std::vector<std::size_t>> announce_order(gradient_listener& listener,
                                                       std::vector<gradient_listener::parameter>& order) {
    require_host_parameters("backward(output, listener)", "average_gradients after backward()");
    std::vector<std::vector<std::string>> names(records_.size());
    std::map<std::string, std::size_t> first_call;
    for (std::size_t call = 0; call < records_.size(); ++call) {
      names[call] = records_[call].block->parameter_names(records_[call].prefix);
      for (const std::string& name : names[call]) first_call.try_emplace(name, call);
    }
    std::vector<std::vector<std::size_t>> final_after(records_.size());
    for (std::size_t call = records_.size(); call-- > 0;)
      for (const std::string& name : names[call]) {
        auto it = first_call.find(name);
        if (it == first_call.end() || it->second != call) continue;
        first_call.erase(it);  // listed once, even if the call reads it twice
        const auto& stored = host_parameters_->at(name);
        final_after[call].push_back(order.size());
        order.push_back({name, stored.dtype, stored.shape});
      }
    listener.begin(gradients_, order);
    return final_after;
  }
  /// A gradient of zeros in gradients(): the start of a sum, or one no cotangent reached.
  void add_zero_gradient(const std::string& name, dtype_tag dtype, std::span<const index_t> shape) {
    tensor_store::entry zeros;
    zeros.dtype = dtype;
    zeros.shape.assign(shape.begin(), shape.end());
    zeros.data.assign(element_count(shape) * dtype_size(dtype), std::byte{0});
    gradients_.insert(name, std::move(zeros));
  }

  template <class Block>
  auto record_call(Block& blk, std::string_view prefix, std::initializer_list<argument> inputs, bool checkpointed) {
    call_record record{&blk, std::string(prefix), {}, {}, checkpointed};
    for (const argument& a : inputs) {
      require_tensor(a.value, "an input of the call");
      if (record.argument(a.name) >= 0)
        throw input_error("luminal: the call of block '" + std::string(Block::prefix()) + "' passes '" +
                          std::string(a.name) + "' twice");
      record.inputs.emplace_back(std::string(a.name), a.value.id);
    }
    records_.push_back(std::move(record));
    const std::size_t slots_before = live_slots_;
    try {
      records_.back().kept = blk.run_forward(*this, records_.size() - 1);
    } catch (...) {  // neither the call nor the slots it took stay recorded
      records_.pop_back();
      live_slots_ = slots_before;
      throw;
    }
    const auto& kept = records_.back().kept;
    if constexpr (Block::output_count == 1) {
      return tensor{kept[0]};
    } else {
      std::array<tensor, Block::output_count> outputs;
      for (std::size_t k = 0; k < outputs.size(); ++k) outputs[k] = tensor{kept[k]};
      return outputs;
    }
  }

  B backend_;
  const tensor_store* host_parameters_ = nullptr;    // one of these two is set
  const parameter_store<B>* device_parameters_ = nullptr;
  tensor_store gradients_;
  parameter_store<B> device_gradients_;
  std::vector<slot> slots_;  // [0, live_slots_) hold values; the rest are kept buffers
  std::size_t live_slots_ = 0;
  std::vector<call_record> records_;
  std::vector<std::byte> scratch_;  // a GPU's parameter gradients on their way to gradients()
};

}  // namespace luminal
