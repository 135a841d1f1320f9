#!/usr/bin/env bash
# Predictions against published large runs that are not in ../shared/calibration (no profile: the
# calibrated H100 device model only). Prints one row per configuration: predicted model TFLOP/s per
# GPU and MFU against the reported ones, and the error. Usage: scripts/validate_public_runs.sh
#
# Llama 3.1 405B pre-training (Dubey et al., "The Llama 3 Herd of Models", 2024, Table 4): H100
# 80GB, BF16, seq 8192, 16M tokens per batch (2048 sequences), TP 8, CP 1, PP 16, micro-batch 1;
# 8,192 GPUs (DP 64): 430 TFLOPs/GPU, 43% BF16 MFU; 16,384 GPUs (DP 128): 400 TFLOPs/GPU, 41%.
# The paper's schedule is Megatron's interleaved 1F1B with its own changes (micro-batch counts
# not a multiple of the stages, balanced first and last stages): eventsim has neither, so both of
# its nearest schedules are shown. Data parallelism as the paper describes it (section 3.3.2): FSDP
# sharding the optimizer state and the gradients, parameters not resharded after the forward
# (ZeRO-2 in Megatron's terms: `--zero 2`), outermost "because it can tolerate longer network
# latency by asynchronously prefetching sharded model weights and reducing gradients": each
# micro-batch's reductions queued and waited for only at the step (`--grad-reduce-sync step`).
set -euo pipefail
cd "$(dirname "$0")/.."
eventsim=${EVENTSIM:-build/eventsim}
printf '%-14s %6s  %-16s %10s %7s %10s %7s %8s\n' model GPUs schedule "pred TF/s" "MFU %" \
  "rep TF/s" "MFU %" "error %"
run() {  # run GPUS REPORTED_TFLOPS REPORTED_MFU SCHEDULE_FLAGS...
  local gpus=$1 reported=$2 reported_mfu=$3
  shift 3
  "$eventsim" simulate --model llama3.1-405b --cluster dgx-h100 --tp 8 --pp 16 --gpus "$gpus" \
    --micro-batch 1 --global-batch 2048 --sequence-parallel --zero 2 \
    --overlap-grad-reduce --grad-reduce-sync step --fallback analytic "$@" --json |
    python3 -c "
import json, sys
d = json.load(sys.stdin)
t, m = d['model_tflops_per_gpu'], 100 * d['mfu']
rep, rep_mfu = float(sys.argv[1]), float(sys.argv[2])
print('%-14s %6d  %-16s %10.1f %7.1f %10.1f %7.1f %+8.1f' % ('llama3.1-405b', d['devices']['count'],
      sys.argv[3].replace('--schedule ', '').replace(' --virtual-stages ', ' v'), t, m, rep, rep_mfu,
      100 * (t - rep) / rep))" "$reported" "$reported_mfu" "$*"
}
for sched in "--schedule dapple" "--schedule interleaved --virtual-stages 2"; do
  # shellcheck disable=SC2086
  run 8192 430 43 $sched
  # shellcheck disable=SC2086
  run 16384 400 41 $sched
done
