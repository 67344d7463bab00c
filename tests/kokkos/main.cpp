// Catch2 v2 runner for luminal_kokkos_tests: the unit tests whose backend list is
// test_backends, compiled through a CUDA Kokkos' nvcc_wrapper with test_backends =
// std::tuple<luminal::kokkos<Kokkos::DefaultExecutionSpace>> (LUMINAL_TEST_KOKKOS_DEVICE).
//
// Without a usable CUDA device it runs nothing and exits 77, which CTest reports as
// "Skipped" (SKIP_RETURN_CODE 77), never as passed: Kokkos::initialize would fail (or
// abort) there. Listing the tests (catch_discover_tests, at build time) needs no GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "session.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace {
int usable_devices() {
#if defined(KOKKOS_ENABLE_CUDA)
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
  return 1;  // a host-only Kokkos: nothing to probe
#endif
}
}  // namespace

int main(int argc, char* argv[]) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-l") == 0 ||
              std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
  if (listing) return Catch::Session().run(argc, argv);
  if (usable_devices() == 0) {
    std::printf("luminal_kokkos_tests: no CUDA device (cudaGetDeviceCount found none): skipped, nothing ran\n");
    return 77;
  }
  return test::run_catch_session_in_kokkos(argc, argv);
}
