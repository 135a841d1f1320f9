#!/usr/bin/env bash
# eventrun end to end on 2 ranks (CPU backend): tiny-gpt 1M2P1D on cpu-local (DAPPLE, or the
# schedule/technique flags given after OUT_DIR), then scripts/check_timeline.py against the
# simulator's CSV of the same strategy (the expected key set), with the clock residual eventrun
# reports as tolerance. eventrun limits each rank's BLAS threads itself (cpuThreadsPerRank).
#   eventrun_e2e.sh MPIEXEC EVENTRUN EVENTSIM CHECKER OUT_DIR [--schedule ... --recompute ...]
# EVENTRUN_MODEL names another bundled model (default tiny-gpt), EVENTRUN_STRATEGY another
# 2-rank strategy (default 1M2P1D; e.g. 1M1P2D with --ep 2, or 1M1P1D with --cp 2).
set -euo pipefail
mpiexec=$1 eventrun=$2 eventsim=$3 checker=$4 out=$5
shift 5
mkdir -p "$out"
extra=("$@")
[ ${#extra[@]} -gt 0 ] || extra=(--schedule dapple)
args=(--model "${EVENTRUN_MODEL:-tiny-gpt}" --cluster cpu-local --strategy "${EVENTRUN_STRATEGY:-1M2P1D}"
      --micro-batch 2 --global-batch 8
      "${extra[@]}")
summary=$("$mpiexec" -n 2 --oversubscribe "$eventrun" "${args[@]}" --iterations 3 \
  --trace "$out/measured.json" --csv "$out/measured.csv")
echo "$summary"
residual=$(sed -n 's/.*residual <= \([0-9.]*\) us.*/\1/p' <<<"$summary")
[ -n "$residual" ] || { echo "no clock residual in the summary line"; exit 1; }
"$eventsim" simulate "${args[@]}" --fallback analytic --csv "$out/simulated.csv" >/dev/null
python3 "$checker" --measured "$out/measured.csv" --expected "$out/simulated.csv" \
  --tolerance-us "$residual"
# Both outputs carry the simulator's header and the trace is valid JSON with one process per rank.
cmp <(head -1 "$out/measured.csv") <(head -1 "$out/simulated.csv")
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['traceEvents']; \
pids={e['pid'] for e in t if e['ph']=='X'}; assert pids=={0,1}, pids" "$out/measured.json"
