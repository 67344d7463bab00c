// libFuzzer harness: load_safetensors on any bytes must return a store or throw
// checkpoint_error: no crash, leak, undefined behaviour, stack overflow, or time or memory
// beyond a small multiple of the input. What loads must save and load back unchanged.
//
//     ./fuzz_safetensors -max_len=65536 corpus/safetensors
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <luminal/io/safetensors.hpp>

#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  luminal::tensor_store store;
  try {
    store = luminal::load_safetensors(fuzz::input_file(data, size));
  } catch (const luminal::checkpoint_error&) {
    return 0;  // refused: the expected outcome for most inputs
  }
  // A loaded file is a valid checkpoint: every entry converts (or is refused by get() as
  // an empty array whose strides would overflow), and a save reproduces it.
  for (const auto& [name, entry] : store) {
    if (entry.data.size() != entry.element_count() * luminal::dtype_size(entry.dtype)) std::abort();
    try {
      switch (entry.dtype) {
        case luminal::dtype_tag::f32: (void)store.get<float>(name); break;
        case luminal::dtype_tag::f64: (void)store.get<double>(name); break;
        case luminal::dtype_tag::i32: (void)store.get<std::int32_t>(name); break;
        default: (void)store.get<bool>(name); break;
      }
    } catch (const luminal::store_error&) {
      if (entry.element_count() != 0) std::abort();
    }
  }
  luminal::save_safetensors(store, fuzz::own_file());  // anything loaded can be written
  const luminal::tensor_store back = luminal::load_safetensors(fuzz::own_file());
  if (back.names() != store.names() || back.metadata != store.metadata) std::abort();
  for (const auto& [name, entry] : store) {
    const auto& other = back.at(name);
    if (other.dtype != entry.dtype || other.shape != entry.shape || other.data != entry.data) std::abort();
  }
  return 0;
}
