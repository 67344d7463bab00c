// The CUDA backend's own kernels (cuda.hpp launches them): a grid-stride loop over the
// host's chunk functors, and the reductions by block, by warp and split across blocks.
// Each begins by waiting for the kernel before it (programmatic dependent launch).
#pragma once
#if !defined(__CUDACC__)
#error "luminal/backends/cuda_kernels.hpp must be compiled by nvcc"
#endif
#include <cuda_runtime.h>

#include <type_traits>

#include <luminal/core/dtype.hpp>

namespace luminal::detail {

inline constexpr int cuda_block = 256;  // threads per block; the reduction needs a power of 2

/// Every kernel's first step. With programmatic dependent launch (basic_cuda's
/// dependent_launch: Hopper and later), a kernel may be started while the kernel before it
/// on the stream still runs; it waits here until that one has finished and its writes are
/// visible, then lets the next kernel start in turn. The launch of each kernel then
/// overlaps the end of the one before, instead of following it. Launched without that
/// attribute (or before sm_90), both instructions do nothing.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Grid-stride over chunks of `per_thread` consecutive indices: body(begin, end) is the
/// host's chunk functor, so the host and the device run the same code. A chunk of more
/// than one lets a loop nest advance its coordinates along a row instead of recomputing
/// them (divisions included) for every element.
template <class Body>
__global__ void __launch_bounds__(cuda_block) for_each_kernel(Body body, index_t n, index_t per_thread) {
  wait_for_previous_kernel();
  const index_t stride = index_t(gridDim.x) * blockDim.x * per_thread;
  for (index_t i = (index_t(blockIdx.x) * blockDim.x + threadIdx.x) * per_thread; i < n; i += stride)
    body(i, i + per_thread < n ? i + per_thread : n);
}

/// The threads' values `acc` combined in shared memory; thread 0 gets the result.
/// `partial` holds cuda_block values and may be reused once this returns.
template <class Body, class T>
__device__ T combine_block(const Body& body, T* partial, T acc) {
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] = body.combine(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  T result = partial[0];
  __syncthreads();
  return result;
}

/// One block per output (grid-stride over outputs): the threads stride over the reduced
/// axis, then combine their partial results in shared memory. Body provides identity(),
/// combine(a, b), element(o, k) and store(o, value) (loop_kernels.hpp: reduce_kernel).
template <class Body>
__global__ void __launch_bounds__(cuda_block) block_reduce_kernel(Body body, index_t outputs, index_t extent) {
  using T = typename Body::value_type;
  __shared__ T partial[cuda_block];
  wait_for_previous_kernel();
  for (index_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    T acc = body.identity();
    for (index_t k = threadIdx.x; k < extent; k += blockDim.x) acc = body.combine(acc, body.element(o, k));
    acc = combine_block(body, partial, acc);
    if (threadIdx.x == 0) body.store(o, acc);
  }
}

/// One warp per output (grid-stride over outputs): the lanes stride over the reduced axis
/// and combine by shuffles, with no shared memory and no block-wide barrier. For axes too
/// short to keep a block's 256 threads busy (a softmax over 128 keys, a norm over 256
/// features), eight outputs share a block.
template <class Body>
__global__ void __launch_bounds__(cuda_block) warp_reduce_kernel(Body body, index_t outputs, index_t extent) {
  wait_for_previous_kernel();
  constexpr unsigned warp = 32;
  const unsigned lane = threadIdx.x % warp;
  const index_t warps = index_t(gridDim.x) * (blockDim.x / warp);
  for (index_t o = index_t(blockIdx.x) * (blockDim.x / warp) + threadIdx.x / warp; o < outputs; o += warps) {
    auto acc = body.identity();
    for (index_t k = lane; k < extent; k += warp) acc = body.combine(acc, body.element(o, k));
    for (unsigned offset = warp / 2; offset > 0; offset /= 2)
      acc = body.combine(acc, __shfl_down_sync(0xffffffffu, acc, offset));
    if (lane == 0) body.store(o, acc);
  }
}

/// Whether warp shuffles carry values of type T (warp_reduce_kernel).
template <class T>
inline constexpr bool shuffles = std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && sizeof(T) >= 4;

/// The first pass of a reduction to few outputs: block b reduces part b % parts of output
/// b / parts (consecutive slices of the reduced axis) into parts_out[b].
template <class Body>
__global__ void __launch_bounds__(cuda_block) partial_reduce_kernel(Body body, index_t extent, index_t parts,
                                                                    typename Body::value_type* parts_out) {
  using T = typename Body::value_type;
  __shared__ T partial[cuda_block];
  wait_for_previous_kernel();
  const index_t o = index_t(blockIdx.x) / parts, part = index_t(blockIdx.x) % parts;
  const index_t slice = (extent + parts - 1) / parts;
  const index_t begin = part * slice, end = begin + slice < extent ? begin + slice : extent;
  T acc = body.identity();
  for (index_t k = begin + threadIdx.x; k < end; k += blockDim.x) acc = body.combine(acc, body.element(o, k));
  acc = combine_block(body, partial, acc);
  if (threadIdx.x == 0) parts_out[blockIdx.x] = acc;
}

/// The second pass: each output's parts combined in order, and stored.
template <class Body>
__global__ void __launch_bounds__(cuda_block) combine_parts_kernel(Body body, index_t outputs, index_t parts,
                                                                   const typename Body::value_type* parts_in) {
  wait_for_previous_kernel();
  for (index_t o = index_t(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += index_t(gridDim.x) * blockDim.x) {
    auto acc = body.identity();
    for (index_t p = 0; p < parts; ++p) acc = body.combine(acc, parts_in[o * parts + p]);
    body.store(o, acc);
  }
}

}  // namespace luminal::detail
