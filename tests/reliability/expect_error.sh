#!/bin/sh
# Runs COMMAND and checks the issue-33 contract for bad input: exit code CODE and the line TEXT (a
# fixed string, matched whole, "prefix: " tools' names included) on stderr, once. With --one-line
# stderr must hold nothing else (eventsim); without it other lines may surround it (mpirun's).
# Usage: expect_error.sh [--one-line] CODE TEXT COMMAND...
set -u
one_line=0
if [ "$1" = "--one-line" ]; then one_line=1; shift; fi
code=$1
text=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$@" >/dev/null 2>"$err"
rc=$?
cat "$err"
[ "$rc" -eq "$code" ] || { echo "exit code $rc, expected $code"; exit 1; }
count=$(grep -cxF -- "$text" "$err")
[ "$count" -eq 1 ] || { echo "the line '$text' appears $count times, expected once"; exit 1; }
if [ "$one_line" -eq 1 ]; then
  lines=$(wc -l <"$err")
  [ "$lines" -eq 1 ] || { echo "$lines lines on stderr, expected 1"; exit 1; }
fi
! grep -q "runtime error:" "$err" || { echo "sanitizer report"; exit 1; }
echo "ok: exit $rc"
