#!/usr/bin/env bash
# Fits the H100 device file's kernel parameters to kernels measured on an H100 (scripts/gpu/
# run_all.sh: torchsweep/torchops and sweep; kept in configs/devices/measurements/h100-sxm5-80gb/),
# every third kernel held out, and writes the per-kernel predictions beside the measurements.
#   - The device file is fitted to PyTorch's kernels (cuBLAS GEMMs through PyTorch, PyTorch's
#     memory-bound ops forward and backward): a framework's kernels, which is what a prediction
#     without a profile stands in for.
#   - The same fit to eventsim's own kernels (eventprof's cuBLAS GEMMs and kernels/cuda's
#     memory-bound ops, timed with CUPTI) is printed for comparison and not installed.
# The host issue time and collective curves of the device file are kept (not kernel properties).
# Runs here, no GPU needed: scripts/gpu/fit_h100.sh [path to eventsim, default build/eventsim]
set -euo pipefail
cd "$(dirname "$0")/../.."
eventsim="${1:-build/eventsim}"
m=configs/devices/measurements/h100-sxm5-80gb
out=configs/devices/h100-sxm5-80gb.yaml
python3 scripts/gpu/torch_to_profile.py "$m" "$m/torch_kernels_profile.yaml"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "== eventsim's own kernels (not installed) =="
"$eventsim" calibrate --cluster dgx-h100 --kernels "$m/cublas_sweep_profile.yaml" \
  --hold-out-every 3 -o "$tmp" --predictions "$m/kernel_fit_predictions_eventsim_kernels.csv" \
  | grep -v '^device file'
echo "== PyTorch's kernels -> $out =="
"$eventsim" calibrate --cluster dgx-h100 --kernels "$m/torch_kernels_profile.yaml" \
  --hold-out-every 3 -o "$tmp" --predictions "$m/kernel_fit_predictions.csv" \
  | grep -v '^device file'
{
  sed -n '1,2p' "$tmp"
  echo 'description: "Datasheet figures; kernel parameters fitted to PyTorch kernels measured on an H100 (scripts/gpu/fit_h100.sh, docs/VALIDATION.md); the host issue time is the A100 fit'"'"'s framework time (a property of the software, not the GPU). No NVLink 4 collective curves yet: collectives use the cluster'"'"'s links (alpha-beta). FP8 (1979 TFLOP/s dense) is listed once eventsim has the dtype."'
  sed -n '3,$p' "$tmp"
} >"$out"
echo "wrote $out"
# The H200 is the same GH100 die with more and faster memory: it takes the H100's kernel
# parameters, marked assumed, with its own datasheet (its memory-bound ops scale with its bandwidth).
python3 - "$out" configs/devices/h200-sxm-141gb.yaml <<'PY'
import re, sys
h100, h200 = open(sys.argv[1]).read(), open(sys.argv[2]).read()
head = h200[:h200.index("model:\n")]
model = h100[h100.index("model:\n"):]
assumed = ("assumed: the H100 kernel fit (same GH100 die; scripts/gpu/fit_h100.sh), until the H200 "
           "is measured")
model = re.sub(r'source: "measured: [^"]*"', f'source: "{assumed}"', model)
open(sys.argv[2], "w").write(head + model)
PY
echo "wrote configs/devices/h200-sxm-141gb.yaml"
