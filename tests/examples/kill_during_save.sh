#!/usr/bin/env bash
# io.kill_during_save: checkpoint saves killed with SIGKILL at random moments (50 times by
# default) must leave a whole checkpoint whenever one exists, and the next save must
# leave exactly one file: the new checkpoint, every killed save's temporary file removed.
#   kill_during_save.sh <checkpoint_tool> <work dir> [kills]
set -euo pipefail
tool=$1 dir=$2 kills=${3:-50}
rm -rf "$dir"
mkdir -p "$dir"
ckpt="$dir/ckpt.safetensors"

during=0  # kills that landed inside a save: they left a temporary file
for ((i = 1; i <= kills; ++i)); do
  "$tool" save-loop "$ckpt" &
  pid=$!
  # 20 to 300 ms: most kills land inside a save of a 4 MB file (write, fsync, rename).
  sleep "0.$(printf '%03d' $((20 + RANDOM % 280)))"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  # Each save-loop removes the debris of the previous kill as it starts: at most one here.
  (($(find "$dir" -name 'ckpt.safetensors.tmp-*' | wc -l) > 0)) && during=$((during + 1))
  if [[ -e "$ckpt" ]]; then
    "$tool" verify "$ckpt" > /dev/null || { echo "kill $i: $ckpt is not a whole checkpoint"; exit 1; }
  fi
done
debris=$(find "$dir" -name 'ckpt.safetensors.tmp-*' | wc -l)
echo "after $kills kills ($during inside a save): $(ls "$dir" | wc -l) files, $debris temporary files," \
  "$(du -sk "$dir" | cut -f1) KiB"

"$tool" save-once "$ckpt"
"$tool" verify "$ckpt"
left=$(ls -A "$dir")
if [[ "$left" != "ckpt.safetensors" ]]; then
  echo "after the next save, the directory holds more than the checkpoint:"
  ls -la "$dir"
  exit 1
fi
echo "after the next save: only ckpt.safetensors ($debris temporary files removed)"
