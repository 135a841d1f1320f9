#!/usr/bin/env bash
# Installs eventsim's build and test dependencies from Debian 12 packages. Needs root (or sudo).
# The CUDA toolkit, CUPTI and NCCL are optional and not installed here: when present under
# /usr/local/cuda, the build adds the CUDA profiling backend (see README).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config \
  libyaml-cpp-dev libyaml-dev libfmt-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev \
  libopenmpi-dev openmpi-bin \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libopenblas-dev zlib1g-dev \
  libprotobuf-dev protobuf-compiler \
  python3 python3-matplotlib python3-yaml \
  python3-dev pybind11-dev python3-pytest \
  clang libclang-rt-dev
# clang + libclang-rt-dev: libFuzzer for the loaders' fuzz smoke (ctest fuzz.libfuzzer_smoke;
# Debian's clang does not pull in its runtime libraries without recommends).
