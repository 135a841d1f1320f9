#!/usr/bin/env bash
# Builds (incrementally) and runs every test through ctest. This is the README's test command and
# exactly what CI runs after installing dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# Open MPI refuses to run as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j 2
