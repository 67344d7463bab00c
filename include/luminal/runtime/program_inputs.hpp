// A program's inputs at run time (program_inputs): the bind() family, the memory bound to
// each input (a copy the program owns, or the caller's memory in place), and the formats
// of quantized weights. program (program.hpp) derives from it.
//
//     auto prog = compile(y);
//     prog.bind("x", xt::xarray<float>{...});            // copied
//     prog.bind_view("w", w.data(), {784, 512});          // in place, until run() returns
//
// A class over the short names of the program's inputs and nodes (list_name), not over
// its outputs: these functions are then named in a few numbers, and programs with the
// same nodes share them.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <boost/mp11/algorithm.hpp>
#include <xtensor/xarray.hpp>

#include "../core/backend.hpp"
#include "../core/exceptions.hpp"
#include "../core/quant_format.hpp"
#include "../io/allocation_error.hpp"
#include "bindings.hpp"

namespace luminal::detail {

/// Inputs of a program on backend B whose leaves are the list LeavesName names, among
/// the nodes NodesName names.
template <class B, class LeavesName, class NodesName>
class program_inputs {
 public:
  /// Binds an input or parameter from an xtensor expression (copied into the program).
  template <class E>
  void bind(std::string_view name, const xt::xexpression<E>& array) {
    const auto& a = array.derived_cast();
    using T = typename E::value_type;
    std::array<index_t, 16> shape{};
    if (a.dimension() > shape.size()) throw input_error("luminal: arrays of rank > 16 are not supported");
    for (std::size_t k = 0; k < a.dimension(); ++k) shape[k] = index_t(a.shape()[k]);
    std::span<const index_t> extents(shape.data(), a.dimension());
    if constexpr (requires { a.data(); }) {
      if (a.layout() == xt::layout_type::row_major || a.dimension() <= 1) {
        bind_raw(name, dtype_of<T>(), a.data(), extents, true);
        return;
      }
    }
    xt::xarray<T, xt::layout_type::row_major> contiguous = a;
    bind_raw(name, dtype_of<T>(), contiguous.data(), extents, true);
  }

  /// Binds from raw memory, copied into the program: `bind("x", ptr, {32, 784})`.
  template <element_type T>
  void bind(std::string_view name, const T* data, std::span<const index_t> shape) {
    bind_raw(name, dtype_of<T>(), data, shape, true);
  }
  template <element_type T>
  void bind(std::string_view name, const T* data, std::initializer_list<index_t> shape) {
    bind_raw(name, dtype_of<T>(), data, std::span<const index_t>(shape.begin(), shape.size()), true);
  }

  /// Binds without copying: the memory must stay valid and unchanged until run() returns.
  template <element_type T>
  void bind_view(std::string_view name, const T* data, std::span<const index_t> shape) {
    if constexpr (!B::host_accessible)
      throw input_error(std::string("luminal: bind_view needs host-accessible memory; backend '") + B::name +
                        "' needs bind(), which copies");
    bind_raw(name, dtype_of<T>(), data, shape, false);
  }
  template <element_type T>
  void bind_view(std::string_view name, const T* data, std::initializer_list<index_t> shape) {
    bind_view(name, data, std::span<const index_t>(shape.begin(), shape.size()));
  }

  /// Binds a quantized weight (a `quantized_weight<Name>` leaf) stored in `format`: rows of
  /// the last extent's elements in ggml's blocks, as a GGUF file holds them (`shape` counts
  /// elements, not blocks). Without a copy where the backend reads host memory (the memory
  /// must then stay valid and unchanged until run() returns), else copied to the device.
  ///     prog.bind_quantized("blk.0.attn_q.weight", quant_format::q4_1, data, {576, 576});
  void bind_quantized(std::string_view name, quant_format format, const void* data, std::span<const index_t> shape) {
    bind_quantized_as(name, format, data, shape, !B::host_accessible);
  }
  void bind_quantized(std::string_view name, quant_format format, const void* data,
                      std::initializer_list<index_t> shape) {
    bind_quantized(name, format, data, std::span<const index_t>(shape.begin(), shape.size()));
  }
  /// bind_quantized for data already in this backend's memory (a GPU's): never copied.
  void bind_quantized_device(std::string_view name, quant_format format, const void* data,
                             std::span<const index_t> shape) {
    bind_quantized_as(name, format, data, shape, false);
  }

