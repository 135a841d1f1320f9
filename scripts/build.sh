#!/usr/bin/env bash
# Configures and builds eventsim into build/ (Release). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DEVSIM_BACKEND=cpu
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)"
