#!/bin/bash
# The GPU check of the CUDA backend on a machine that has a GPU but neither Debian's
# packages nor a network (nvcc, CMake, ctest and PyTorch CUDA only): build here, run there.
#
#   benchmarks/cuda/gpu_check.sh pack [BUILD]   # here: bundle BUILD's CUDA programs, their
#                                               # CTest files and the libraries the GPU machine
#                                               # lacks into .gpu/bundle.tar.xz (git-ignored)
#   benchmarks/cuda/gpu_check.sh run            # there, at the checkout's root (with .gpu/):
#                                               # ctest -L cuda, a step's PCIe bytes, the
#                                               # install consumer's CUDA app, the CUDA
#                                               # benchmarks, a profile
#
# NCU_MLP=1 run times every kernel of the MLP step under Nsight Compute (ncu_mlp.csv.gz).
# BASELINE=DIR pack also bundles DIR's train_step_cuda and char_gpt_cuda (an older build),
# and run times them right after the new ones, on the same GPU, without the peers.
# KOKKOS_TESTS=FILE pack (default: the luminal_kokkos_tests of CUDA_ARCH=90
# tests/kokkos/check_cuda_kokkos.sh, when built) bundles a CUDA Kokkos build of the backend tests; run runs them.
# SETTINGS="A B ..." run times both benchmarks again, without peers, under each setting: a
# comma-separated list of environment assignments, such as cuda_launch_settings' variables
# (SETTINGS="LUMINAL_CUDA_ROW_ELEMENTS=1,LUMINAL_CUDA_DEPENDENT_LAUNCH=0 LUMINAL_CUDA_ROW_ELEMENTS=8").
#
# BUILD (default build-gpu) is a build directory of this checkout configured for the GPU:
#   cmake -S . -B build-gpu -DLUMINAL_CUDA_FULL_TESTS=ON -DLUMINAL_NATIVE_ARCH=OFF \
#         -DLUMINAL_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-gpu --target luminal_cuda_tests luminal_nccl_tests train_step_cuda char_gpt_cuda
# (-DLUMINAL_NATIVE_ARCH=OFF: the GPU machine's processor may lack this one's instructions.)
# CTest's files name the build by its absolute path, so `run` makes that path lead to the
# unpacked build; the checkout must be where it was here, or that path free there.
# Logs go to $OUT (the device tool's folder) or /tmp/gpu-check.
set -u
mode=${1:-}
root=$(pwd)
if [ "$mode" = pack ]; then
  build=${2:-build-gpu}
  [ -f "$build/CMakeCache.txt" ] || { echo "gpu_check: $build is not a build directory" >&2; exit 2; }
  stage=$(mktemp -d)
  mkdir -p "$stage/lib" "$stage/build"
  # Programs, stripped, and what ctest needs to find and run them.
  (cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include*.cmake' -o -name '*_tests-*.cmake' \
      -o -name bench_source_dir.txt \) -print0 | xargs -0 -I{} cp --parents {} "$stage/build/")
  for exe in tests/luminal_cuda_tests tests/luminal_nccl_tests benchmarks/cuda/train_step_cuda \
             benchmarks/cuda/char_gpt_cuda benchmarks/cuda/char_gpt_cuda_graph; do
    if [ -x "$build/$exe" ]; then
      mkdir -p "$stage/build/$(dirname "$exe")"
      strip -o "$stage/build/$exe" "$build/$exe"
    fi
  done
  if [ -n "${BASELINE:-}" ]; then
    mkdir -p "$stage/base"
    for exe in train_step_cuda char_gpt_cuda; do strip -o "$stage/base/$exe" "$BASELINE/$exe"; done
  fi
  kokkos_tests=${KOKKOS_TESTS:-/tmp/luminal-kokkos-cuda/luminal-build-sm90/tests/luminal_kokkos_tests}
  if [ -x "$kokkos_tests" ]; then
    mkdir -p "$stage/kokkos" && strip -o "$stage/kokkos/luminal_kokkos_tests" "$kokkos_tests"
  fi
  # The install test's consumer app (tests/consumer/main.cu, built against the installed
  # luminal::cuda by ctest's install.consumer in the main build), when it was built.
  consumer=${CONSUMER_APP:-build/consumer-build/app_cuda}
  [ -x "$consumer" ] && strip -o "$stage/build/app_cuda" "$consumer"
  # OpenBLAS and its Fortran runtime: the GPU machine has CUDA's libraries, not these.
  for lib in $(ldd "$build/tests/luminal_cuda_tests" | awk '/openblas|gfortran|quadmath/ {print $3}'); do
    cp -L "$lib" "$stage/lib/"
  done
  echo "$(cd "$build" && pwd)" > "$stage/build_path.txt"
  mkdir -p .gpu
  tar -C "$stage" -cJf .gpu/bundle.tar.xz .
  rm -rf "$stage"
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
  ls -la .gpu/bundle.tar.xz
  exit 0
fi
[ "$mode" = run ] || { echo "usage: gpu_check.sh pack [BUILD] | run" >&2; exit 2; }

out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
unpacked=/tmp/luminal-gpu
rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xJf .gpu/bundle.tar.xz || exit 1
build_path=$(cat "$unpacked/build_path.txt")
source_path=$(dirname "$build_path")
if [ "$(readlink -f "$source_path" 2>/dev/null)" != "$root" ]; then
  [ -e "$source_path" ] && { echo "gpu_check: $source_path exists and is not this checkout" >&2; exit 1; }
  mkdir -p "$(dirname "$source_path")" && ln -s "$root" "$source_path"
fi
if [ -d "$build_path" ] && [ ! -L "$build_path" ]; then
  echo "gpu_check: $build_path is a build directory of this machine: run 'run' on the GPU machine" >&2; exit 1
fi
rm -f "$build_path" && ln -s "$unpacked/build" "$build_path"
# CUDA's libraries (cuBLAS, cudart, NCCL) wherever the toolkit or PyTorch's wheels put them.
for d in $(find /usr/local /opt /usr/lib -path /proc -prune -o \( -name 'libcublas.so.13' -o -name 'libcudart.so.13' \
             -o -name 'libnccl.so.2' \) -print 2>/dev/null | xargs -r -n1 dirname | sort -u); do
  LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH="$unpacked/lib:$LD_LIBRARY_PATH"
export LUMINAL_BENCH_PYTHON=${LUMINAL_BENCH_PYTHON:-$(command -v python3)}
export PYTHONUNBUFFERED=1

section() { printf '\n==== %s (%s)\n' "$1" "$(date +%T)"; }
# ONLY="ctest pcie app kokkos train_step char_gpt settings profile" picks sections (default: all of them).
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
section "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
nvcc --version | tail -2
for exe in tests/luminal_cuda_tests tests/luminal_nccl_tests; do
  ldd "$build_path/$exe" | grep "not found" && echo "gpu_check: $exe lacks a library (above)"
done

want ctest && section "ctest -L cuda" && (cd "$build_path" && timeout ${CTEST_SECONDS:-240} ctest -L cuda -j ${CTEST_JOBS:-6} --timeout 200 \
    --output-on-failure > "$out/ctest.log" 2>&1; echo "ctest exit $?"
  grep -E "tests passed|tests failed|Failed|Not Run|\*\*\*|Timeout" "$out/ctest.log" | tail -40)

# The figure behind "no PCIe traffic for parameters": Catch2's -s prints the test's INFO
# line (bytes per step each way, against the parameters' and optimizer state's bytes).
want pcie && section "bytes a training step moves between host and device" && (cd "$build_path/tests" &&
  timeout 120 ./luminal_cuda_tests "cuda: a training step matches the host and moves no parameters*" -s 2>&1 |
    grep -E "^  bytes per step|^[A-Za-z].* - cuda|test cases" | uniq)

want app && section "the install consumer's app_cuda" && if [ -x "$unpacked/build/app_cuda" ]; then timeout 60 "$unpacked/build/app_cuda"; echo "app_cuda exit $?"; fi

want train_step && section "train_step_cuda" && timeout ${TRAIN_STEP_SECONDS:-200} "$build_path/benchmarks/cuda/train_step_cuda" --reps 50 2>&1 | tee "$out/train_step.log"

if want train_step && [ -d "$unpacked/base" ]; then
  section "train_step_cuda of the baseline build (no peers)"
  timeout ${TRAIN_STEP_SECONDS:-200} "$unpacked/base/train_step_cuda" --reps 50 --no-torch 2>&1 | tee "$out/train_step_base.log"
fi

want char_gpt && section "char_gpt_cuda" && for batch in ${CHAR_GPT_BATCHES:-8}; do
  timeout ${CHAR_GPT_SECONDS:-150} "$build_path/benchmarks/cuda/char_gpt_cuda" --batch "$batch" --reps 10 2>&1 |
    tee "$out/char_gpt_batch$batch.log"
  if [ -x "$build_path/benchmarks/cuda/char_gpt_cuda_graph" ]; then
    echo "-- on cuda_graph (no peers):"
    timeout ${CHAR_GPT_SECONDS:-150} "$build_path/benchmarks/cuda/char_gpt_cuda_graph" --batch "$batch" --reps 10 \
      --no-peers 2>&1 | grep -E "^luminal|phases"
  fi
  if [ -d "$unpacked/base" ]; then
    echo "-- the baseline build, then the new one again (no peers):"
    for exe in "$unpacked/base/char_gpt_cuda" "$build_path/benchmarks/cuda/char_gpt_cuda"; do
      timeout ${CHAR_GPT_SECONDS:-150} "$exe" --batch "$batch" --reps 10 --no-peers 2>&1 | grep -E "^luminal"
    done
  fi
done
want kokkos && [ -x "$unpacked/kokkos/luminal_kokkos_tests" ] && section "luminal_kokkos_tests (Kokkos on CUDA)" && (
  cd "$unpacked/kokkos" && LUMINAL_FIXTURE_DIR="$root/tests/fixtures" timeout ${KOKKOS_SECONDS:-300} \
    ./luminal_kokkos_tests "*test_backends*" > "$out/kokkos.log" 2>&1; echo "luminal_kokkos_tests exit $?"
  grep -E "test cases|FAILED|failed|No tests" "$out/kokkos.log" | tail -20)

if want settings && [ -n "${SETTINGS:-}" ]; then
  for setting in $SETTINGS; do
    section "settings: $setting"
    (
      IFS=, && for assignment in $setting; do export "$assignment"; done
      unset IFS
      timeout ${TRAIN_STEP_SECONDS:-200} "$build_path/benchmarks/cuda/train_step_cuda" --reps 50 --no-torch 2>&1 |
        grep -E "^batch|luminal|cuBLAS"
      for batch in ${CHAR_GPT_BATCHES:-8}; do
        for exe in char_gpt_cuda char_gpt_cuda_graph; do
          [ -x "$build_path/benchmarks/cuda/$exe" ] || continue
          echo "-- $exe, batch $batch:"
          timeout ${CHAR_GPT_SECONDS:-150} "$build_path/benchmarks/cuda/$exe" --batch "$batch" --reps 10 --no-peers 2>&1 |
            grep -E "^luminal"
        done
      done
    )
  done
fi

if want profile; then
  timeout ${CHAR_GPT_SECONDS:-150} "$build_path/benchmarks/cuda/char_gpt_cuda" --reps 5 --profile --no-peers \
    > "$out/char_gpt_profile.log" 2>&1
  echo "profile exit $?; the slowest kernels of the layer's forward and backward:"
  grep -A4 "luminal profile" "$out/char_gpt_profile.log" | cut -c1-220
fi

if [ -n "${NCU_MLP:-}" ] && command -v ncu >/dev/null; then
  section "ncu: every kernel of train_step_cuda --reps 3 (both batches and backends) into ncu_mlp.csv"
  timeout ${NCU_SECONDS:-150} ncu --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
    --csv "$build_path/benchmarks/cuda/train_step_cuda" --reps 3 --no-torch > "$out/ncu_mlp.csv" 2> "$out/ncu_mlp.err"
  echo "ncu exit $?"
  gzip -f "$out/ncu_mlp.csv"  # thousands of rows: the device tool brings back small files only
fi

if [ "${NCU_KERNELS:-0}" -gt 0 ] && command -v ncu >/dev/null; then
  section "ncu: ${NCU_KERNELS} kernels of the GPT's steady state (true durations and DRAM bandwidth)"
  timeout ${NCU_SECONDS:-150} ncu --clock-control none --launch-skip ${NCU_SKIP:-4000} --launch-count "$NCU_KERNELS" \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    --csv "$build_path/benchmarks/cuda/char_gpt_cuda" --reps 3 --no-peers > "$out/ncu.csv" 2> "$out/ncu.err"
  echo "ncu exit $?"
  python3 - "$out/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no ncu rows"); sys.exit()