  /// Binds memory of this backend (device memory on a GPU) without copying: the memory
  /// must stay valid and unchanged until run() returns. A parameter_store binds this way.
  template <element_type T>
  void bind_device(std::string_view name, const T* data, std::span<const index_t> shape) {
    bind_raw(name, dtype_of<T>(), data, shape, false);
  }
  /// bind_device for data whose element type is known at run time only (checked as the
  /// typed form checks it): a training step binds its store's tensors by a loop over
  /// their entries, not a function per parameter.
  void bind_device(std::string_view name, dtype_tag type, const void* data, std::span<const index_t> shape) {
    bind_raw(name, type, data, shape, false);
  }

  /// Whether the program has an input (leaf) named `name`.
  static bool reads_input(std::string_view name) { return holds_input(leaf_table, name); }

 protected:
  static constexpr auto& leaf_table = leaf_entries<LeavesName, NodesName>;
  static constexpr std::size_t input_count = leaf_table.size();

  explicit program_inputs(B backend = {}) : backend_(std::move(backend)) {}
  program_inputs(const program_inputs&) = delete;
  program_inputs& operator=(const program_inputs&) = delete;
  ~program_inputs() {
    for (auto& b : bindings_)
      if (b.owned) backend_.deallocate(b.owned);
  }
  void swap_inputs(program_inputs& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(bindings_, other.bindings_);
    std::swap(formats_, other.formats_);
    std::swap(extents_current_, other.extents_current_);
  }

  void bind_raw(std::string_view name, dtype_tag type, const void* data, std::span<const index_t> shape, bool copy) {
    std::size_t i = find_input(leaf_table, name);
    bind_data(i, data, shape, check_input(leaf_table[i], type, data, shape) * leaf_table[i].element_bytes, copy);
  }

  void bind_quantized_as(std::string_view name, quant_format format, const void* data, std::span<const index_t> shape,
                         bool copy) {
    std::size_t i = find_input(leaf_table, name);
    const leaf_entry& leaf = leaf_table[i];
    if (leaf.type != dtype_tag::quantized)
      throw input_error("luminal: input '" + std::string(name) + "' holds " + std::string(dtype_name(leaf.type)) +
                        "; bind_quantized() binds quantized weights (quantized_weight<Name>)");
    std::size_t count = check_input(leaf, dtype_tag::quantized, data, shape);
    bind_data(i, data, shape, quantized_bytes(leaf, format, count, shape), copy);
    formats_[std::size_t(leaf.node)] = format;
  }

  /// Binds `bytes` bytes at `data` to input i, checked already: copied, or in place.
  void bind_data(std::size_t i, const void* data, std::span<const index_t> shape, std::size_t bytes, bool copy) {
    input_binding& b = bindings_[i];
    std::copy(shape.begin(), shape.end(), b.dims.begin());
    if (copy) {
      if (b.owned_bytes < bytes) {
        if (b.owned) backend_.deallocate(b.owned);
        b.owned = nullptr, b.owned_bytes = 0;  // nothing dangling if the allocation fails
        b.owned = allocate_named(bytes, [&] { return backend_.allocate(bytes); },
                                 [&] { return "the program's copy of input '" + std::string(leaf_table[i].name) + "'"; });
        b.owned_bytes = bytes;
      }
      backend_.to_device(b.owned, data, bytes);
      b.data = b.owned;
    } else {
      b.data = data;
    }
    b.bound = true;
    extents_current_ = false;
  }

  B backend_{};
  std::array<input_binding, input_count> bindings_{};
  std::array<quant_format, boost::mp11::mp_size<typename NodesName::type>::value> formats_{};  // of quantized leaves, as bound
  bool extents_current_ = false;  // the program's extents follow from the inputs bound now
};

}  // namespace luminal::detail
