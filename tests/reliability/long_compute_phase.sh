#!/bin/sh
# eventprof must not abort a healthy run whose compute phase lasts longer than --comm-timeout
# (issue 33, item 1): 3 ranks on this host, of which only as many as there are cores time compute
# events (the others idle), distinct GEMMs (warm-up and repeats included), then one all-reduce.
# The compute phase lasts several times the timeout; each round (one GEMM per timing rank, then
# the round's all-gather), far less. Before the fix the idle rank waited in the all-reduce's
# communicator for the whole compute phase and the run ended with "a peer rank stalled or died".
#
# The timeout must lie above every round the idle rank waits through and well below the phase.
# Both are read from eventprof's own progress lines (rank 0 prints one as each round starts, with
# the seconds elapsed to 0.1 s; the all-reduce's line ends the phase), not guessed from whole-run
# wall times: two runs' difference carried mpirun's start-up jitter (seconds under load) and
# left out the first round, which is the longest (the ranks' first kernels and buffers), so the
# timeout once came out at 0.88 s for a first round of 1.0 s and the healthy run was aborted.
#
# A calibration run (40 GEMMs, timeout 120 s: nothing is cut) gives the longest round L (its
# largest step plus the 0.1-s print resolution) and the mean round; the timeout is 3 L, so a
# round of the real run would have to take three times the calibration's longest to be cut (on
# CI this test runs alone, RUN_SERIAL: the load is its own). The real run gets enough rounds for
# an expected phase of 5 timeouts, and its own progress lines must show a phase of at least 3.
# A real run whose phase came out shorter (the load fell between the runs) shows nothing either
# way: it is recalibrated from its own lines and run again, at most 3 times.
# Usage: long_compute_phase.sh MPIEXEC EVENTPROF
set -u
mpiexec=$1
eventprof=$2
rounds_awk="$(dirname "$0")/progress_rounds.awk"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Writes $dir/events.yaml: $1 distinct GEMMs (all about 192^3) then one all-reduce of the 3 ranks.
write_events() {
  {
    echo "eventsim_events: 1"
    echo "events:"
    i=0
    while [ "$i" -lt "$1" ]; do
      echo "  - {signature: \"gemm m=$((192 + i % 32)) n=$((192 + i / 32)) k=192 layout=nn dtype=fp32\", count: 1}"
      i=$((i + 1))
    done
    echo "  - {signature: \"allreduce bytes=65536 group=3 nodes=1 rpn=3 dtype=fp32\", count: 1}"
  } >"$dir/events.yaml"
}

# Runs eventprof on $1 GEMMs with --comm-timeout $2 and prints "LONGEST MEAN PHASE ROUNDS" (s) of
# its compute phase from the progress lines (progress_rounds.awk); fails loudly when the run fails.
run() {
  write_events "$1"
  "$mpiexec" -np 3 --oversubscribe "$eventprof" --backend cpu --events "$dir/events.yaml" \
    -o "$dir/p.yaml" --warmup 1 --repeats 40 --comm-timeout "$2" >"$dir/log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$dir/log" >&2
    echo "exit code $rc with $1 GEMMs at --comm-timeout $2: a healthy run was aborted" >&2
    exit 1
  fi
  grep -q "measured $(($1 + 1)) event(s) ($1 compute, 1 communication" "$dir/log" || {
    cat "$dir/log" >&2; echo "not every event measured" >&2; exit 1; }
  rm -f "$dir/p.yaml"
  awk -f "$rounds_awk" "$dir/log" || {
    cat "$dir/log" >&2; echo "no progress lines to time" >&2; exit 1; }
}

field() { echo "$1" | awk -v k="$2" '{ print $k }'; }

# A round measures one GEMM per timing rank (2 on 2 cores: 20 rounds).
gemms=40
calibration=$(run "$gemms" 120) || exit 1
attempt=1
while :; do
  longest=$(field "$calibration" 1)
  mean=$(field "$calibration" 2)
  per_round=$(( (gemms + $(field "$calibration" 4) - 1) / $(field "$calibration" 4) ))
  timeout_s=$(awk -v l="$longest" 'BEGIN { printf "%.3f\n", 3 * l }')
  # Rounds for an expected phase of 5 timeouts (at least the calibration's 20, at most 60).
  rounds=$(awk -v t="$timeout_s" -v m="$mean" 'BEGIN {
    r = int(5 * t / m) + 1; if (r < 20) r = 20; if (r > 60) r = 60; print r }')
  gemms=$((per_round * rounds))
  measured=$(run "$gemms" "$timeout_s") || exit 1
  phase=$(field "$measured" 3)
  echo "attempt $attempt: calibration's longest round ${longest} s (mean ${mean} s);" \
    "--comm-timeout ${timeout_s} s; ${gemms} GEMMs: $(field "$measured" 4) rounds, a compute" \
    "phase of ${phase} s, longest round $(field "$measured" 1) s"
  # The point of the test: the compute phase outlasted the timeout several times over.
  awk -v p="$phase" -v t="$timeout_s" 'BEGIN { exit !(p >= 3 * t) }' && break
  if [ "$attempt" -ge 3 ]; then
    echo "the compute phase stayed under 3 x --comm-timeout in $attempt attempts: it tests nothing"
    exit 1
  fi
  echo "the phase was under 3 x --comm-timeout (the load fell): recalibrating from this run"
  calibration=$measured
  attempt=$((attempt + 1))
done
echo "ok"
