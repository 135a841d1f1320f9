#!/bin/bash
# Two-thread scaling of a search bench (issue 34 item 2: "aim >= 1.8x on 2 threads"): PAIRS
# pairs of runs at one and at two threads, alternated (1-2, then 2-1, ...) so that drift in the
# machine's load falls on both; prints each run and the medians: the bench's own time (the search
# alone, no start-up), the process's wall, user+sys CPU, and the CPU the REST of the machine used
# meanwhile (from /proc/stat, less this run's own): with more than a few hundredths of a core-second
# of it, the two-thread time is not the code's. Results: bench/RESULTS.md, session 26, par34.
#
#   bench/thread_scaling.sh [BENCH] [PAIRS] [BIN]
#     BENCH  default BM_Llama70b_Every_Pruned/T/1024/ (T is replaced by 1 and 2)
#     PAIRS  default 5
#     BIN    default build/bench/search_bench
#   PROFILE=1 bench/thread_scaling.sh ...   also prints EVSIM_PARALLEL_PROFILE's phases of the
#                                           last pair (modeler/parallel_profile.h)
#   PRIORITY=1 bench/thread_scaling.sh ...  runs each bench in an autogroup of its own at nice -20
#                                           (needs root): on a machine other jobs load, its two
#                                           threads then get two cores for the seconds a run
#                                           lasts (with autogroups on, plain nice acts only within
#                                           a session). Results: bench/RESULTS.md, session 28.
# Run from the repository root (the benches read configs/ relative to it).
set -euo pipefail

BENCH=${1:-BM_Llama70b_Every_Pruned/T/1024/}
PAIRS=${2:-5}
BIN=${3:-build/bench/search_bench}
[[ -x $BIN ]] || { echo "thread_scaling.sh: no executable $BIN (build it first)" >&2; exit 2; }
[[ $BENCH == */T/* ]] || { echo "thread_scaling.sh: BENCH must contain /T/ for the thread count" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Busy jiffies of the whole machine: user nice system irq softirq steal.
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)

# run T LAST: one run at T threads; appends "T bench_ms wall cpu others" to $tmp/runs.
run() {
  local t=$1 last=$2 filter=${BENCH//\/T\//\/$1\/} before after profile=0
  [[ ${PROFILE:-0} == 1 && $last == 1 ]] && profile=1
  before=$(busy_jiffies)
  local prefix=()
  if [[ ${PRIORITY:-0} == 1 ]]; then
    # A new session (setsid) gets a new autogroup, whose nice the run lowers for itself.
    prefix=(setsid bash -c 'echo -20 >/proc/self/autogroup && exec nice -n -20 "$@"' priority)
  fi
  EVSIM_PARALLEL_PROFILE=$profile "${prefix[@]}" /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" \
    "$BIN" --benchmark_filter="$filter" --benchmark_min_time=0.0001 >"$tmp/out" 2>"$tmp/err"
  after=$(busy_jiffies)
  local ms wall user sys rss
  ms=$(awk '/real_time/ { print $2; exit }' "$tmp/out")
  read -r wall user sys rss <"$tmp/time"
  awk -v t="$t" -v ms="$ms" -v wall="$wall" -v u="$user" -v s="$sys" -v rss="$rss" \
    -v busy=$((after - before)) -v hz="$hz" 'BEGIN {
      cpu = u + s; others = busy / hz - cpu; if (others < 0) others = 0
      printf "%d %s %.2f %.2f %.2f\n", t, ms, wall, cpu, others >> "'"$tmp/runs"'"
      printf "  threads %d: bench %7.0f ms  wall %6.2f s  cpu %6.2f s (%.2f cores)  rest of machine %5.2f core-s  %6.1f MB\n",
             t, ms, wall, cpu, cpu / wall, others, rss / 1024 }'
  if [[ $profile == 1 ]]; then sed -n '/^parallel profile/,/^  search /p' "$tmp/err"; fi
}

echo "$BIN, $BENCH, $PAIRS pairs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((p = 1; p <= PAIRS; p++)); do
  last=$((p == PAIRS ? 1 : 0))
  if ((p % 2 == 1)); then run 1 "$last"; run 2 "$last"; else run 2 "$last"; run 1 "$last"; fi
done

awk '
  function median(a, n,   i, j, x) {
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n[$1]++; ms[$1, n[$1]] = $2; cpu[$1, n[$1]] = $4; oth[$1, n[$1]] = $5 }
  END {
    for (t = 1; t <= 2; t++) {
      for (i = 1; i <= n[t]; i++) { a[i] = ms[t, i]; b[i] = cpu[t, i]; c[i] = oth[t, i] }
      m[t] = median(a, n[t]); u[t] = median(b, n[t]); o[t] = median(c, n[t])
    }
    printf "medians: one thread %.0f ms (cpu %.2f s), two threads %.0f ms (cpu %.2f s)\n", m[1], u[1], m[2], u[2]
    printf "scaling %.2fx (bench time), CPU 2:1 %.2fx; rest of the machine %.2f / %.2f core-s per run (median)\n",
           m[1] / m[2], u[2] / u[1], o[1], o[2]
  }' "$tmp/runs"
