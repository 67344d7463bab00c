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
// Values live in host memory between calls; blocks bind them without copying on backends
// whose memory the host can read (host, Kokkos host spaces) and copy them otherwise.
#pragma once
#include <bit>
#include <cstddef>
#include <cstring>
#include <memory>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "block.hpp"
#include "io/tensor_store.hpp"
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

  /// Parameters are read from `parameters` by name at every call (not copied); their
  /// gradients accumulate in gradients() under the same names.
  explicit tape(const tensor_store& parameters) : parameters_(&parameters) {}

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
    call_record record{&blk, std::string(prefix), {}, {}};
    for (const argument& a : inputs) {
      require_tensor(a.value, "an input of the call");
      if (record.argument(a.name) >= 0)
        throw input_error("luminal: the call of block '" + std::string(Block::prefix()) + "' passes '" +
                          std::string(a.name) + "' twice");
      record.inputs.emplace_back(std::string(a.name), a.value.id);
    }
    records_.push_back(std::move(record));
    try {
      records_.back().kept = blk.run_forward(*this, records_.size() - 1);
    } catch (...) {
      records_.pop_back();
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

  /// The value as an xtensor array (a copy).
  template <element_type T>
  xt::xarray<T> value(tensor t) const { return as_array<T>(t, false); }
  /// The value of a one-element tensor.
  template <element_type T>
  T item(tensor t) const {
    const slot& s = checked<T>(t, "item");
    if (s.data.size() != sizeof(T))
      throw input_error("luminal: tape::item needs a one-element tensor; this one has " +
                        std::to_string(s.data.size() / sizeof(T)) + " elements");
    return *reinterpret_cast<const T*>(s.data.data());
  }
  /// Extents of the value.
  const std::vector<index_t>& shape(tensor t) const { return slot_at(require_tensor(t, "shape")).shape; }

  /// Back-propagates from the one-element floating-point `output` (seeded with 1):
  /// parameters' gradients add into gradients(), variables' into gradient(). A second
  /// call recomputes the variables' gradients and adds the parameters' once more.
  void backward(tensor output) {
    slot& s = slot_at(require_tensor(output, "backward"));
    if (s.data.size() != dtype_size(s.dtype) || (s.dtype != dtype_tag::f32 && s.dtype != dtype_tag::f64))
      throw input_error("luminal: tape::backward needs a one-element floating-point output (a loss); this one is " +
                        std::string(dtype_name(s.dtype)) + " " + detail::extents_text(s.shape));
    if (!s.requires_grad)
      throw input_error("luminal: tape::backward: the output depends on no parameter or variable");
    for (std::size_t i = 0; i < live_slots_; ++i) slots_[i].cotangent.clear();
    s.cotangent.assign(s.data.size(), std::byte{0});
    if (s.dtype == dtype_tag::f32) *reinterpret_cast<float*>(s.cotangent.data()) = 1.0f;
    else *reinterpret_cast<double*>(s.cotangent.data()) = 1.0;
    for (std::size_t call = records_.size(); call-- > 0;) {
      const call_record& record = records_[call];
      bool reached = false;
      for (int id : record.kept) reached = reached || !slot_at(id).cotangent.empty();
      if (reached) record.block->run_backward(*this, call);
    }
  }

  /// d output / d variable after backward().
  template <element_type T>
  xt::xarray<T> gradient(tensor variable) const { return as_array<T>(variable, true); }

  /// Parameter gradients accumulated by backward() since they were last cleared, by the
  /// parameter store's names.
  tensor_store& gradients() { return gradients_; }
  const tensor_store& gradients() const { return gradients_; }

  /// Forgets the values and calls, keeping gradients(). The values' memory is kept for
  /// the next recording: a training loop that records the same calls every step
  /// allocates nothing after the first (large buffers would otherwise be returned to the
  /// system and page-faulted in again every step).
  void clear() {
    live_slots_ = 0;
    records_.clear();
  }
  /// Releases the memory clear() keeps.
  void shrink() {
    slots_.resize(live_slots_);
    slots_.shrink_to_fit();
  }

  std::size_t call_count() const { return records_.size(); }
  /// Bytes of values held: inputs, outputs and the activations kept for backward.
  std::size_t held_bytes() const {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < live_slots_; ++i) bytes += slots_[i].data.size();
    return bytes;
  }

  // ---- used by block -------------------------------------------------------------------
  struct slot {
    dtype_tag dtype = dtype_tag::f32;
    std::vector<index_t> shape;
    std::vector<std::byte> data;
    std::vector<std::byte> cotangent;  // empty: none reached this value (zero)
    bool requires_grad = false;
  };
  struct call_record {
    block_interface<B>* block = nullptr;
    std::string prefix;
    std::vector<std::pair<std::string, int>> inputs;
    std::vector<int> kept;  // the block's outputs, then what its backward reads
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
  const tensor_store& parameters() const { return *parameters_; }
  int new_slot(dtype_tag dtype, std::span<const index_t> shape, bool requires_grad) {
    if (live_slots_ == slots_.size()) slots_.emplace_back();
    slot& s = slots_[live_slots_];
    s.dtype = dtype;
    s.shape.assign(shape.begin(), shape.end());
    std::size_t count = 1;
    for (index_t e : shape) count *= std::size_t(e);
    s.data.resize(count * dtype_size(dtype));
    s.cotangent.clear();
    s.requires_grad = requires_grad;
    return int(live_slots_++);
  }
  /// The gradient buffer of parameter `name`, created as zeros on first use.
  std::vector<std::byte>& gradient_buffer(const std::string& name, dtype_tag dtype, std::span<const index_t> shape) {
    if (!gradients_.contains(name)) {
      tensor_store::entry zeros;
      zeros.dtype = dtype;
      zeros.shape.assign(shape.begin(), shape.end());
      zeros.data.assign(zeros.element_count() * dtype_size(dtype), std::byte{0});
      gradients_.insert(name, std::move(zeros));
    }
    return gradients_.at(name).data;
  }

 private:
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
    std::vector<std::size_t> shape(s.shape.begin(), s.shape.end());
    xt::xarray<T> out = xt::zeros<T>(shape);
    const auto& bytes = cotangent ? s.cotangent : s.data;
    if (cotangent && !s.requires_grad)
      throw input_error("luminal: tape::gradient: the value is a constant; make it with variable() to get its gradient");
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  template <element_type T>
  tensor add_value(const xt::xarray<T>& value, bool requires_grad) {
    std::vector<index_t> shape(value.shape().begin(), value.shape().end());
    int id = new_slot(dtype_of<T>(), shape, requires_grad);
    xt::xarray<T, xt::layout_type::row_major> contiguous = value;
    std::memcpy(slots_[std::size_t(id)].data.data(), contiguous.data(), contiguous.size() * sizeof(T));
    return tensor{id};
  }

  const tensor_store* parameters_;
  tensor_store gradients_;
  std::vector<slot> slots_;  // [0, live_slots_) hold values; the rest are kept buffers
  std::size_t live_slots_ = 0;
  std::vector<call_record> records_;
};

}  // namespace luminal
