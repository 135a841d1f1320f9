#!/usr/bin/env bash
# Validation suite: how far is the modeler from a real run on this machine?
#  1. profile the events of every strategy on 2 and 4 GPUs of a small GPT with eventprof (CPU
#     backend, 4 ranks as 2 emulated nodes of 2);
#     the strategies with techniques below add their own events (`eventsim events -o`, then
#     `eventprof --events --resume`, which measures only what the profile lacks);
#  2. for each strategy (1M2P1D, 2M1P1D, 1M1P2D on 2 ranks; 1M2P2D, 2M2P1D on 4 ranks; GPipe and
#     DAPPLE; plus 1M2P1D DAPPLE --recompute full and 1M2P1D interleaved --virtual-stages 2):
#     eventrun (measured timeline) and `eventsim simulate --profile` (predicted timeline);
#  3. one table of errors: iteration time (max(start+dur) - min(start) per CSV), per-device activity
#     error (mean |start diff| and |end diff| of matched events as % of the measured iteration,
#     DistSim §5.3; worst device), and whether the predicted ranking matches the measured one.
#     With `eventsim compare` built (branch compare), its --json figures are printed too.
# Usage: scripts/validate.sh [--model M] [--iterations N] [--wait auto|spin|sleep] [--out DIR]
# Noise: eventprof and eventrun give each rank max(1, cores / ranks on the host) BLAS threads
# (kernels/cpu/cpu_threads.h), and eventrun's --wait auto sleeps between MPI polls when a host
# runs more ranks than cores (see docs/VALIDATION.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=small-gpt CLUSTER=cpu-local ITER=7 WAIT=auto OUT=out/validate
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
SIM=build/eventsim PROF=build/profiler/eventprof RUN=build/profiler/eventrun
for b in $SIM $PROF $RUN; do [ -x $b ] || { echo "validate.sh: $b not built" >&2; exit 2; }; done
mkdir -p "$OUT"
# Other work on the machine preempts the ranks and inflates measured events: say how loaded it was.
echo "== $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
BATCH="--micro-batch 2 --global-batch 8"
MPIRUN="mpirun --oversubscribe"
PROF_ARGS="--backend cpu --ranks-per-node 2 --warmup 3 --repeats 15"
# The runs: "xMyPzD schedule [technique flags]", each with $BATCH.
CASES=()
for strategy in 1M2P1D 2M1P1D 1M1P2D 1M2P2D 2M2P1D; do
  for schedule in gpipe dapple; do CASES+=("$strategy $schedule"); done
done
CASES+=("1M2P1D dapple --recompute full" "1M2P1D interleaved --virtual-stages 2")
gpusOf() {
  python3 -c "import re; m=re.fullmatch(r'(\d+)M(\d+)P(\d+)D','$1'); \
print(int(m[1])*int(m[2])*int(m[3]))"
}
# 1M2P1D dapple --recompute full -> 1M2P1D-dapple-rcfull; --virtual-stages 2 -> -v2.
tagOf() { sed 's/ --recompute /-rc/; s/ --virtual-stages /-v/; s/ --/-/g; s/ /-/g' <<<"$1"; }

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

has_compare=0
$SIM --help 2>/dev/null | grep -qE "^ +compare" && has_compare=1
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
  # A compare failure (e.g. a CSV reader that does not know a phase yet) must not stop the suite.
  if [ $has_compare = 1 ] && ! $SIM compare --predicted "$OUT/$tag-predicted.csv" \
      --measured "$OUT/$tag-measured.csv" --json > "$OUT/$tag-compare.json" 2>"$OUT/$tag-compare.err"; then
    echo "validate.sh: eventsim compare failed for $tag: $(head -n 1 "$OUT/$tag-compare.err")" >&2
    rm -f "$OUT/$tag-compare.json"
  fi
done

echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" <<'PY'
import collections, csv, json, os, sys
out = sys.argv[1]

def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))

def iteration(rows):
    return max(float(r["start_us"]) + float(r["dur_us"]) for r in rows) - \
        min(float(r["start_us"]) for r in rows)

def keyed(rows):
    seen, out = collections.Counter(), {}
    for r in rows:
        k = (r["rank"], r["stream"], r["phase"], r["micro_batch"], r["layer"], r["op"])
        seen[k] += 1
        out[k + (seen[k],)] = (float(r["start_us"]), float(r["start_us"]) + float(r["dur_us"]))
    return out

rows = []
for name in sorted(os.listdir(out)):
    if not name.endswith("-measured.csv"):
        continue
    tag = name[: -len("-measured.csv")]
    meas, pred = load(os.path.join(out, name)), load(os.path.join(out, tag + "-predicted.csv"))
    t_m, t_p = iteration(meas), iteration(pred)
    km, kp = keyed(meas), keyed(pred)
    per_rank = collections.defaultdict(list)
    for k, (s, e) in km.items():
        if k in kp:
            ps, pe = kp[k]
            per_rank[k[0]].append((abs(ps - s) + abs(pe - e)) / 2)
    worst_rank, worst = max(((r, sum(v) / len(v) / t_m * 100) for r, v in per_rank.items()),
                            key=lambda x: x[1])
    cmp_path = os.path.join(out, tag + "-compare.json")
    extra = ""
    if os.path.exists(cmp_path):
        j = json.load(open(cmp_path))
        extra = " compare: iter {:+.1f}% act {:.1f}%".format(
            j.get("iteration_time_error_pct", float("nan")),
            j.get("device_activity_error_pct_max", float("nan")))
    rows.append((tag, t_m / 1000, t_p / 1000, (t_p - t_m) / t_m * 100, worst, worst_rank,
                 len(km) == len(kp) == sum(len(v) for v in per_rank.values()), extra))

print()
print("| strategy | measured ms | predicted ms | iteration error | device activity error (worst) | events matched |")
print("|---|---:|---:|---:|---:|---|")
for tag, m, p, err, act, rank, ok, extra in rows:
    print(f"| {tag} | {m:.2f} | {p:.2f} | {err:+.1f}% | {act:.1f}% (rank {rank}) | {'all' if ok else 'NO'} |{extra}")
mean_abs = sum(abs(r[3]) for r in rows) / len(rows)
print(f"\nmean |iteration error| {mean_abs:.1f}%, max {max(abs(r[3]) for r in rows):.1f}%;"
      f" worst device activity error {max(r[4] for r in rows):.1f}%")
by_measured = [r[0] for r in sorted(rows, key=lambda r: r[1])]
by_predicted = [r[0] for r in sorted(rows, key=lambda r: r[2])]
agree = sum(1 for i in range(len(rows)) for j in range(i + 1, len(rows))
            if (rows[i][1] - rows[j][1]) * (rows[i][2] - rows[j][2]) > 0)
pairs = len(rows) * (len(rows) - 1) // 2
print(f"ranking: {'preserved' if by_measured == by_predicted else 'NOT preserved'} "
      f"({agree}/{pairs} pairs ordered alike); measured order: {' < '.join(by_measured)}")
PY
