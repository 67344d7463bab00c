// parameter_store: the runtime home of a model's parameters and optimizer state, by leaf
// name, in the backend's memory. A compiled training step reads each tensor from its
// current buffer and writes the updated one into a second buffer, then the two swap: no
// step copies parameters, and a step that fails leaves the current values as they were
// (the second buffer is allocated when a step first asks for it: next_buffer). Evaluation
// programs bind the same memory without copying.
//
//     auto step = compile_train_step(loss, adam{});
//     step.store().set("fc1.weight", w);         // copies into the store
//     auto eval = compile(logits);
//     step.store().bind(eval);                   // every param leaf of eval, zero copy
#pragma once
#include <algorithm>
#include <bit>
#include <boost/mp11/algorithm.hpp>
#include <map>
#include <string>
#include <vector>

#include "../io/tensor_store.hpp"
#include "program.hpp"

namespace luminal {

/// Holds tensors in the backend's native layout, which must be little-endian, as
/// checkpoints are: the store copies bytes to and from tensor_store without swapping.
template <class B = host>
class parameter_store {
  static_assert(defined_backend<B>, LUMINAL_BACKEND_DEFINED_MESSAGE);
  static_assert(std::endian::native == std::endian::little, "luminal: parameter_store needs a little-endian machine");

 public:
  /// One named tensor: element type, extents and its two buffers.
  struct slot {
    dtype_tag dtype = dtype_tag::f32;
    std::vector<index_t> shape;
    std::size_t bytes = 0;
    void* current = nullptr;  // the values now
    void* next = nullptr;     // where a training step writes the updated values (next_buffer)
    /// The values are all zero but `current` is not yet written (zero_lazily): a reader
    /// of `current` goes through materialized(), a writer of the whole tensor clears it.
    bool zero_pending = false;
  };

  explicit parameter_store(B backend = {}) : backend_(std::move(backend)) {}
  parameter_store(const parameter_store&) = delete;
  parameter_store& operator=(const parameter_store&) = delete;
  parameter_store(parameter_store&& other) noexcept : backend_(std::move(other.backend_)), slots_(std::move(other.slots_)) {
    other.slots_.clear();
  }
  ~parameter_store() { clear(); }

  /// Adds a zero-filled tensor; adding an existing name with the same dtype and shape
  /// keeps its values, with another dtype or shape throws store_error.
  slot& add(std::string_view name, dtype_tag dtype, std::vector<index_t> shape) {
    if (auto it = slots_.find(name); it != slots_.end()) {
      if (it->second.dtype != dtype || it->second.shape != shape)
        throw store_error("luminal: parameter_store already holds '" + std::string(name) + "' as " +
                          describe(it->second.dtype, it->second.shape) + ", not " + describe(dtype, shape));
      return it->second;
    }
    slot s;
    s.dtype = dtype;
    s.shape = std::move(shape);
    std::size_t count = 1;
    for (index_t e : s.shape) count *= std::size_t(e);
    s.bytes = count * dtype_size(dtype);
    s.current = backend_.allocate(s.bytes);
    try {
      fill_zero(backend_, s.current, s.bytes);  // on the device
      return slots_.emplace(std::string(name), std::move(s)).first->second;
    } catch (...) {
      backend_.deallocate(s.current);
      throw;
    }
  }

  /// The second buffer of the tensor `name`, allocated on first use, where a training
  /// step writes its updated values before swap_buffers(); written before it is read.
  void* next_buffer(std::string_view name) {
    slot& s = at(name);
    if (!s.next) s.next = backend_.allocate(s.bytes);
    return s.next;
  }

  /// Removes every tensor and frees its memory.
  void clear() {
    for (auto& [name, s] : slots_) {
      backend_.deallocate(s.current);
      backend_.deallocate(s.next);
    }
    slots_.clear();
  }

  bool contains(std::string_view name) const { return slots_.find(name) != slots_.end(); }
  std::size_t size() const { return slots_.size(); }

  slot& at(std::string_view name) { return const_cast<slot&>(std::as_const(*this).at(name)); }
  const slot& at(std::string_view name) const {
    auto it = slots_.find(name);
    if (it == slots_.end())
      throw store_error("luminal: parameter_store has no tensor '" + std::string(name) + "'" +
                        (slots_.empty() ? std::string(" (it is empty)") : "; it has " + names_text()));
    return it->second;
  }

  /// Copies `value` into the tensor `name`, whose dtype and shape it must have.
  template <element_type T>
  void set(std::string_view name, const xt::xarray<T>& value) {
    slot& s = at(name);
    std::vector<index_t> shape(value.shape().begin(), value.shape().end());
    if (s.dtype != dtype_of<T>() || s.shape != shape)
      throw store_error("luminal: parameter_store tensor '" + std::string(name) + "' is " + describe(s.dtype, s.shape) +
                        ", but the value given is " + describe(dtype_of<T>(), shape));
    xt::xarray<T, xt::layout_type::row_major> contiguous = value;
    backend_.to_device(s.current, contiguous.data(), s.bytes);
    s.zero_pending = false;
  }

