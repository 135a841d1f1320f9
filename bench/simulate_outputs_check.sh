#!/usr/bin/env bash
# Whether two eventsim binaries write byte-identical simulate outputs (a speed change must not move
# a number): the text summary, --json, --trace, --csv and --link-csv of a spread of configurations
# (DAPPLE at 128 and 2,048 GPUs, interleaved, ZB-H1/H2/V, DualPipeV and combined 1F1B with EP,
# ZeRO 1/3, FSDP, CP, DP overlap and the overlapped parameter gather, stragglers, jitter, link
# sharing off, every rank; a CP 8 ring across nodes: chains of in-task flows; Meta's layout: embedding
# and loss in chunks of their own, ZeRO-2 reduced at the step), and the text summary
# alone (its links from the totals). Prints one line per
# configuration and exits 1 on any difference.
#
#   bench/simulate_outputs_check.sh BASE_EVENTSIM NEW_EVENTSIM [WORKDIR]
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 BASE_EVENTSIM NEW_EVENTSIM [WORKDIR]" >&2
  exit 2
fi
BASE=$(realpath "$1") NEW=$(realpath "$2")
WORK=${3:-$(mktemp -d)}
mkdir -p "$WORK"
for bin in "$BASE" "$NEW"; do
  [[ -x $bin ]] || { echo "$0: $bin is not an executable" >&2; exit 2; }
done

G3="--model gpt3-175b --cluster dgx-a100 --micro-batch 1 --fallback analytic"
L70="--model llama3-70b --cluster dgx-h100 --micro-batch 1 --fallback analytic"
L8="--model llama3-8b --cluster dgx-h100 --micro-batch 1 --fallback analytic"
MOE="--model qwen3-30b-a3b --cluster dgx-h100 --micro-batch 1 --fallback analytic"
CONFIGS=(
  "dapple128|$G3 --strategy 8M16P1D --global-batch 64"
  "dapple2048|$G3 --strategy 8M16P16D --global-batch 1536"
  "dapple2048_ranks|$G3 --strategy 8M16P16D --global-batch 256 --ranks 0-15,1000-1007"
  "interleaved_v3|$G3 --strategy 8M16P2D --global-batch 64 --schedule interleaved --virtual-stages 3"
  "interleaved_group|$L70 --strategy 4M4P2D --global-batch 48 --schedule interleaved --virtual-stages 2 --microbatch-group-size 6"
  "dp_overlap|$G3 --strategy 8M8P4D --global-batch 128 --dp-overlap"
  "overlap_param_gather|$L70 --strategy 8M4P4D --global-batch 64 --zero 1 --dp-overlap --overlap-param-gather"
  "overlap_param_gather_v2|$L70 --strategy 8M4P4D --global-batch 64 --zero 1 --dp-overlap --overlap-param-gather --schedule interleaved --virtual-stages 2"
  "zbh1_zero1_straggler|$L8 --strategy 2M4P4D --global-batch 64 --schedule zbh1 --zero 1 --slow-ranks 3:1.2"
  "zbh2_zero3|$L8 --strategy 2M4P4D --global-batch 64 --schedule zbh2 --zero 3"
  "zbv_dp_overlap|$L8 --strategy 2M4P4D --global-batch 64 --schedule zbv --dp-overlap"
  "gpipe_jitter_nosharing|$L8 --strategy 2M4P2D --global-batch 32 --schedule gpipe --jitter 0.05 --iterations 3 --link-sharing off"
  "dualpipev_ep|$MOE --strategy 2M4P8D --sequence-parallel --global-batch 64 --schedule dualpipev --ep 8"
  "combined_1f1b_ep|$MOE --strategy 2M4P8D --sequence-parallel --global-batch 64 --schedule interleaved --virtual-stages 2 --ep 8 --overlap-moe-expert-parallel-comm"
  "cp_tp_overlap|$L70 --strategy 8M4P4D --global-batch 32 --cp 2 --sequence-parallel --tp-comm-overlap"
  "fsdp_pp|$L8 --strategy 1M4P8D --global-batch 64 --framework fsdp"
  "node_straggler_dp_overlap|$G3 --strategy 8M16P4D --global-batch 256 --dp-overlap --slow-ranks node5:1.1"
  "cp8_interleaved|$L70 --strategy 2M4P4D --global-batch 32 --cp 8 --schedule interleaved --virtual-stages 2"
  "loss_split_zero2_step|$G3 --strategy 8M7P2D --global-batch 28 --sequence-parallel --zero 2 --grad-reduce-sync step --schedule interleaved --virtual-stages 14 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
)

fail=0
for entry in "${CONFIGS[@]}"; do
  name=${entry%%|*} args=${entry#*|}
  for side in base new; do
    bin=$BASE
    [[ $side == new ]] && bin=$NEW
    dir=$WORK/$name.$side
    rm -rf "$dir" && mkdir -p "$dir"
    # Relative output names (the summary prints them); every simulated timeline once unless the
    # configuration names its ranks.
    ranks=(--ranks all)
    [[ $args == *--ranks* ]] && ranks=()
    # shellcheck disable=SC2086
    (cd "$dir" && "$bin" simulate $args "${ranks[@]}" --trace trace.json --csv timeline.csv \
      --link-csv links.csv >summary.txt 2>stderr.txt) || echo "exit $?" >>"$dir/stderr.txt"
    # --ranks chooses what --trace and --csv write: without them it is refused (session 31,
    # robust31), so the summaries' runs leave it out (it never changed them).
    summary_args=$(sed -E 's/ --ranks [^ ]+//' <<<"$args")
    # shellcheck disable=SC2086
    "$bin" simulate $summary_args --json >"$dir/summary.json" 2>>"$dir/stderr.txt" || echo "exit $?" >>"$dir/stderr.txt"
    # The text summary alone too: without --trace / --link-csv its links come from the totals
    # (link_usage.h's LinkDetail::kTotals), not the load segments.
    # shellcheck disable=SC2086
    "$bin" simulate $summary_args >"$dir/summary_plain.txt" 2>>"$dir/stderr.txt" || echo "exit $?" >>"$dir/stderr.txt"
  done
  verdict=identical
  for f in summary.txt summary.json summary_plain.txt trace.json timeline.csv links.csv stderr.txt; do
    a=$WORK/$name.base/$f b=$WORK/$name.new/$f
    if [[ -e $a || -e $b ]] && ! cmp -s "$a" "$b"; then verdict="DIFFERS ($f)" fail=1; break; fi
  done
  # Two binaries refusing a configuration alike compare nothing: a run that fails is a failure.
  if [[ $verdict == identical ]] && grep -q '^exit ' "$WORK/$name.new/stderr.txt"; then
    verdict="FAILS TO RUN" fail=1
  fi
  bytes=$(cat "$WORK/$name.new"/* 2>/dev/null | wc -c)
  [[ $verdict == identical ]] && rm -rf "$WORK/$name.base"  # keep a differing pair to look at
  printf '%-28s %-22s %12s bytes\n' "$name" "$verdict" "$bytes"
done
exit $fail
