// libFuzzer harness: load_safetensors on any bytes must return a store or throw
// checkpoint_error: no crash, leak, undefined behaviour, stack overflow, or time or memory
// beyond a small multiple of the input. What loads must save and load back unchanged.
// The header alone (read_safetensors_header) and a load of some of the tensors by name
// (load_safetensors with tensor_specs: the others skipped unread) must agree with it.
//
//     ./fuzz_safetensors -max_len=65536 corpus/safetensors
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <luminal/io/safetensors.hpp>
#include <string>
#include <vector>

#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  luminal::tensor_store store;
  const std::string file = fuzz::input_file(data, size);
  luminal::safetensors_header header;
  bool header_read = false;
  try {
    header = luminal::read_safetensors_header(file);
    header_read = true;
  } catch (const luminal::checkpoint_error&) {
  }
  try {
    store = luminal::load_safetensors(file);
  } catch (const luminal::checkpoint_error&) {
    // Refused: the expected outcome for most inputs. A header that reads may still hold
    // data that does not (a BOOL byte of 2, an I64 out of range).
    return 0;
  }
  if (!header_read || header.tensors.size() != store.size() || header.metadata != store.metadata) std::abort();
  // Every other tensor by name, the rest skipped unread: the same entries.
  std::vector<luminal::tensor_spec> some;
  for (std::size_t i = 0; i < header.tensors.size(); i += 2) some.push_back(header.tensors[i]);
  try {
    const luminal::tensor_store part = luminal::load_safetensors(file, some, luminal::other_tensors::skip);
    if (part.size() != some.size()) std::abort();
    for (const auto& spec : some)
      if (part.at(spec.name).data != store.at(spec.name).data || part.at(spec.name).shape != spec.shape) std::abort();
    if (some.size() < store.size()) {
      try {
        (void)luminal::load_safetensors(file, some);  // the skipped ones are another model's
        std::abort();
      } catch (const luminal::checkpoint_error&) {
      }
    }
  } catch (const luminal::checkpoint_error&) {
    std::abort();  // a file that loads whole loads in part
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
