#!/usr/bin/env bash
# Validation suite: how far is the modeler from a real run on this machine?
#  1. profile the events of every strategy on 2 and 4 GPUs of medium-gpt with eventprof (CPU
#     backend, 4 ranks as 2 emulated nodes of 2); the strategies with techniques below add their
#     own events (`eventsim events -o`, then `eventprof --events --resume`, which measures only
#     what the profile lacks);
#  2. for each strategy (1M2P1D, 2M1P1D, 1M1P2D on 2 ranks; 1M2P2D, 2M2P1D on 4 ranks; GPipe and
#     DAPPLE; plus 1M2P1D DAPPLE --recompute full, 1M2P1D interleaved --virtual-stages 2, 1M2P1D
#     zero-bubble ZB-H1 and 1M2P1D DAPPLE with the uneven split --stage-layers 1,3):
#     eventrun (measured timeline) and `eventsim simulate --profile` (predicted timeline), then
#     `eventsim compare` (iteration-time error, per-device activity error DistSim §5.3, stage
#     micro-batch start/finish error §5.4);
#  3. one table, and over the runs with at most one rank per core: the worst errors and whether
#     the predicted ranking is the measured one.
# Usage: scripts/validate.sh [--model M] [--iterations N] [--wait auto|spin|sleep] [--out DIR]
# Noise: eventprof and eventrun give each rank max(1, cores / ranks on the host) BLAS threads
# (kernels/cpu/cpu_host.h); eventprof times compute with data out of the caches, as inside an
# iteration; eventrun's --wait auto sleeps between MPI polls when a host runs more ranks than
# cores (see docs/VALIDATION.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=medium-gpt CLUSTER=cpu-local ITER=11 WAIT=auto OUT=out/validate
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --iterations) ITER=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "validate.sh: unknown argument $1 (see the header for usage)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SIM=build/eventsim PROF=build/profiler/eventprof RUN=build/runner/eventrun
for b in $SIM $PROF $RUN; do [ -x $b ] || { echo "validate.sh: $b not built" >&2; exit 2; }; done
mkdir -p "$OUT"
# Other work on the machine preempts the ranks and inflates measured events: say how loaded it was.
echo "== $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
BATCH="--micro-batch 2 --global-batch 8"
MPIRUN="mpirun --oversubscribe"
PROF_ARGS="--backend cpu --ranks-per-node 2 --warmup 5 --repeats 30"
# The runs: "xMyPzD schedule [technique flags]", each with $BATCH.
CASES=()
for strategy in 1M2P1D 2M1P1D 1M1P2D 1M2P2D 2M2P1D; do
  for schedule in gpipe dapple; do CASES+=("$strategy $schedule"); done
done
CASES+=("1M2P1D dapple --recompute full" "1M2P1D interleaved --virtual-stages 2")
# ZB-H1 and an uneven split run the plain events (the same op lists in another order or split).
CASES+=("1M2P1D zbh1" "1M2P1D dapple --stage-layers 1,3")
# Offload of the optimizer and the activations: on the CPU backend a copy to "host" memory is a
# memory copy, and eventrun runs the copies in order where the model overlaps them with the next
# layer (docs/TECHNIQUES.md), so this row shows what the overlap is worth, not a host link.
CASES+=("1M2P1D dapple --offload both")
gpusOf() {
  python3 -c "import re; m=re.fullmatch(r'(\d+)M(\d+)P(\d+)D','$1'); \
print(int(m[1])*int(m[2])*int(m[3]))"
}
# 1M2P1D dapple --recompute full -> 1M2P1D-dapple-rcfull; --virtual-stages 2 -> -v2;
# --stage-layers 1,3 -> -layers1,3.
tagOf() {
  sed 's/ --recompute /-rc/; s/ --virtual-stages /-v/; s/ --stage-layers /-layers/; s/ --/-/g; s/ /-/g' <<<"$1"
}

for gpus in 2 4; do
  echo "== eventprof: every strategy of $MODEL on $gpus GPUs ($CLUSTER, 4 ranks, CPU backend)"
  $MPIRUN -np 4 $PROF --model $MODEL --cluster $CLUSTER --gpus $gpus --global-batch 8 \
    --micro-batches 2 $PROF_ARGS -o "$OUT/profile-$gpus.yaml" 2>&1 | tail -n 1
done
# The --gpus union covers plain GPipe/DAPPLE strategies only: add each technique run's events.
for c in "${CASES[@]}"; do
  read -r strategy schedule flags <<<"$c"
  [ -n "$flags" ] || [ "$schedule" = interleaved ] || continue
  tag=$(tagOf "$c")
  echo "== eventprof --resume: events of $tag"
  $SIM events --model $MODEL --cluster $CLUSTER --strategy $strategy $BATCH --schedule $schedule \
    $flags -o "$OUT/events-$tag.yaml" >/dev/null
  $MPIRUN -np 4 $PROF --events "$OUT/events-$tag.yaml" $PROF_ARGS --resume \
    -o "$OUT/profile-$(gpusOf $strategy).yaml" 2>&1 | tail -n 1
