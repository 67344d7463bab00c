#!/bin/bash
# Builds luminal's Kokkos backend and luminal_kokkos_tests against a CUDA-enabled Kokkos,
# on a machine with nvcc and no GPU: the check behind the README's "Kokkos on an HPC
# site". It is not part of CI (about 40 minutes of CPU time); run it after changing
# backends/luminal/backends/kokkos.hpp or the Kokkos parts of the CMake files.
#
#   tests/kokkos/check_cuda_kokkos.sh [work-dir]       (default /tmp/luminal-kokkos-cuda)
#   CUDA_ARCH=90 tests/kokkos/check_cuda_kokkos.sh     (for an H100: see step 2)
#
# Debian ships no CUDA Kokkos, and PyPI's only Kokkos sources are the 3.4.01 copy inside
# pykokkos-base 0.0.7. Kokkos 3.4 predates nvcc 13 and C++20 under nvcc, so four small
# patches are applied to that copy first, and a fifth backports a later fix (marked below). Then:
#   1. Kokkos is built and installed with Kokkos_ENABLE_CUDA, Kokkos_ARCH_AMPERE80, C++20;
#   2. luminal is configured against it with the usual g++ (Kokkos' launcher sends the
#      Kokkos-dependent compiles through nvcc_wrapper) and luminal_kokkos_tests is built.
#      Kokkos 3.4 knows no architecture after Ampere, and its initialization refuses a GPU
#      of another major version than the one its own kernels were compiled for. With
#      CUDA_ARCH=90 (an H100 or H200) a copy of its sources builds "AMPERE80" as sm_90, into
#      kokkos-install-sm90, and luminal into luminal-build-sm90;
#   3. ctest -L kokkos_device must report every test as skipped (no GPU here), or run
#      and pass them where a GPU is present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
work=${1:-/tmp/luminal-kokkos-cuda}
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$work"
cd "$work"

sdist=pykokkos-base-0.0.7.tar.gz
sdist_sha256=6339daced1e81a2748f381847d8717cd77d824407da3c263b9491b5630c642b0
if [ ! -d pykokkos-base-0.0.7 ]; then
  # By package name from pip's configured index, never by a registry URL. pip prepares an
  # sdist's metadata before it keeps the file, and this one's setup.py imports
  # scikit-build: a throwaway virtual environment provides it.
  if [ ! -f "$sdist" ]; then
    python3 -m venv sdist-venv
    sdist-venv/bin/pip install -q scikit-build
    sdist-venv/bin/pip download -q --no-deps --no-binary :all: --no-build-isolation -d . pykokkos-base==0.0.7
  fi
  echo "$sdist_sha256  $sdist" | sha256sum -c --quiet
  tar xzf "$sdist"
  kokkos=pykokkos-base-0.0.7/external/kokkos
  # Patch 1: nvcc 13 has no sm_35, nvcc_wrapper's default architecture.
  sed -i 's/^default_arch="sm_35"/default_arch="sm_80"/' $kokkos/bin/nvcc_wrapper
  # Patch 2: let -std=c++20 reach nvcc (3.4 passed it to the host compiler only) and
  # let CMake ask for it.
  sed -i 's/^  --std=c++17|-std=c++17)/  --std=c++17|-std=c++17|--std=c++20|-std=c++20)/' $kokkos/bin/nvcc_wrapper
  sed -i 's/"-std=c++14;-std=c++17")/"-std=c++14;-std=c++17;-std=c++20")/' $kokkos/cmake/kokkos_test_cxx_std.cmake
  # Patch 3: cuda_fp16.h of CUDA 13 has no __half2double and no implicit half_t -> __half.
  sed -i '/cast_from_half(half_t val) {$/,/^}$/{s/return __half2double(val);/return static_cast<double>(__half2float(static_cast<__half>(val)));/;s/return \(__half2[a-z_]*\)(val);/return \1(static_cast<__half>(val));/}' \
    $kokkos/core/src/Cuda/Kokkos_Cuda_Half.hpp
  # Patch 4: CUDA 13's cudaMemPrefetchAsync takes a cudaMemLocation and flags.
  python3 - "$kokkos/core/src/Cuda/Kokkos_CudaSpace.cpp" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
old = """    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, space.cuda_device(),
                                        space.cuda_stream()));"""
new = """#if CUDART_VERSION >= 13000
    cudaMemLocation location{};
    location.type = cudaMemLocationTypeDevice;
    location.id = space.cuda_device();
    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, location, 0, space.cuda_stream()));
#else
""" + old + """
#endif"""
if old not in text:
    sys.exit("Kokkos_CudaSpace.cpp: the cudaMemPrefetchAsync call to patch was not found")
open(path, "w").write(text.replace(old, new))
EOF
  # Patch 5: 3.4's block-size deduction reads the device's properties through a new
  # Kokkos::Cuda(), whose shared pointer allocates a control block: one heap allocation per
  # kernel launch, which "running again with the same extents allocates nothing" counts.
  # Kokkos 4.2 reads them from the launch's own instance (kokkos/kokkos#6419); so does this.
  deduction=$kokkos/core/src/Cuda/Kokkos_Cuda_BlockSize_Deduction.hpp
  [ "$(grep -c 'auto const& prop = Kokkos::Cuda().cuda_device_prop();' $deduction)" = 2 ] ||
    { echo "$deduction: the two Kokkos::Cuda() property reads to patch were not found" >&2; exit 1; }
  sed -i 's/auto const& prop = Kokkos::Cuda().cuda_device_prop();/auto const\& prop = cuda_instance->m_deviceProp;/' $deduction
fi
kokkos=$work/pykokkos-base-0.0.7/external/kokkos
suffix=""
if [ -n "${CUDA_ARCH:-}" ] && [ "$CUDA_ARCH" != 80 ]; then
  suffix=-sm$CUDA_ARCH
  if [ ! -d "kokkos$suffix" ]; then
    cp -r "$kokkos" "kokkos$suffix"
    sed -i "s/CHECK_CUDA_ARCH(AMPERE80  sm_80)/CHECK_CUDA_ARCH(AMPERE80  sm_$CUDA_ARCH)/" "kokkos$suffix/cmake/kokkos_arch.cmake"
    grep -q "sm_$CUDA_ARCH" "kokkos$suffix/cmake/kokkos_arch.cmake" || { echo "kokkos_arch.cmake: AMPERE80 not found" >&2; exit 1; }
  fi
  kokkos=$work/kokkos$suffix
fi
install=$work/kokkos-install$suffix

if [ ! -f "$install/lib/cmake/Kokkos/KokkosConfig.cmake" ]; then
  cmake -S "$kokkos" -B "kokkos-build$suffix" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$install" \
    -DCMAKE_CXX_COMPILER="$kokkos/bin/nvcc_wrapper" -DCMAKE_CXX_STANDARD=20 -DKokkos_CXX_STANDARD=20 \
    -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ARCH_AMPERE80=ON
  cmake --build "kokkos-build$suffix" -j"$(nproc)"
  cmake --install "kokkos-build$suffix"
fi

cmake -S "$source_dir" -B "luminal-build$suffix" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$install" \
  -DLUMINAL_ENABLE_CUDA=OFF -DLUMINAL_BUILD_BENCHMARKS=OFF -DLUMINAL_BUILD_EXAMPLES=OFF | grep "luminal:"
cmake --build "luminal-build$suffix" -j"$(nproc)" --target luminal_kokkos_tests
ctest --test-dir "luminal-build$suffix" -L kokkos_device
