#!/bin/sh
# A killed rank is named by the survivors (issue 17, item 5): starts `mpirun -np NP TOOL ARGS...`,
# kills the newest of mpirun's rank processes with SIGKILL once the run is under way, and checks
# that the run ends within 30 s with exactly one survivor line naming the killed process
# ("mpirun is ending the job: rank R (pid P) is gone"). mpirun's own exit code is the killed
# rank's (Open MPI 4: 128 + 9 = 137); the survivors exit with code 1.
# Usage: killed_rank.sh MPIEXEC NP TOOL ARGS...
set -u
. "$(dirname "$0")/wait_ranks_ready.sh"
mpiexec=$1
np=$2
tool=$3
shift 3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$mpiexec" -np "$np" --oversubscribe "$tool" "$@" >/dev/null 2>"$log" &
launcher=$!
# Every rank is past MPI_Init and has registered its peers (the run lasts far longer; RUN_SERIAL).
if ! wait_ranks_ready "$launcher" "$np"; then
  echo "the ranks did not start within 60 s"; cat "$log"; kill -KILL "$launcher"; exit 1
fi
victim=$(pgrep -P "$launcher" | sort -n | tail -1)
if [ -z "$victim" ]; then
  echo "no $tool process to kill (did the run end already?)"; cat "$log"; exit 1
fi
kill -KILL "$victim"
waited=0
while kill -0 "$launcher" 2>/dev/null; do
  if [ "$waited" -ge 30 ]; then
    echo "still running 30 s after killing rank process $victim"; kill -KILL "$launcher"; exit 1
  fi
  sleep 1
  waited=$((waited + 1))
done
wait "$launcher"
rc=$?
cat "$log"
if [ "$rc" -ne 137 ]; then echo "mpirun exit code $rc, expected 137 (the killed rank's)"; exit 1; fi
lines=$(grep -c "mpirun is ending the job" "$log")
if [ "$lines" -ne 1 ]; then echo "$lines survivor lines, expected 1"; exit 1; fi
grep -qE "^rank [0-9]+: mpirun is ending the job: rank [0-9]+ \(pid $victim\) is gone \(killed, or exited on an error of its own\)$" "$log" || {
  echo "the survivor line does not name pid $victim"; exit 1; }
echo "killed rank named; run ended after about $waited s"
