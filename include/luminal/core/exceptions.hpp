// The exceptions a program or a tape throws at its API edge. Subsystems with their own
// failure modes declare theirs beside their code (checkpoint_error, store_error,
// data_error, cuda_error); compile-time errors are in errors.hpp.
#pragma once
#include <stdexcept>

namespace luminal {

/// Bad data at the API edge: unknown or missing input, wrong element type, wrong extent.
///     try { prog.run(); } catch (const luminal::input_error& e) { std::cerr << e.what(); }
class input_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A kernel found bad data while running (a gather index out of range).
class run_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace luminal
