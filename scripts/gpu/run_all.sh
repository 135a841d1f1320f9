#!/usr/bin/env bash
# On a machine with one NVIDIA GPU: every measurement of issues 18 and 19, each step under its own
# time limit so one failure costs only its step. Results go to WORK (logs, profiles, CSVs, JSON);
# after every step WORK is packed into OUT/results.tgz, so a run stopped midway still returns what
# it measured. Needs gpu-bundle.tar.xz (scripts/gpu/bundle.sh, built on any machine with the CUDA
# toolkit) and a python3 with PyTorch and PyYAML.
#   scripts/gpu/run_all.sh OUT [STEP ...]
# Steps (default: all, in this order): info tests profile eventrun torchstep torchcompiled sweep
# torchsweep (torchops: only the sweep's memory-bound ops, forward and backward)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: run_all.sh OUT [STEP ...]}"
shift
steps="${*:-info tests profile eventrun torchstep torchcompiled sweep torchsweep}"
work="$out/work"
mkdir -p "$work"
cd "$root"
# shellcheck source=/dev/null
source scripts/gpu/env.sh || exit 2
# The gpu tests read configs at the source path they were built from (EVSIM_CONFIG_DIR).
build_root=$(cat gpu-bundle/BUILD_ROOT)
if [ ! -e "$build_root/configs" ]; then mkdir -p "$(dirname "$build_root")" && ln -sfn "$root" "$build_root"; fi

# name micro-batch global-batch: the three models of issue 18 (bf16 copies in scripts/gpu/models)
models=("tiny-gpt-bf16 2 8" "medium-gpt-bf16 8 32" "gpt2-345m-bf16 4 16")
pack() { tar -czf "$out/results.tgz" -C "$work" . 2>/dev/null; }
step() {  # step NAME SECONDS COMMAND...: runs it with a limit, logs to WORK/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$work/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$work/steps.txt"
  pack
}
has() { [[ " $steps " == *" $1 "* ]]; }

if has info; then
  step info 60 bash -c 'nvidia-smi; nvidia-smi -q | grep -iE "product name|driver version|cuda version|clocks|power limit" | head -30;
    nvcc --version | tail -2; python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_properties(0))";
    echo LD_LIBRARY_PATH=$LD_LIBRARY_PATH; ldd gpu-bundle/bin/eventprof | grep -E "not found|cuda|cublas|nccl|cupti"'
fi
if has tests; then
  step test_kernels_cuda 180 kernels_cuda_test
  step test_profiler_cuda 120 profiler_cuda_test
  step test_eventrun_cuda 120 eventrun_cuda_test
  # The two gpu-labelled ctest commands (tests/profiler/CMakeLists.txt): two ranks on one GPU must
  # stop with exit code 2 and name the shortage.
  step test_e2e_cuda_ranks_over_gpus 60 bash -c 'mpirun -np 2 --oversubscribe eventprof --backend cuda \
      --ranks-per-node 2 --model scripts/gpu/models/tiny-gpt-bf16.yaml --cluster dgx-h100 \
      --strategy 1M2P1D --micro-batch 2 --global-batch 8 -o /tmp/unused.yaml 2>&1 | tee /dev/stderr \
      | grep -q "more ranks than GPUs"'
  step test_eventrun_cuda_backend_check 60 bash -c 'mpirun -np 2 --oversubscribe eventrun \
      --model tiny-gpt --cluster cpu-local --micro-batch 2 --global-batch 8 --strategy 1M2P1D \
      --backend cuda --csv /tmp/unused.csv 2>&1 | tee /dev/stderr | grep -qE "more ranks than GPUs|backend cuda, device"'
fi
for entry in "${models[@]}"; do
  read -r m mb gb <<<"$entry"
  common=(--model "scripts/gpu/models/$m.yaml" --cluster dgx-h100 --strategy 1M1P1D
          --micro-batch "$mb" --global-batch "$gb")
  if has profile; then
    step "eventprof_$m" 240 mpirun -np 1 eventprof --backend cuda "${common[@]}" \
      -o "$work/profile_$m.yaml"
    step "eventprof_events_$m" 240 mpirun -np 1 eventprof --backend cuda "${common[@]}" \
      --compute-timer cuda-events -o "$work/profile_cudaevents_$m.yaml"
  fi
  if has eventrun; then
    step "eventrun_$m" 240 mpirun -np 1 eventrun --backend cuda "${common[@]}" --iterations 6 \
      --csv "$work/eventrun_$m.csv"
  fi
  if has torchstep; then
    step "torchstep_$m" 240 python3 scripts/gpu/torch_step.py "scripts/gpu/models/$m.yaml" \
      --micro-batch "$mb" --global-batch "$gb"
  fi
  if has torchcompiled; then
    step "torchcompiled_$m" 400 python3 scripts/gpu/torch_step.py "scripts/gpu/models/$m.yaml" \
      --micro-batch "$mb" --global-batch "$gb" --compile --kernel-table "$work/torch_kernels_compiled_$m.txt"
  fi
done
if has sweep; then
  python3 scripts/gpu/sweep_shapes.py events "$work/sweep_events.yaml"
  step eventprof_sweep 420 mpirun -np 1 eventprof --backend cuda --events "$work/sweep_events.yaml" \
    --warmup 3 --repeats 10 -o "$work/profile_sweep.yaml"
fi
if has torchsweep; then
  step torch_sweep 420 env PYTHONUNBUFFERED=1 python3 scripts/gpu/torch_sweep.py "$work"
elif has torchops; then
  step torch_ops 300 env PYTHONUNBUFFERED=1 python3 scripts/gpu/torch_sweep.py "$work" --only ops
fi
cat "$work/steps.txt"
