#!/usr/bin/env bash
# example.sentence_embed_stream (issue 63): examples/sentence_embed
#  - answers each --search query as it is read (a line written to a pipe that stays open
#    is answered before the input ends);
#  - refuses a --search file it cannot read (a directory, /proc/self/mem) with the reason,
#    before it reads any input;
#  - embeds a 40 MB line within 500 MB of address space (only its first 256 tokens are
#    decoded), and the lines after it as usual.
#   sentence_embed_stream.sh <sentence_embed> <model dir> <work dir>
set -euo pipefail
program=$1 model=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
export LUMINAL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAILED: $*"; exit 1; }

printf 'The cat sat on the warm windowsill all afternoon.\n%%\nStock markets fell sharply after the announcement.\n%%\nMy computer crashed and I lost all my work.\n%%\nA kitten is sleeping in the sun.\n%%\n' > "$dir/corpus.txt"

# ---- unreadable --search files: refused at once, while the input is still open ----
mkfifo "$dir/never"
exec 3<> "$dir/never"  # an input that never ends
for bad in "$dir" /proc/self/mem; do
  start=$SECONDS
  status=0
  timeout 60 "$program" --model-dir "$model" --search "$bad" < "$dir/never" > /dev/null 2> "$dir/err" || status=$?
  [[ $status == 1 ]] || fail "--search $bad: exit status $status, expected 1: $(cat "$dir/err")"
  grep -Eq "is a directory|Input/output error" "$dir/err" || fail "--search $bad: $(cat "$dir/err")"
  ((SECONDS - start < 30)) || fail "--search $bad was refused only after $((SECONDS - start)) s"
  echo "--search $bad: refused at once: $(cat "$dir/err")"
done
exec 3>&-

# ---- each query is answered as it is read ----
mkfifo "$dir/queries"
"$program" --model-dir "$model" --search "$dir/corpus.txt" --top 1 < "$dir/queries" > "$dir/answers" 2> "$dir/log" &
pid=$!
exec 4> "$dir/queries"
wait_for() {  # the answers file holds $1, within 120 s
  for ((i = 0; i < 1200; ++i)); do
    grep -q "$1" "$dir/answers" && return 0
    sleep 0.1
  done
  return 1
}
echo "a cat resting in sunshine" >&4
wait_for "query: a cat resting in sunshine" || fail "the first query was not answered while the input stayed open"
grep -A1 "query: a cat" "$dir/answers" | grep -q "kitten" || fail "the first answer: $(cat "$dir/answers")"
echo "software bug" >&4
wait_for "query: software bug" || fail "the second query was not answered while the input stayed open"
exec 4>&-
wait "$pid" || fail "sentence_embed --search exited with $?: $(cat "$dir/log")"
echo "each query was answered as it was read:"
cat "$dir/answers"

# ---- a 40 MB line in 500 MB of address space ----
python3 -c 'import sys; sys.stdout.write("the quick brown fox " * 2000000 + "\nA man is eating food.\n")' > "$dir/long.txt"
status=0
(ulimit -v 500000 && "$program" --model-dir "$model" < "$dir/long.txt" > "$dir/long.out" 2> "$dir/long.err") || status=$?
[[ $status == 0 ]] || fail "the 40 MB line: exit status $status: $(cat "$dir/long.err")"
grep -q "line 1 is longer than 256 tokens" "$dir/long.err" || fail "no note of the cut line: $(cat "$dir/long.err")"
[[ $(wc -l < "$dir/long.out") == 2 ]] || fail "the 40 MB line: $(wc -l < "$dir/long.out") output lines, not 2"
[[ $(tail -1 "$dir/long.out" | tr '\t' '\n' | wc -l) == 384 ]] || fail "the line after it was not embedded"
echo "a 40 MB line embedded within 500 MB of address space, and the line after it"
