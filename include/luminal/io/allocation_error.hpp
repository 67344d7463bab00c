// allocation_error: memory that could not be allocated, with what it was for and how many
// bytes: a program's arena, a tensor of a named file, a tape's values. It is a
// std::bad_alloc, so handlers of allocation failure still catch it, and its what() says
// more than "std::bad_alloc":
//
//     try { step.run(); }
//     catch (const std::bad_alloc& e) { std::cerr << e.what() << "\n"; }
//     // luminal: cannot allocate 5.73 GB (5730000000 bytes) for the program's arena of 212 buffers
#pragma once
#include <cstddef>
#include <cstdio>
#include <new>
#include <string>
#include <utility>

namespace luminal {

/// A failed allocation, named: what the memory was for and its size.
class allocation_error : public std::bad_alloc {
 public:
  /// "luminal: cannot allocate <bytes> for <what>".
  allocation_error(std::size_t bytes, const std::string& what)
      : bytes_(bytes), message_("luminal: cannot allocate " + describe_bytes(bytes) + " for " + what) {}
  const char* what() const noexcept override { return message_.c_str(); }
  std::size_t bytes() const { return bytes_; }

  /// "5.73 GB (5730000000 bytes)", "812 bytes": a size for a message (decimal units).
  static std::string describe_bytes(std::size_t bytes) {
    if (bytes < 1000) return std::to_string(bytes) + " bytes";
    const char* units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
    double value = double(bytes);
    int unit = -1;
    while (value >= 1000 && unit < 5) value /= 1000, ++unit;
    char text[64];
    std::snprintf(text, sizeof text, "%.3g %s (%zu bytes)", value, units[unit], bytes);
    return text;
  }

 private:
  std::size_t bytes_;
  std::string message_;
};

/// Runs `allocate()` and returns its result; a std::bad_alloc from it becomes an
/// allocation_error naming `bytes` and what(), built only then.
///     void* p = allocate_named(bytes, [&] { return backend.allocate(bytes); },
///                              [&] { return "the tape's value of shape " + shape_text; });
template <class Allocate, class What>
auto allocate_named(std::size_t bytes, Allocate&& allocate, What&& what) -> decltype(allocate()) {
  try {
    return allocate();
  } catch (const allocation_error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw allocation_error(bytes, std::string(what()));
  }
}

}  // namespace luminal
