#!/bin/bash
# Where a search's CPU grows at two threads (issue 34 item 2): RUNS runs of a search bench at one
# and at two threads under `perf record -e cpu-clock` (a software event: works on VMs without
# hardware counters), the samples of each symbol summed over the runs, and the symbols whose
# samples grew most. Instructions barely grow at two threads (callgrind: 1.003x for Llama 3 70B on
# 1,024 GPUs), so a symbol that grows is CPU per instruction: a contended lock (futex frames in the
# kernel, glibc's __lll_lock_*), atomics, or cache lines the threads share. Results:
# bench/RESULTS.md, session 28, share28.
#
#   bench/thread_profile.sh [BENCH] [RUNS] [BIN] [TOP]
#     BENCH  default BM_Llama70b_Every_Pruned/T/1024/ (T is replaced by 1 and 2)
#     RUNS   default 3
#     BIN    default build/bench/search_bench
#     TOP    symbols listed, default 30
#   PRIORITY=1: each run in an autogroup of its own at nice -20, as bench/thread_scaling.sh.
# Run from the repository root (the benches read configs/ relative to it).
set -euo pipefail

BENCH=${1:-BM_Llama70b_Every_Pruned/T/1024/}
RUNS=${2:-3}
BIN=${3:-build/bench/search_bench}
TOP=${4:-30}
[[ -x $BIN ]] || { echo "thread_profile.sh: no executable $BIN (build it first)" >&2; exit 2; }
[[ $BENCH == */T/* ]] || { echo "thread_profile.sh: BENCH must contain /T/ for the thread count" >&2; exit 2; }
command -v perf >/dev/null || { echo "thread_profile.sh: perf not found (linux-perf)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=()
if [[ ${PRIORITY:-0} == 1 ]]; then
  prefix=(setsid bash -c 'echo -20 >/proc/self/autogroup && exec nice -n -20 "$@"' priority)
fi

for ((r = 1; r <= RUNS; r++)); do
  for t in 1 2; do
    "${prefix[@]}" perf record -q -e cpu-clock -F 4000 -o "$tmp/t$t.r$r.data" \
      "$BIN" --benchmark_filter="${BENCH//\/T\//\/$t\/}" --benchmark_min_time=0.0001 >/dev/null 2>&1
    perf report -i "$tmp/t$t.r$r.data" --sort sym -F sample,sym --stdio 2>/dev/null >"$tmp/t$t.r$r.txt"
  done
done

python3 - "$tmp" "$RUNS" "$TOP" "$BENCH" <<'EOF'
import collections, re, sys
tmp, runs, top, bench = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(t):
    samples = collections.Counter()
    for r in range(1, runs + 1):
        for line in open(f"{tmp}/t{t}.r{r}.txt"):
            m = re.match(r"\s*(\d+)\s+\[(.)\]\s+(.*)", line)
            if not m:
                continue
            name = re.sub(r"\(.*", "", m.group(3).strip())[:80]  # templates' argument lists off
            samples[("[k] " if m.group(2) == "k" else "") + name] += int(m.group(1))
    return samples
one, two = load(1), load(2)
kernel = lambda s: sum(v for k, v in s.items() if k.startswith("[k] "))
print(f"{bench}, {runs} runs each, cpu-clock samples at 4 kHz")
print(f"total: one thread {sum(one.values())}, two threads {sum(two.values())} "
      f"({sum(two.values()) / max(1, sum(one.values())):.2f}x); kernel {kernel(one)} -> {kernel(two)}")
print(f"{'one':>7} {'two':>7} {'growth':>7}  symbol")
for name in sorted(set(one) | set(two), key=lambda k: -(two[k] - one[k]))[:top]:
    print(f"{one[name]:7d} {two[name]:7d} {two[name] - one[name]:+7d}  {name}")
EOF
