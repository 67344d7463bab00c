// Catch2 v2 runner for luminal_tests. With the Kokkos backend (LUMINAL_TEST_KOKKOS), the
// whole session runs between Kokkos::initialize and Kokkos::finalize; Kokkos takes its
// own --kokkos-* arguments out of argv before Catch2 parses the rest.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#ifdef LUMINAL_TEST_KOKKOS
#include <Kokkos_Core.hpp>
#endif

int main(int argc, char* argv[]) {
#ifdef LUMINAL_TEST_KOKKOS
  Kokkos::initialize(argc, argv);
  int result = 0;
  {
    // Everything holding Kokkos views must be gone before finalize.
    Catch::Session session;
    result = session.run(argc, argv);
  }
  Kokkos::finalize();
  return result;
#else
  return Catch::Session().run(argc, argv);
#endif
}
