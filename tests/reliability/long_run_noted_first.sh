#!/bin/sh
# A long run's note comes first, before any of the work it warns about (issue 33, item 3): starts
# COMMAND..., waits for NOTE (one whole line) on its stderr, and checks that the run is still
# going at that moment and has printed nothing on stdout (its result comes at the end); then
# stops it. Nothing here depends on how fast the machine is: the note is awaited, not given a
# fixed time (it once was: `timeout 15` and exit code 124 expected, which a machine that ran the
# ~95 s of CPU in under 15 s would fail), and a run of minutes ends long after its first line
# on any machine. A run that ends before its note is seen, or never prints it in 60 s, fails.
# Usage: long_run_noted_first.sh NOTE COMMAND...
set -u
note=$1
shift
dir=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$@" >"$dir/out" 2>"$dir/err" &
pid=$!
waited_tenths=0
until grep -qxF "$note" "$dir/err"; do
  # Field 3 of /proc/PID/stat is the state: Z (or no file) once the process has ended.
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  if [ -z "$state" ] || [ "$state" = Z ]; then
    grep -qxF "$note" "$dir/err" && break  # printed just before the check: judged below
    cat "$dir/err"; echo "the run ended without the note"; exit 1
  fi
  [ "$waited_tenths" -lt 600 ] || { cat "$dir/err"; echo "no note within 60 s"; exit 1; }
  sleep 0.1
  waited_tenths=$((waited_tenths + 1))
done
state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
cat "$dir/err"
if [ -z "$state" ] || [ "$state" = Z ]; then
  echo "the run had ended by the time its note was seen: not noted first (or too short a run)"
  exit 1
fi
[ -s "$dir/out" ] && { echo "the run printed its result before the note was seen"; exit 1; }
echo "ok: the note came while the run was going (after about $waited_tenths tenths of a second)"
