#!/usr/bin/env bash
# Builds eventsim's CUDA backend here (a machine with the CUDA toolkit, no GPU needed) and packs
# what a bare GPU machine lacks into gpu-bundle/ (git-ignored): the executables, the gpu tests,
# their non-system shared libraries, CUPTI, and a relocatable Open MPI (OPAL_PREFIX). The GPU
# machine must bring its own driver, CUDA runtime, cuBLAS and NCCL (a PyTorch install has them);
# scripts/gpu/env.sh finds them there. Then, on the GPU machine:
#   source scripts/gpu/env.sh && scripts/gpu/run_all.sh OUTDIR
# Carry gpu-bundle.tar.xz (the device tool's `carry`); env.sh unpacks it.
# Usage: scripts/gpu/bundle.sh [CUDA architectures, default "80;90"]
set -euo pipefail
cd "$(dirname "$0")/../.."
archs="${1:-80;90}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEVSIM_BACKEND=cuda \
  -DEVSIM_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
targets=(eventprof eventrun eventsim kernels_cuda_test profiler_cuda_test eventrun_cuda_test)
cmake --build build-gpu -j "$(nproc)" --target "${targets[@]}"

out=gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp build-gpu/profiler/eventprof build-gpu/runner/eventrun build-gpu/eventsim \
   build-gpu/tests/kernels/kernels_cuda_test build-gpu/tests/profiler/profiler_cuda_test \
   build-gpu/tests/profiler/eventrun_cuda_test "$out/bin/"

# The gpu tests read configs at the source path they were built from (EVSIM_CONFIG_DIR).
pwd >"$out/BUILD_ROOT"

# Open MPI under a prefix of its own (Debian's layout), found through OPAL_PREFIX at run time.
ompi="$out/ompi"
mkdir -p "$ompi/bin" "$ompi/lib/x86_64-linux-gnu" "$ompi/share" "$ompi/etc"
cp /usr/bin/orted /usr/bin/orterun "$ompi/bin/"
ln -s orterun "$ompi/bin/mpirun"
cp -a /usr/lib/x86_64-linux-gnu/openmpi "$ompi/lib/x86_64-linux-gnu/"
rm -rf "$ompi/lib/x86_64-linux-gnu/openmpi/include"
cp -a /usr/share/openmpi "$ompi/share/"
cp -a /etc/openmpi/. "$ompi/etc/"

# Every shared library these need, except the C library family, the C++ runtime (the GPU machine's
# is newer) and what the GPU machine brings (driver, CUDA runtime, cuBLAS, NCCL). CUPTI travels:
# it must match the CUDA version the backend was built against.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart\.|libcublas|libnccl)'
{
  find "$out/bin" "$ompi/bin" -type f
  find "$ompi/lib" -name '*.so*' -type f
} | while read -r f; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  [[ "$path" == */openmpi/lib/* ]] && continue  # already in the Open MPI tree
  cp -L "$path" "$out/lib/$name"
done
cp -L /usr/local/cuda/lib/libcupti.so.13 "$out/lib/" 2>/dev/null || cp -L /usr/local/cuda/lib64/libcupti.so.13 "$out/lib/"
strip --strip-unneeded "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true
# The device tool carries at most 64 MiB with the working tree: travel compressed (OpenBLAS alone
# is 36 MB); scripts/gpu/env.sh unpacks it on the GPU machine.
tar -C "$out/.." -cJf gpu-bundle.tar.xz "$(basename "$out")"
du -sh "$out" gpu-bundle.tar.xz
