#!/bin/sh
# Compile time and peak compiler memory of two whole training programs: model A
# (benchmarks/model_a.cpp: three Linear, LayerNorm, GELU, cross-entropy, AdamW) and
# examples/fashion_mnist.cpp, one translation unit at a time.
#
#   benchmarks/compile_time.sh              # this checkout
#   benchmarks/compile_time.sh --tree DIR   # another checkout's headers and fashion_mnist.cpp,
#                                           # with this checkout's model_a.cpp (before/after)
#   benchmarks/compile_time.sh --llama [--tree DIR] [LAYERS...]
#       # benchmarks/llama_train_compile.cpp (issue 64's Llama-style LM) at -O2, 1 2 4 layers
#       # by default, in its parts: the loss's types, compile(loss), the gradients' types,
#       # compile(loss, gradients), compile_train_step with AdamW, and the same model on the
#       # tape (one layer block; the same program at every depth)
#
# Flags: those of luminal's examples and benchmarks (-O3 -march=native and the options the
# luminal::luminal target adds, LUMINAL_GCC_COMPACT_GC's collector setting included; set
# GC_FLAGS= for GCC's default collector). Prints wall and CPU seconds and the peak
# resident memory.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tree=$here
llama=0
if [ "${1:-}" = "--llama" ]; then llama=1; shift; fi
if [ "${1:-}" = "--tree" ]; then tree=$(cd "$2" && pwd); shift 2; fi
cxx=${CXX:-g++}
gc_flags=${GC_FLAGS---param=ggc-min-expand=30}
flags="-std=c++20 -O3 -march=native -fno-math-errno -fno-version-loops-for-strides -fno-unswitch-loops $gc_flags"
includes="-I$tree/include -I$tree/backends -I/usr/include/openblas"
echo "headers: $tree; collector: ${gc_flags:-GCC's default}"
if [ "$llama" = 1 ]; then
  flags=$(echo "$flags" | sed 's/-O3/-O2/')
  printf '%-7s %-28s %8s %10s\n' layers part "CPU s" "peak MB"
  for layers in ${*:-1 2 4}; do
    for part in 0 1 2 3 4 5; do
      case $part in
        0) what="the loss's types" ;; 1) what="compile(loss)" ;; 2) what="the gradients' types" ;;
        3) what="compile(loss, gradients)" ;; 4) what="compile_train_step" ;; 5) what="the tape (one block)" ;;
      esac
      report=$(mktemp)
      if /usr/bin/time -f '%e %U %S %M' -o "$report" $cxx $flags $includes -DLAYERS="$layers" -DPART="$part" \
           -c "$here/benchmarks/llama_train_compile.cpp" -o /dev/null; then
        awk -v l="$layers" -v w="$what" '{ printf "%-7s %-28s %8.1f %10.0f\n", l, w, $2 + $3, $4 / 1024 }' "$report"
      else
        echo "llama_train_compile.cpp did not compile with $layers layers, part $part" >&2
        rm -f "$report"
        exit 1
      fi
      rm -f "$report"
    done
  done
  exit 0
fi
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
