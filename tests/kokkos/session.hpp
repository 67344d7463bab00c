// Runs the Catch2 session between Kokkos::initialize and Kokkos::finalize: shared by the
// runners of luminal_tests (a host-only Kokkos) and luminal_kokkos_tests (a CUDA Kokkos).
// Kokkos takes its own --kokkos-* arguments out of argv before Catch2 parses the rest.
#pragma once
#include <catch2/catch.hpp>

#include <Kokkos_Core.hpp>

namespace test {
inline int run_catch_session_in_kokkos(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int result = 0;
  {
    // Everything holding Kokkos views must be gone before finalize.
    Catch::Session session;
    result = session.run(argc, argv);
  }
  Kokkos::finalize();
  return result;
}
}  // namespace test
