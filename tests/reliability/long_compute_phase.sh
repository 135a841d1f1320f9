#!/bin/sh
# eventprof must not abort a healthy run whose compute phase lasts longer than --comm-timeout
# (issue 33, item 1): 3 ranks on this host, of which only as many as there are cores time compute
# events (the others idle), EVENTS distinct GEMMs of about MS ms each (warm-up and repeats
# included), then one all-reduce. The compute phase lasts several times TIMEOUT; each round, far
# less. Before the fix the idle rank waited in the all-reduce's communicator for the whole compute
# phase and the run ended with "a peer rank stalled or died".
# Usage: long_compute_phase.sh MPIEXEC EVENTPROF [EVENTS] [TIMEOUT_S]
set -u
mpiexec=$1
eventprof=$2
events=${3:-60}
timeout_s=${4:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
  echo "eventsim_events: 1"
  echo "events:"
  i=0
  while [ "$i" -lt "$events" ]; do
    echo "  - {signature: \"gemm m=$((192 + i)) n=192 k=192 layout=nn dtype=fp32\", count: 1}"
    i=$((i + 1))
  done
  echo "  - {signature: \"allreduce bytes=65536 group=3 nodes=1 rpn=3 dtype=fp32\", count: 1}"
} >"$dir/events.yaml"
start=$(date +%s)
"$mpiexec" -np 3 --oversubscribe "$eventprof" --backend cpu --events "$dir/events.yaml" \
  -o "$dir/p.yaml" --warmup 1 --repeats 40 --comm-timeout "$timeout_s" >"$dir/log" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$dir/log"
[ "$rc" -eq 0 ] || { echo "exit code $rc: a healthy run was aborted"; exit 1; }
grep -q "measured $((events + 1)) event(s) ($events compute, 1 communication" "$dir/log" || {
  echo "not every event measured"; exit 1; }
# The point of the test: the compute phase outlasted the timeout several times over.
[ "$elapsed" -ge $((3 * timeout_s)) ] || {
  echo "the run took ${elapsed} s, under 3 x --comm-timeout: it tests nothing (make EVENTS larger)"
  exit 1; }
echo "ok: ${elapsed} s with --comm-timeout ${timeout_s}"
