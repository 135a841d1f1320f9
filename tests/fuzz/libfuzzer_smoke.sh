#!/bin/sh
# CI's libFuzzer smoke (issue 17, item 7): every loader target, coverage-guided, with ASan and
# UBSan, for a share of TOTAL seconds (default 60), through scripts/fuzz.sh in its own clang build
# folder BUILD (only the fuzz targets are built). Reports skipped (exit 77) when clang++ or its
# libFuzzer runtime is missing, never passed. Usage: libfuzzer_smoke.sh SOURCE_DIR BUILD [TOTAL]
# [JOBS [build]]: JOBS parallel compiles (default: nproc); with `build`, only build the targets
# (ctest runs the build as fuzz.libfuzzer_build with two jobs, then the fuzzing with one).
set -u
source_dir=$1
build=$2
total=${3:-60}
jobs=${4:-$(nproc)}
mode=${5:-all}
if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIPPED: clang++ not found (scripts/install_deps.sh installs clang and libclang-rt-dev)"
  exit 77
fi
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
    >"$probe_dir/log" 2>&1; then
  echo "SKIPPED: clang++ cannot link -fsanitize=fuzzer (libclang-rt-dev missing?):"
  head -3 "$probe_dir/log"
  exit 77
fi
targets=11  # the 60 s are shared: more targets make no longer a smoke
per_target=$((total / targets))
[ "$per_target" -ge 1 ] || per_target=1
build_only=0
[ "$mode" = build ] && build_only=1
EVSIM_FUZZ_BUILD=$build EVSIM_FUZZ_JOBS=$jobs EVSIM_FUZZ_BUILD_ONLY=$build_only \
  exec "$source_dir/scripts/fuzz.sh" "$per_target"
