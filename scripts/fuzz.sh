#!/usr/bin/env bash
# Fuzzes every loader with libFuzzer under ASan + UBSan (issue 17, item 7).
#   scripts/fuzz.sh [SECONDS per target, default 10] [RUNS per target: stop after that many instead]
#                   [TARGET...: default all eleven]
# Builds build-fuzz/ with clang (-DEVSIM_FUZZ=ON), seeds each target's corpus from configs/ and
# tests/data (corpora kept in build-fuzz/corpus/, so runs accumulate), runs each target and prints
# one line per target: executions, corpus size, findings. Exit code 1 when any target found a
# crash (its reproducer is in build-fuzz/findings/). EVSIM_FUZZ_BUILD names another build folder
# (the CI smoke, ctest fuzz.libfuzzer_smoke, uses its own); EVSIM_FUZZ_JOBS the build's jobs;
# EVSIM_FUZZ_BUILD_ONLY=1 stops after the build (ctest fuzz.libfuzzer_build).
# Every build also runs a mutation smoke of the same loaders without clang (fuzz.mutation_smoke.*).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
runs="${2:-}"
shift $(($# < 2 ? $# : 2))
build="${EVSIM_FUZZ_BUILD:-build-fuzz}"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEVSIM_FUZZ=ON -DEVSIM_BUILD_TESTS=OFF -DEVSIM_BUILD_BENCH=OFF -DEVSIM_BACKEND=cpu >/dev/null
targets=(model cluster device profile events runs_csv nccl_log signature profile_size nccl_header
  profile_cbor)
[ $# -gt 0 ] && targets=("$@")
cmake --build "$build" -j "${EVSIM_FUZZ_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}" >/dev/null
[ "${EVSIM_FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
seed() {  # seed TARGET FILES...: copy seeds into the target's corpus
  local dir="$build/corpus/$1"
  shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/" 2>/dev/null || true; done
}
seed model configs/models/*.yaml scripts/gpu/models/*.yaml tests/data/models/*.yaml
seed cluster configs/clusters/*.yaml tests/data/clusters/*.yaml
seed device configs/devices/*.yaml tests/data/devices/*.yaml
seed profile tests/data/profiles/*.yaml docs/gpu-runs/2026-11-23-h100/profile_tiny-gpt-bf16.yaml
seed events tests/data/profiler_events.yaml
seed nccl_log tests/data/nccl_tests/*
seed profile_size tests/data/fuzz/profile_size/*
seed nccl_header tests/data/fuzz/nccl_header/*
seed profile_cbor tests/data/fuzz/profile_cbor/*
mkdir -p "$build/corpus/runs_csv"
printf '%s\n%s\n' '# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)' \
  '8,64,4,1024,16,24,1024,2,2,2,512.5' > "$build/corpus/runs_csv/vtrain.csv"
mkdir -p "$build/corpus/signature" "$build/findings"
printf 'gemm m=64 n=64 k=64 layout=nt dtype=fp16' > "$build/corpus/signature/gemm"
printf 'allreduce bytes=1048576 group=8 nodes=1 rpn=8 dtype=fp16' > "$build/corpus/signature/ar"
failed=0
for t in "${targets[@]}"; do
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  log="$build/fuzz_$t.log"
  started=$(date +%s)
  # No symbolization at the crash (it hung once after an out-of-memory): the artifact reproduces it.
  # -timeout=4: an input that takes seconds is a finding (a timeout with its input). The YAML
  # parser has no deadline of its own any more (libyaml, events/yaml_tree.h).
  if ASAN_OPTIONS=detect_leaks=0:symbolize=0 UBSAN_OPTIONS=symbolize=0 \
      timeout $((seconds + 120)) "$build/tests/fuzz/fuzz_$t" "${limit[@]}" -max_len=65536 \
      -rss_limit_mb=2048 -timeout=4 -artifact_prefix="$build/findings/$t-" \
      "$build/corpus/$t" >"$log" 2>&1; then
    status="0 findings"
  else
    status="FINDING (see $log)"
    failed=1
  fi
  execs=$(grep -oE '^(#[0-9]+|Done [0-9]+ runs)' "$log" | tail -1 | grep -oE '[0-9]+')
  printf '%-10s %10s executions  %6s s  corpus %5s  %s\n' "$t" "${execs:-?}" \
    "$(($(date +%s) - started))" "$(ls "$build/corpus/$t" | wc -l)" "$status"
done
exit "$failed"
