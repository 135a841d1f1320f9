#!/bin/sh
# A stalled rank ends the run (issue 17, item 5): starts `mpirun -np 2 TOOL ARGS... --comm-timeout
# 3`, stops the newest of mpirun's rank processes with SIGSTOP once the run is under way, and checks
# that the run ends within 60 s with exit code 1 and the stall line naming the stopped rank ("not
# complete after 3 s (--comm-timeout 3): rank 1 (pid P) is stopped") on stderr.
# Usage: stalled_rank.sh MPIEXEC TOOL ARGS...
set -u
. "$(dirname "$0")/wait_ranks_ready.sh"
mpiexec=$1
tool=$2
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$mpiexec" -np 2 --oversubscribe "$tool" "$@" --comm-timeout 3 >/dev/null 2>"$log" &
launcher=$!
# Every rank is past MPI_Init and has registered its peers (the run lasts far longer; RUN_SERIAL).
if ! wait_ranks_ready "$launcher" 2; then
  echo "the ranks did not start within 60 s"; cat "$log"; kill -KILL "$launcher"; exit 1
fi
# The ranks are mpirun's children (Open MPI 4 starts them directly on a single host).
victim=$(pgrep -P "$launcher" | sort -n | tail -1)
if [ -z "$victim" ]; then
  echo "no $tool process to stop (did the run end already?)"; cat "$log"; exit 1
fi
kill -STOP "$victim"
waited=0
while kill -0 "$launcher" 2>/dev/null; do
  if [ "$waited" -ge 60 ]; then
    echo "still running 60 s after stopping rank process $victim: the stall was not noticed"
    kill -CONT "$victim"; kill -KILL "$launcher"; exit 1
  fi
  sleep 1
  waited=$((waited + 1))
done
wait "$launcher"
rc=$?
kill -KILL "$victim" 2>/dev/null
cat "$log"
if [ "$rc" -ne 1 ]; then echo "exit code $rc, expected 1"; exit 1; fi
# The waiting rank names the stopped one: its pid is the process stopped above.
grep -qE "not complete after 3 s \(--comm-timeout 3\): rank [0-9]+ \(pid $victim\) is stopped" "$log" || {
  echo "no stall message naming the stopped rank (pid $victim)"; exit 1; }
echo "stall noticed after about $waited s"
