// How the CUDA backend spreads kernels over the GPU (cuda.hpp's basic_cuda holds one).
#pragma once
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <luminal/exec/kernels.hpp>

namespace luminal {

/// How a backend object spreads kernels over the GPU. The defaults need no tuning;
/// benchmarks compare other values without a rebuild through the environment variables
/// named below, read when the backend object is made (a value out of range throws
/// std::invalid_argument naming the variable).
///
///     cuda gpu(cuda_launch_settings{.row_elements = 8});
///     decltype(compile<cuda>(y)) prog(gpu);   // a program takes its backend object
struct cuda_launch_settings {
  /// Consecutive elements each thread takes in a kernel that walks the rows of a loop
  /// nest (a view's coordinates, a reduction's outputs): the coordinates are computed once
  /// per chunk and advance along the row. LUMINAL_CUDA_ROW_ELEMENTS.
  index_t row_elements = 4;
  /// The same for flat loops (index i reads index i: maps, an optimizer's update), which
  /// compute no coordinates: one element keeps a warp's loads on consecutive addresses.
  /// LUMINAL_CUDA_FLAT_ELEMENTS.
  index_t flat_elements = 1;
  /// Programmatic dependent launch, on GPUs that have it (compute capability 9.0, Hopper,
  /// and later): each kernel is started while the one before it still runs, and waits for
  /// its results on the GPU (detail::wait_for_previous_kernel). LUMINAL_CUDA_DEPENDENT_LAUNCH
  /// (0 or 1).
  bool dependent_launch = true;
  /// Reduced axes shorter than this take a warp per output (warp_reduce_kernel) when there
  /// are enough outputs to fill the GPU, longer ones a block; 0: always a block.
  /// LUMINAL_CUDA_WARP_REDUCE_BELOW.
  index_t warp_reduce_below = 4096;

  static cuda_launch_settings from_environment() {
    cuda_launch_settings s;
    s.row_elements = read("LUMINAL_CUDA_ROW_ELEMENTS", s.row_elements, 64);
    s.flat_elements = read("LUMINAL_CUDA_FLAT_ELEMENTS", s.flat_elements, 64);
    s.dependent_launch = read("LUMINAL_CUDA_DEPENDENT_LAUNCH", s.dependent_launch, 1, 0) != 0;
    s.warp_reduce_below = read("LUMINAL_CUDA_WARP_REDUCE_BELOW", s.warp_reduce_below, index_t(1) << 40, 0);
    return s;
  }

 private:
  static index_t read(const char* name, index_t fallback, index_t most, index_t least = 1) {
    const char* text = std::getenv(name);
    if (!text || !*text) return fallback;
    char* end = nullptr;
    long long value = std::strtoll(text, &end, 10);
    if (*end != '\0' || value < least || value > most)
      throw std::invalid_argument(std::string("luminal: the environment variable ") + name + " is '" + text +
                                  "'; it must be a whole number from " + std::to_string(least) + " to " +
                                  std::to_string(most));
    return index_t(value);
  }
};

namespace detail {
/// Whether a kernel body walks the rows of a loop nest (cuda_launch_settings::row_elements)
/// rather than running a flat loop: what evaluates_flat (eval_facts.hpp) says of an
/// elementwise kernel's expression, and every reduction. Other bodies (fills, additions, an
/// optimizer's) are flat.
template <class Body>
inline constexpr bool walks_rows = false;
template <class P, int Id>
inline constexpr bool walks_rows<elementwise_kernel<P, Id>> = [] {
  using K = elementwise_kernel<P, Id>;
  return !(K::where::permute < 0 && detail::evaluates_flat<P, K::it, K::root>::value);
}();
template <class P, int Id>
inline constexpr bool walks_rows<reduce_kernel<P, Id>> = true;
}  // namespace detail

}  // namespace luminal
