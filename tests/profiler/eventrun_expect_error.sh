#!/usr/bin/env bash
# Runs a command that must fail with exit code 2 (InputError) and print a line matching REGEX; with
# --or-success OK_REGEX, a run that exits 0 printing OK_REGEX also passes (a machine with GPUs).
#   eventrun_expect_error.sh REGEX [--or-success OK_REGEX] -- COMMAND...
set -uo pipefail
regex=$1
shift
ok_regex=""
if [ "$1" = "--or-success" ]; then ok_regex=$2; shift 2; fi
[ "$1" = "--" ] && shift
output=$("$@" 2>&1)
rc=$?
echo "$output"
if [ $rc -eq 0 ] && [ -n "$ok_regex" ] && grep -Eq -e "$ok_regex" <<<"$output"; then exit 0; fi
[ $rc -eq 2 ] || { echo "expected exit code 2, got $rc"; exit 1; }
grep -Eq -e "$regex" <<<"$output" || { echo "no line matches: $regex"; exit 1; }
[ "$(grep -Ec -e "$regex" <<<"$output")" -eq 1 ] || { echo "the message is not printed once"; exit 1; }