  /// Sets every element of the tensor `name` to zero (on the device: nothing is copied).
  void zero(std::string_view name) {
    slot& s = at(name);
    fill_zero(backend_, s.current, s.bytes);
    s.zero_pending = false;
  }
  /// Sets the tensor `name` to zero without writing it yet: its memory is written when it
  /// is next read through this store (get, to_tensors, bind, materialized), or whole by a
  /// writer that sees `zero_pending`. Gradients are cleared so after an update: the next
  /// backward's first contribution is then a write, not an addition to zeros.
  void zero_lazily(std::string_view name) { at(name).zero_pending = true; }
  /// The tensor `name`, its `current` memory holding its values (pending zeros written).
  slot& materialized(std::string_view name) { return materialize(at(name)); }
  const slot& materialized(std::string_view name) const { return materialize(at(name)); }

  /// Adds every tensor of `values` (as add() does: a name already held must have the same
  /// dtype and shape) and copies its values in. Returns the number of tensors.
  ///     parameter_store<cuda> params;
  ///     params.add_all(gpt.initial_parameters(1));   // host -> device, once
  std::size_t add_all(const tensor_store& values) {
    for (const auto& [name, entry] : values) add(name, entry.dtype, entry.shape);
    return assign(values);
  }

  /// A copy of the tensor `name` as an xtensor array.
  template <element_type T>
  xt::xarray<T> get(std::string_view name) const {
    const slot& s = at(name);
    if (s.dtype != dtype_of<T>())
      throw store_error("luminal: parameter_store tensor '" + std::string(name) + "' holds " +
                        std::string(dtype_name(s.dtype)) + ", not " + std::string(dtype_name<T>()));
    xt::xarray<T> out = xt::xarray<T>::from_shape(std::vector<std::size_t>(s.shape.begin(), s.shape.end()));
    const_cast<B&>(backend_).to_host(out.data(), materialize(s).current, s.bytes);
    return out;
  }

  /// Every tensor, as a tensor_store (for checkpoints).
  tensor_store to_tensors() const {
    tensor_store out;
    std::vector<std::byte> bytes;
    for (const auto& [name, s] : slots_) {
      bytes.resize(s.bytes);
      const_cast<B&>(backend_).to_host(bytes.data(), materialize(s).current, s.bytes);
      out.set_raw(name, s.dtype, s.shape, bytes);
    }
    return out;
  }

  /// Copies every tensor of `values` whose name this store holds; the dtype and shape must
  /// match (store_error names the tensor and both). Returns how many were copied.
  std::size_t assign(const tensor_store& values) {
    std::size_t copied = 0;
    for (const auto& [name, entry] : values) {
      auto it = slots_.find(name);
      if (it == slots_.end()) continue;
      slot& s = it->second;
      if (s.dtype != entry.dtype || s.shape != entry.shape)
        throw store_error("luminal: tensor '" + name + "' is " + describe(entry.dtype, entry.shape) +
                          ", but the model's is " + describe(s.dtype, s.shape));
      backend_.to_device(s.current, entry.data.data(), s.bytes);
      s.zero_pending = false;
      ++copied;
    }
    return copied;
  }

  /// Binds every input of `prog` that this store holds, without copying: the program reads
  /// the store's current values. Rebind after a training step (the buffers swap).
  template <class Prog>
  void bind(Prog& prog) const {
    boost::mp11::mp_for_each<typename Prog::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      auto it = slots_.find(L::name.view());
      if (it == slots_.end()) return;
      prog.bind_device(L::name.view(), static_cast<const value_t<L>*>(materialize(it->second).current),
                       it->second.shape);
    });
  }

  /// Exchanges current and next of every tensor that has a second buffer: what a training
  /// step wrote becomes current.
  void swap_buffers() {
    for (auto& [name, s] : slots_) {
      if (!s.next) continue;
      std::swap(s.current, s.next);
      s.zero_pending = false;  // the step wrote `next` whole
    }
  }

  auto begin() const { return slots_.begin(); }
  auto end() const { return slots_.end(); }

  static std::string describe(dtype_tag dtype, const std::vector<index_t>& shape) {
    std::string text = std::string(dtype_name(dtype)) + " (";
    for (std::size_t k = 0; k < shape.size(); ++k) text += (k ? ", " : "") + std::to_string(shape[k]);
    return text + ")";
  }

 private:
  /// Writes a slot's pending zeros. Logically const: the values do not change.
  const slot& materialize(const slot& s) const {
    if (s.zero_pending) {
      fill_zero(const_cast<B&>(backend_), s.current, s.bytes);
      const_cast<slot&>(s).zero_pending = false;
    }
    return s;
  }
  slot& materialize(slot& s) { return const_cast<slot&>(std::as_const(*this).materialize(s)); }
  std::string names_text() const {
    std::string text;
    int shown = 0;
    for (const auto& [name, s] : slots_) {
      if (shown++ == 8) { text += ", ..."; break; }
      text += (text.empty() ? "'" : ", '") + name + "'";
    }
    return text;
  }

  B backend_{};
  std::map<std::string, slot, std::less<>> slots_;
};

}  // namespace luminal
