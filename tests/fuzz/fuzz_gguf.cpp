// libFuzzer harness: gguf_file::open on any bytes must return a file or throw gguf_error:
// no crash, read out of bounds, undefined behaviour, or time or memory beyond a small
// multiple of the input. What opens is walked whole: every metadata value through the
// accessor of its type, every tensor's data span touched byte by byte and checked against
// the file and its type's layout.
//
//     ./fuzz_gguf -max_len=65536 corpus/gguf
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <luminal/io/gguf.hpp>
#include <optional>
#include <string_view>

#include "fuzz_input_file.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

/// Reads a value through the accessors its type allows. A gguf_error may come only from
/// a conversion that does not fit (an integer array whose values exceed i64, an f64
/// beyond f32), never from the accessor of the value's own type.
void walk(const luminal::gguf_value& v) {
  using luminal::gguf_type;
  namespace d = luminal::detail::gguf;
  switch (v.type()) {
    case gguf_type::string: check(v.as_string().size() == v.raw().size()); break;
    case gguf_type::boolean: (void)v.as_bool(); break;
    case gguf_type::f32: case gguf_type::f64: (void)v.as_f64(); break;
    case gguf_type::array:
      check(v.element_type() != gguf_type::array);
      if (v.element_type() == gguf_type::string) {
        const auto strings = v.as_string_array();
        check(strings.size() == v.size());
        std::size_t bytes = 0;
        for (std::string_view s : strings) {
          check(reinterpret_cast<const std::byte*>(s.data()) >= v.raw().data());
          check(reinterpret_cast<const std::byte*>(s.data()) + s.size() <= v.raw().data() + v.raw().size());
          bytes += 8 + s.size();
        }
        check(bytes == v.raw().size());
      } else {
        check(v.size() * d::scalar_bytes(v.element_type()) == v.raw().size());
        try {
          if (d::is_integer(v.element_type())) check(v.as_i64_array().size() == v.size());
          if (v.element_type() == gguf_type::f32 || v.element_type() == gguf_type::f64) check(v.as_f32_array().size() == v.size());
        } catch (const luminal::gguf_error&) {
          check(v.element_type() == gguf_type::u64 || v.element_type() == gguf_type::f64);
        }
      }
      break;
    default:  // integers: one of u64 and i64 holds any of them
      check(d::is_integer(v.type()));
      try {
        (void)v.as_i64();
      } catch (const luminal::gguf_error&) {
        check(v.type() == gguf_type::u64);
        (void)v.as_u64();
      }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<luminal::gguf_file> opened;
  try {
    opened.emplace(luminal::gguf_file::open(fuzz::input_file(data, size)));
  } catch (const luminal::gguf_error&) {
    return 0;  // refused: the expected outcome for most inputs
  }
  const luminal::gguf_file& file = *opened;
  const auto whole = file.bytes();
  check(whole.size() == size);
  check(file.version() == 2 || file.version() == 3);
  check(file.alignment() && (file.alignment() & (file.alignment() - 1)) == 0 && file.data_offset() % file.alignment() == 0);

  for (const luminal::gguf_value& v : file.metadata()) {
    check(file.find(v.key()) == &v);  // keys are unique
    walk(v);
  }

  unsigned sum = 0;
  for (const luminal::gguf_tensor_info& t : file.tensors()) {
    check(file.find_tensor(t.name) == &t);
    check(t.n_dims <= 4 && t.offset % file.alignment() == 0);
    const auto traits = luminal::ggml_type_info(t.ggml_type);
    check(traits && traits->name == t.type_name);
    check(t.row_length() % traits->block_elements == 0);
    check(t.row_length() / traits->block_elements * traits->block_bytes * t.row_count() == t.byte_size);
    check(t.data.size() == t.byte_size);
    check(t.data.data() >= whole.data() + file.data_offset());
    check(t.data.data() + t.data.size() <= whole.data() + whole.size());
    for (std::byte b : t.data) sum += std::to_integer<unsigned>(b);  // every byte readable
    if (t.format()) {
      check(file.tensor_format(t) == *t.format());
      check(luminal::row_bytes(*t.format(), t.row_length()) * t.row_count() == t.byte_size);
    } else {
      try {
        (void)file.tensor_format(t);
        std::abort();
      } catch (const luminal::gguf_error&) {
      }
    }
  }
  volatile unsigned keep = sum;  // the reads above may not be optimized away
  (void)keep;
  return 0;
}
