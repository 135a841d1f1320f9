#!/usr/bin/env bash
# Fits the H100 device file's kernel parameters to the cuBLAS and memory-bound sweep measured on
# an H100 (scripts/gpu/run_all.sh OUT sweep; kept in configs/devices/measurements/h100-sxm5-80gb/),
# every third kernel held out, and writes the per-kernel predictions beside the measurements.
# The host issue time and collective curves of the device file are kept (not kernel properties).
# Runs here, no GPU needed: scripts/gpu/fit_h100.sh [path to eventsim, default build/eventsim]
set -euo pipefail
cd "$(dirname "$0")/../.."
eventsim="${1:-build/eventsim}"
m=configs/devices/measurements/h100-sxm5-80gb
out=configs/devices/h100-sxm5-80gb.yaml
tmp=$(mktemp)
"$eventsim" calibrate --cluster dgx-h100 --kernels "$m/cublas_sweep_profile.yaml" \
  --hold-out-every 3 -o "$tmp" --predictions "$m/kernel_fit_predictions.csv"
{
  sed -n '1,2p' "$tmp"
  echo 'description: "Datasheet figures; kernel parameters fitted to an H100 sweep (scripts/gpu/fit_h100.sh, docs/VALIDATION.md); the host issue time is the A100 fit'"'"'s framework time (a property of the software, not the GPU). No NVLink 4 collective curves yet: collectives use the cluster'"'"'s links (alpha-beta). FP8 (1979 TFLOP/s dense) is listed once eventsim has the dtype."'
  sed -n '3,$p' "$tmp"
} >"$out"
rm -f "$tmp"
echo "wrote $out"
