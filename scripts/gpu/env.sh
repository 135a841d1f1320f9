# Sourced on the GPU machine: puts gpu-bundle/ (scripts/gpu/bundle.sh) on the paths and finds the
# machine's own CUDA runtime, cuBLAS and NCCL (a PyTorch install carries them as pip packages).
# Usage: source scripts/gpu/env.sh
_evsim_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_evsim_bundle="$_evsim_root/gpu-bundle"
if [ ! -x "$_evsim_bundle/bin/eventprof" ] && [ -f "$_evsim_root/gpu-bundle.tar.xz" ]; then
  tar -C "$_evsim_root" -xJf "$_evsim_root/gpu-bundle.tar.xz"
fi
if [ ! -x "$_evsim_bundle/bin/eventprof" ]; then
  echo "scripts/gpu/env.sh: $_evsim_bundle/bin/eventprof missing: run scripts/gpu/bundle.sh first" >&2
  return 2 2>/dev/null || exit 2
fi
_evsim_libdir() {  # the folder of the first $1 outside the bundle, preferring /usr/local/cuda
  local f
  f=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /opt /usr/lib /usr/local/lib \
        -name "$1" -not -path '*/gpu-bundle/*' 2>/dev/null | head -1)
  [ -n "$f" ] && dirname "$f"
}
_evsim_extra=""
for _lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  _d=$(_evsim_libdir "$_lib")
  if [ -z "$_d" ]; then echo "scripts/gpu/env.sh: $_lib not found on this machine" >&2; continue; fi
  case ":$_evsim_extra:" in *":$_d:"*) ;; *) _evsim_extra="$_evsim_extra:$_d" ;; esac
done
export OPAL_PREFIX="$_evsim_bundle/ompi"
export PATH="$_evsim_bundle/bin:$OPAL_PREFIX/bin:$PATH"
export LD_LIBRARY_PATH="$_evsim_bundle/lib:$OPAL_PREFIX/lib/x86_64-linux-gnu/openmpi/lib${_evsim_extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# One host, shared memory only; root is the usual user on a lent machine.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _lib _d _evsim_extra
