#!/bin/sh
# Compile time and peak compiler memory of two whole training programs: model A
# (benchmarks/model_a.cpp: three Linear, LayerNorm, GELU, cross-entropy, AdamW) and
# examples/fashion_mnist.cpp, one translation unit at a time.
#
#   benchmarks/compile_time.sh              # this checkout
#   benchmarks/compile_time.sh --tree DIR   # another checkout's headers and fashion_mnist.cpp,
#                                           # with this checkout's model_a.cpp (before/after)
#
# Flags: those of luminal's examples and benchmarks (-O3 -march=native and the options the
# luminal::luminal target adds, LUMINAL_GCC_COMPACT_GC's collector setting included; set
# GC_FLAGS= for GCC's default collector). Prints wall and CPU seconds and the peak
# resident memory.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tree=$here
if [ "${1:-}" = "--tree" ]; then tree=$(cd "$2" && pwd); fi
cxx=${CXX:-g++}
gc_flags=${GC_FLAGS---param=ggc-min-expand=30}
flags="-std=c++20 -O3 -march=native -fno-math-errno -fno-version-loops-for-strides -fno-unswitch-loops $gc_flags"
includes="-I$tree/include -I$tree/backends -I/usr/include/openblas"
echo "headers: $tree; collector: ${gc_flags:-GCC's default}"
printf '%-20s %8s %8s %10s\n' "translation unit" "wall s" "CPU s" "peak MB"
for source in "$here/benchmarks/model_a.cpp" "$tree/examples/fashion_mnist.cpp"; do
  report=$(mktemp)
  if ! /usr/bin/time -f '%e %U %S %M' -o "$report" $cxx $flags $includes -c "$source" -o /dev/null; then
    echo "$source did not compile against $tree" >&2
    rm -f "$report"
    exit 1
  fi
  awk -v name="$(basename "$source")" '{ printf "%-20s %8.1f %8.1f %10.0f\n", name, $1, $2 + $3, $4 / 1024 }' "$report"
  rm -f "$report"
done
