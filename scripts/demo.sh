#!/usr/bin/env bash
# The main job on bundled examples (after scripts/setup.sh):
#  1. profile the events of a small GPT on this machine's CPU with 4 MPI ranks as 2 emulated
#     nodes x 2 "GPUs" (eventprof, CPU backend) and simulate that strategy from the measurements;
#  2. BERT-Large on the 4 x 4 A40 cluster, strategy 2M2P4D: unique events, then the simulated
#     iteration from the analytic device model, with a Chrome trace to open in Perfetto.
# Outputs go to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SIM=build/eventsim
PROF=build/profiler/eventprof

echo "== 1. eventprof (CPU backend, 4 ranks) + simulate: tiny-gpt 2M2P1D on cpu-local"
TINY="--model tiny-gpt --cluster cpu-local --strategy 2M2P1D --micro-batch 2 --global-batch 8"
if [ -x "$PROF" ]; then
  mpirun --oversubscribe -np 4 "$PROF" $TINY --backend cpu --ranks-per-node 2 --warmup 2 --repeats 5 -o out/tiny-profile.yaml
  $SIM simulate $TINY --schedule dapple --profile out/tiny-profile.yaml --trace out/tiny-trace.json
else
  echo "(eventprof not built; skipping)"
fi

echo
echo "== 2. bert-large 2M2P4D on a40-4x4: events, then simulate (analytic estimates)"
BERT="--model bert-large --cluster a40-4x4 --strategy 2M2P4D --micro-batch 4 --global-batch 64"
$SIM events $BERT | tail -n 3
$SIM simulate $BERT --schedule dapple --fallback analytic \
  --trace out/bert-2M2P4D-trace.json --csv out/bert-2M2P4D.csv
echo
echo "Open out/*-trace.json in https://ui.perfetto.dev (or chrome://tracing)."
