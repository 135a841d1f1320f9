#!/usr/bin/env bash
# Whole-process cost of `eventsim simulate` as micro-batches and pipeline stages grow (issue 34,
# item 3), for one or more eventsim binaries side by side (e.g. an older commit's build and this
# tree's): user CPU seconds and peak RSS from /usr/bin/time, the minimum over REPS runs of each.
#
#   bench/simulate_scaling.sh build/eventsim [/path/to/other/eventsim ...]
#   REPS=5 bench/simulate_scaling.sh ...        (default 3)
#   MODE=callgrind bench/simulate_scaling.sh ... (instructions, whole process: load-independent)
#
# Micro-batch sweep: GPT-3 175B, 8M16P1D (128 GPUs), b = 1, B = m, DAPPLE, m = 1,536 .. 24,576;
# the cost per micro-batch is the slope between two of them (fixed costs cancel).
# Stage sweep: 8M{24,48,96}P1D (192, 384, 768 GPUs), m = 1,536: linear in stages means 2x per
# doubling of P (the task count, 2 m P, doubles) less the fixed cost.
# Alternates the binaries run by run, so that the machine's load hits them alike. Prints one row
# per (binary, case); quote the load average printed at the top and bottom with the figures.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 EVENTSIM [EVENTSIM ...]" >&2
  exit 2
fi
REPS=${REPS:-3}
MICRO_BATCHES=${MICRO_BATCHES:-"1536 6144 24576"}
STAGES=${STAGES:-"24 48 96"}
STAGE_M=${STAGE_M:-1536}
MODE=${MODE:-time}
TIME=/usr/bin/time
[[ -x $TIME ]] || { echo "$0: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
for bin in "$@"; do
  [[ -x $bin ]] || { echo "$0: $bin is not an executable" >&2; exit 2; }
done

echo "# load: $(cut -d' ' -f1-3 /proc/loadavg), reps $REPS (min of each)"

# run CASE_NAME PP M: prints "binary case user_s rss_kb" per binary.
run_case() {
  local name=$1 pp=$2 m=$3
  declare -A best_user best_rss
  for ((r = 0; r < REPS; ++r)); do
    for bin in "${BINS[@]}"; do
      local args=(simulate --model gpt3-175b --cluster dgx-a100 --strategy "8M${pp}P1D"
        --micro-batch 1 --global-batch "$m" --fallback analytic)
      local out user rss
      if [[ $MODE == callgrind ]]; then
        # Instructions (millions) in place of user seconds; RSS is valgrind's, left out (0).
        out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "${args[@]}" 2>&1 \
          >/dev/null | sed -n 's/.*Collected : //p')
        user=$(awk "BEGIN{printf \"%.3f\", $out / 1e6}") rss=0
      else
        out=$({ $TIME -f "%U %M" "$bin" "${args[@]}" >/dev/null; } 2>&1 | tail -1)
        user=${out% *} rss=${out#* }
      fi
      if [[ -z ${best_user[$bin]:-} ]] || awk "BEGIN{exit !($user < ${best_user[$bin]})}"; then
        best_user[$bin]=$user
      fi
      if [[ -z ${best_rss[$bin]:-} ]] || ((rss < best_rss[$bin])); then best_rss[$bin]=$rss; fi
    done
  done
  for bin in "${BINS[@]}"; do
    local unit=s
    [[ $MODE == callgrind ]] && unit=M
    printf '%-40s %-24s %9s %s %9s KB\n' "$bin" "$name" "${best_user[$bin]}" "$unit" \
      "${best_rss[$bin]}"
  done
}

BINS=("$@")
for m in $MICRO_BATCHES; do run_case "m=$m P=16 (128 GPUs)" 16 "$m"; done
for pp in $STAGES; do run_case "P=$pp m=$STAGE_M ($((8 * pp)) GPUs)" "$pp" "$STAGE_M"; done
echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
