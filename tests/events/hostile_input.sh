#!/bin/sh
# A hostile value in an input file gets one line and an exit code (issue 17, items 3 and 8).
# Usage: hostile_input.sh CODE TEXT SOURCE SED_EXPR COMMAND...
# Copies SOURCE with SED_EXPR applied (the edit must change it) into a temporary folder, runs
# COMMAND with every argument @FILE@ replaced by the copy, and checks: exit code CODE, exactly one
# line on stderr, containing TEXT (a fixed string), and no sanitizer report.
set -u
code=$1
text=$2
source=$3
expr=$4
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
file="$dir/$(basename "$source")"
sed -e "$expr" "$source" >"$file"
if cmp -s "$source" "$file"; then echo "the edit '$expr' changed nothing in $source"; exit 1; fi
# Rebuild the command line with @FILE@ replaced (arguments hold no newlines).
for arg in "$@"; do
  [ "$arg" = "@FILE@" ] && arg=$file
  printf '%s\n' "$arg"
done >"$dir/args"
set --
while IFS= read -r arg; do set -- "$@" "$arg"; done <"$dir/args"
"$@" >/dev/null 2>"$dir/err"
rc=$?
cat "$dir/err"
lines=$(wc -l <"$dir/err")
[ "$rc" -eq "$code" ] || { echo "exit code $rc, expected $code"; exit 1; }
[ "$lines" -eq 1 ] || { echo "$lines lines on stderr, expected 1"; exit 1; }
grep -qF -- "$text" "$dir/err" || { echo "stderr lacks: $text"; exit 1; }
! grep -q "runtime error:" "$dir/err" || { echo "sanitizer report"; exit 1; }
echo "ok: exit $rc, one line"
