// The interface between a tape's backward and whoever wants each parameter's gradient as
// soon as it is final (a data-parallel exchange); kept apart from tape.hpp so that
// distributed/data_parallel.hpp needs no block or program headers.
#pragma once
#include <string>
#include <vector>

#include "../io/tensor_store.hpp"

namespace luminal {

/// Told by tape::backward when each parameter's gradient is final, that is when the
/// backward has passed the first call that reads the parameter: what a data-parallel
/// exchange needs to start a gradient's sum while the backward goes on
/// (overlapped_gradient_mean in distributed/data_parallel.hpp).
class gradient_listener {
 public:
  struct parameter {
    std::string name;
    dtype_tag dtype{};
    std::vector<index_t> shape;
  };
  virtual ~gradient_listener() = default;
  /// Before the backward: every parameter the recorded calls read, in the order in which
  /// their gradients will be final, and the store the gradients accumulate in.
  virtual void begin(tensor_store& gradients, const std::vector<parameter>& order) = 0;
  /// During the backward: the gradient of order[index] is final in the store (zeros when
  /// no cotangent reached the calls that read it).
  virtual void final(std::size_t index) = 0;
};

}  // namespace luminal
