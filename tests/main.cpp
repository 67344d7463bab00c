// Catch2 v2 runner for luminal_tests. With the Kokkos backend (LUMINAL_TEST_KOKKOS), the
// whole session runs between Kokkos::initialize and Kokkos::finalize; Kokkos takes its
// own --kokkos-* arguments out of argv before Catch2 parses the rest.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#ifdef LUMINAL_TEST_KOKKOS
#include "kokkos/session.hpp"
#endif

int main(int argc, char* argv[]) {
#ifdef LUMINAL_TEST_KOKKOS
  return test::run_catch_session_in_kokkos(argc, argv);
#else
  return Catch::Session().run(argc, argv);
#endif
}
