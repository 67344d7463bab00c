// libFuzzer harness: read_idx on any bytes (plain or gzip) must return an array or throw
// data_error, and what it returns must convert with to_xarray: no crash, leak, undefined
// behaviour, or memory beyond what the data (or its compressed size) accounts for.
//
//     ./fuzz_idx -max_len=65536 corpus/idx
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <luminal/data/idx.hpp>

#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  luminal::idx_array a;
  try {
    a = luminal::read_idx(fuzz::input_file(data, size));
  } catch (const luminal::data_error&) {
    return 0;
  }
  try {
    const xt::xarray<double> x = a.to_xarray<double>();
    if (x.size() != a.size()) std::abort();
  } catch (const luminal::data_error&) {
    std::abort();  // read_idx returned dims that to_xarray refuses
  }
  if (a.type == luminal::idx_type::u8 && a.values<std::uint8_t>().size() != a.size()) std::abort();
  return 0;
}
