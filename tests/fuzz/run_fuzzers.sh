#!/usr/bin/env bash
# Runs each libFuzzer harness for N minutes, one after another, at the lowest priority,
# starting from the committed corpus (copied: the fuzzers add to their copy), and prints
# each run's executions, coverage and whether it found a crash, leak or UB report.
#
#   tests/fuzz/run_fuzzers.sh MINUTES FUZZER_DIR [WORK_DIR [HARNESS...]]
#     FUZZER_DIR: where fuzz_safetensors, fuzz_idx, fuzz_checkpoint are
#                 (build/tests/fuzz/clang with LUMINAL_FUZZ=ON and g++, or build/tests/fuzz with clang)
#     WORK_DIR:   corpus copies, logs and crash artifacts (default: FUZZER_DIR/fuzz-work)
#     HARNESS:    some of safetensors idx checkpoint gguf llama_hf bpe wordpiece (default: all)
# fuzz_wordpiece uses MiniLM's vocabulary when LUMINAL_MINILM_DIR names its model/ folder.
# Exit status 1 if any fuzzer found something; its reproducer is in WORK_DIR/<harness>/.
set -uo pipefail
minutes=${1:?minutes}
bin=${2:?directory of the fuzz_* binaries}
work=${3:-$bin/fuzz-work}
shift $(($# < 3 ? $# : 3))
harnesses=("$@")
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=(safetensors idx checkpoint gguf llama_hf bpe wordpiece)
# Stack traces with function names, where llvm-symbolizer is installed beside clang.
for symbolizer in /usr/lib/llvm-{21,20,19,18,17,16}/bin/llvm-symbolizer; do
  [[ -x "$symbolizer" && -z "${ASAN_SYMBOLIZER_PATH:-}" ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
failed=0
for harness in "${harnesses[@]}"; do
  exe="$bin/fuzz_$harness"
  [[ -x "$exe" ]] || { echo "$exe not found (configure with -DLUMINAL_FUZZ=ON)"; exit 2; }
  dir="$work/$harness"
  mkdir -p "$dir/corpus"
  cp -n "$here/corpus/$harness/"* "$dir/corpus/"
  log="$dir/fuzz.log"
  # -rss_limit_mb and -malloc_limit_mb: an input may cost memory only in proportion to
  # its size; -timeout: none may take seconds.
  (cd "$dir" && nice -n 19 "$exe" corpus -max_total_time=$((minutes * 60)) -max_len=65536 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 > "$log" 2>&1)
  status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  artifacts=$(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | wc -l)
  echo "fuzz_$harness: ${minutes} min, ${runs:-?} runs, ${cov:-no coverage line}, exit $status, $artifacts artifacts"
  if [[ $status -ne 0 || $artifacts -ne 0 ]]; then
    failed=1
    grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5
  fi
done
exit $failed