done

echo "== eventrun + simulate per strategy"
for c in "${CASES[@]}"; do
  read -r strategy schedule flags <<<"$c"
  gpus=$(gpusOf $strategy)
  ARGS="--model $MODEL --cluster $CLUSTER --strategy $strategy $BATCH --schedule $schedule $flags"
  tag=$(tagOf "$c")
  $MPIRUN -np $gpus $RUN $ARGS --iterations $ITER --wait $WAIT --ranks-per-node 2 \
    --csv "$OUT/$tag-measured.csv" --trace "$OUT/$tag-measured.json" | tee "$OUT/$tag-run.txt"
  $SIM simulate $ARGS --profile "$OUT/profile-$gpus.yaml" --csv "$OUT/$tag-predicted.csv" \
    --trace "$OUT/$tag-predicted.json" >/dev/null
  $SIM compare --predicted "$OUT/$tag-predicted.csv" --measured "$OUT/$tag-measured.csv" \
    --label "$tag" --json > "$OUT/$tag-compare.json"
done

echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The targets apply to runs with at most one rank per core: with more ranks than cores, ranks
# time-share cores and the run is not one of M*P*D devices (docs/VALIDATION.md). The ranking is
# checked over those runs, with one `eventsim compare` over all their pairs.
CORES=$(nproc)
PAIRS=()
TABLE_ARGS=()
FIT_TAGS=()
for c in "${CASES[@]}"; do
  read -r strategy schedule flags <<<"$c"
  tag=$(tagOf "$c")
  TABLE_ARGS+=("$tag:$(gpusOf $strategy)")
  if [ "$(gpusOf $strategy)" -le "$CORES" ]; then
    PAIRS+=(--predicted "$OUT/$tag-predicted.csv" --measured "$OUT/$tag-measured.csv" --label "$tag")
    FIT_TAGS+=("$tag:$(gpusOf $strategy)")
  fi
done
# Strategies closer than the measurement's own run-to-run spread cannot be ordered by it: the tie
# tolerance is the median, over these runs, of (max - min) / median of their iteration times.
TIE=$(python3 - "$OUT" "${FIT_TAGS[@]}" <<'PY'
import re, statistics, sys
out, cases = sys.argv[1], sys.argv[2:]
spreads = []
for case in cases:
    tag = case.rsplit(":", 1)[0]
    m = re.search(r"iteration ([0-9.]+) ms \(median of \d+, min ([0-9.]+), max ([0-9.]+)\)",
                  open(f"{out}/{tag}-run.txt").read())
    spreads.append(100 * (float(m[3]) - float(m[2])) / float(m[1]))
print(f"{statistics.median(spreads):.2f}")
PY
)
echo "== ranking: iteration times within $TIE% (the runs' median spread) count as ties"
$SIM compare "${PAIRS[@]}" --tie-pct "$TIE" --json > "$OUT/ranking.json"
$SIM compare "${PAIRS[@]}" --json > "$OUT/ranking-strict.json"
python3 - "$OUT" "$CORES" "${TABLE_ARGS[@]}" <<'PY'
import json, os, sys
out, cores, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print()
print("| strategy | ranks | measured ms | predicted ms | iteration error | device activity error (worst rank) | stage start / finish error (max) |")
print("|---|---:|---:|---:|---:|---:|---:|")
fits = []
for case in cases:
    tag, ranks = case.rsplit(":", 1)
    j = json.load(open(os.path.join(out, tag + "-compare.json")))
    note = "" if int(ranks) <= cores else " (more ranks than cores)"
    print(f"| {tag}{note} | {ranks} | {j['measured_iteration_ms']:.2f} | "
          f"{j['predicted_iteration_ms']:.2f} | {j['iteration_time_error_pct']:+.1f}% | "
          f"{j['device_activity_error_pct_max']:.1f}% ({j['device_activity_error_pct_max_rank']}) | "
          f"{j['stage_start_error_pct_max']:.1f}% / {j['stage_finish_error_pct_max']:.1f}% |")
    if int(ranks) <= cores:
        fits.append(j)
r = json.load(open(os.path.join(out, "ranking.json")))
strict = json.load(open(os.path.join(out, "ranking-strict.json")))
print()
print(f"runs with ranks <= {cores} cores: {len(fits)}; max |iteration error| "
      f"{max(abs(j['iteration_time_error_pct']) for j in fits):.1f}%, max device activity error "
      f"{max(j['device_activity_error_pct_max'] for j in fits):.1f}%; ranking "
      f"{'preserved' if r['ranking_preserved'] else 'NOT preserved'} (Kendall tau {r['kendall_tau']:.2f}) "
      f"counting measured times within the tolerance as ties; strictly "
      f"{'preserved' if strict['ranking_preserved'] else 'NOT preserved'} "
      f"(Kendall tau {strict['kendall_tau']:.2f})")
print("measured order:  " + " < ".join(r["measured_ranking"]))
print("predicted order: " + " < ".join(r["predicted_ranking"]))
PY