head = rows[0]; idx = {n: head.index(n) for n in head}
kernels = collections.defaultdict(dict)
for r in rows[1:]:
    if r[idx["Metric Name"]] == "Metric Name": continue
    kernels[r[idx["ID"]]][r[idx["Metric Name"]]] = (r[idx["Metric Unit"]], r[idx["Metric Value"]].replace(",", ""))
    kernels[r[idx["ID"]]]["name"] = r[idx["Kernel Name"]][:60]
def num(k, m):
    unit, v = kernels[k].get(m, ("", "0")); v = float(v)
    # Nsight Compute spells units "nsecond" or "ns", "Kbyte" or "KB", by version.
    return v * {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "byte": 1, "B": 1,
                "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9}.get(unit, 1)
out = []
for k in kernels:
    us = num(k, "gpu__time_duration.sum"); b = num(k, "dram__bytes_read.sum") + num(k, "dram__bytes_write.sum")
    out.append((us, b, kernels[k].get("dram__throughput.avg.pct_of_peak_sustained_elapsed", ("", "?"))[1],
                kernels[k].get("sm__throughput.avg.pct_of_peak_sustained_elapsed", ("", "?"))[1], kernels[k]["name"]))
out.sort(reverse=True)
print(f"{len(out)} kernels, {sum(o[0] for o in out):.1f} us in all; slowest first:")
for us, b, dram, sm, name in out[:12]:
    print(f"  {us:8.2f} us  {b / 1e6:7.3f} MB  {b / (us * 1e-6) / 1e9 if us else 0:7.1f} GB/s  dram {dram}%  sm {sm}%  {name}")
PY
fi
