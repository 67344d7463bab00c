#!/bin/sh
# The compiler launcher of the compile-fail targets: runs the compile command and keeps
# what the compiler printed in $1, so that check.cmake counts the compiler's own lines
# and not the build tool's. The build log still shows them.
out="$1"
shift
"$@" 2>"$out"
status=$?
cat "$out" >&2
exit $status
