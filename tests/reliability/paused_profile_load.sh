#!/bin/sh
# A profile's verdict does not depend on the machine's load (issue 33, item 2): three loads of a
# 58 MB profile at once were all refused with "the parser did not finish in 10 s", a wall-clock
# deadline. Load is simulated deterministically here: the loader is stopped (SIGSTOP) in the middle
# of parsing a 60,000-entry profile for 12 s, longer than that old deadline, then continued; it
# must finish with exit code 0 and the same output as a run that was not stopped.
# Usage: paused_profile_load.sh MAKE_PROFILE EVENTSIM (make_profile.py runs with python3 on PATH)
set -u
make_profile=$1
eventsim=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$make_profile" 60000 "$dir/p.yaml" || exit 1
set -- simulate --model tiny-gpt --cluster cpu-local --strategy 1M1P1D --micro-batch 1 \
  --global-batch 1 --fallback analytic --profile "$dir/p.yaml"
"$eventsim" "$@" >"$dir/ref.out" 2>&1 || { cat "$dir/ref.out"; echo "the unpaused run failed"; exit 1; }

"$eventsim" "$@" >"$dir/out" 2>&1 &
pid=$!
# Stop it once it has used 0.2 s of CPU (field 14 of /proc/PID/stat, in 1/100 s) and printed
# nothing: it is then reading or parsing the profile (the simulation after it takes milliseconds).
while :; do
  ticks=$(awk '{print $14}' "/proc/$pid/stat" 2>/dev/null) || ticks=""
  [ -n "$ticks" ] || { echo "the run ended before it could be stopped: it tests nothing"; exit 1; }
  [ "$ticks" -ge 20 ] && break
  sleep 0.05
done
kill -STOP "$pid"
if [ -s "$dir/out" ]; then
  kill -CONT "$pid"; wait "$pid"
  echo "stopped after it printed: not while parsing, it tests nothing"; exit 1
fi
sleep 12
kill -CONT "$pid"
wait "$pid"
rc=$?
cat "$dir/out"
[ "$rc" -eq 0 ] || { echo "exit code $rc after a 12 s pause while parsing"; exit 1; }
cmp -s "$dir/out" "$dir/ref.out" || { echo "output differs from the unpaused run"; exit 1; }
echo "ok: stopped 12 s after ${ticks} ticks of CPU, same output"
