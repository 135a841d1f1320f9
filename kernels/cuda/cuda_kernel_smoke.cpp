// cuda_kernel_smoke: builds a compute event's CUDA kernel on GPU 0, runs it a few times and prints
// the elapsed time per run (cudaEvent timing), for checking kernels on a GPU machine by hand.
//
//   cuda_kernel_smoke --list                    example signatures, one per compute op
//   cuda_kernel_smoke --all [--iters N]         runs every example
//   cuda_kernel_smoke "<signature>" [--iters N] runs one event, e.g.
//       cuda_kernel_smoke "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16"
//
// Exit code 2 for bad input (unknown flag or signature), 1 for a CUDA failure.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/error.h"
#include "events/event.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace {

// One GPT-style layer's shapes (hidden 1024, sequence 2048, micro-batch 4, 16 heads, 50k vocab
// split over 2 tensor-parallel ranks): large enough that launch overhead does not dominate.
const std::vector<std::string>& exampleSignatures() {
  static const std::vector<std::string> examples = {
      "gemm m=8192 n=3072 k=1024 layout=nt dtype=bf16",
      "bgemm batch=64 m=2048 n=2048 k=64 layout=nt dtype=bf16",
      "layernorm_fwd rows=8192 cols=1024 dtype=bf16",
      "layernorm_bwd rows=8192 cols=1024 dtype=bf16",
      "softmax_fwd rows=131072 cols=2048 dtype=bf16",
      "softmax_bwd rows=131072 cols=2048 dtype=bf16",
      "cross_entropy_fwd rows=8192 cols=25216 dtype=bf16",
      "cross_entropy_bwd rows=8192 cols=25216 dtype=bf16",
      "gelu_fwd elems=33554432 dtype=bf16",
      "gelu_bwd elems=33554432 dtype=bf16",
      "dropout_fwd elems=8388608 dtype=bf16",
      "dropout_bwd elems=8388608 dtype=bf16",
      "add elems=8388608 dtype=bf16",
      "embedding_fwd tokens=8192 hidden=1024 vocab=25216 dtype=bf16",
      "embedding_bwd tokens=8192 hidden=1024 vocab=25216 dtype=bf16",
      "adam params=100000000 dtype=fp32",
      // Llama-style layer (hidden 4096, 32 query and 8 key/value heads of 128, ffn 11008,
      // sequence 4096, micro-batch 2) and an FP8 projection.
      "gemm m=8192 n=4096 k=4096 layout=nt dtype=fp8",
      "rmsnorm_fwd rows=8192 cols=4096 dtype=bf16",
      "rmsnorm_bwd rows=8192 cols=4096 dtype=bf16",
      "swiglu_fwd elems=90177536 dtype=bf16",
      "swiglu_bwd elems=90177536 dtype=bf16",
      "rope_fwd tokens=8192 heads=40 dim=128 dtype=bf16",
      "rope_bwd tokens=8192 heads=40 dim=128 dtype=bf16",
      "flash_attn_fwd batch=64 groups=16 seq=4096 dim=128 causal=1 dtype=bf16",
      "flash_attn_bwd batch=64 groups=16 seq=4096 dim=128 causal=1 dtype=bf16",
  };
  return examples;
}

void timeEvent(const evsim::Event& event, int iters) {
  cudaStream_t stream = nullptr;
  EVSIM_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start = nullptr, stop = nullptr;
  EVSIM_CUDA_CHECK(cudaEventCreate(&start));
  EVSIM_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times_ms;
  {
    auto kernel = evsim::makeCudaKernel(event, stream);
    kernel->run();  // warm-up: first-launch module loading and cuBLAS heuristics
    kernel->synchronize();
    for (int i = 0; i < iters; ++i) {
      EVSIM_CUDA_CHECK(cudaEventRecord(start, stream));
      kernel->run();
      EVSIM_CUDA_CHECK(cudaEventRecord(stop, stream));
      EVSIM_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      EVSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      times_ms.push_back(ms);
    }
  }
  EVSIM_CUDA_CHECK(cudaEventDestroy(start));
  EVSIM_CUDA_CHECK(cudaEventDestroy(stop));
  EVSIM_CUDA_CHECK(cudaStreamDestroy(stream));
  std::sort(times_ms.begin(), times_ms.end());
  double median_ms = times_ms[times_ms.size() / 2];
  double seconds = median_ms / 1e3;
  std::printf("%-64s median %9.4f ms  min %9.4f ms  %8.2f TFLOP/s  %8.1f GB/s\n",
              event.signature().c_str(), median_ms, double(times_ms.front()),
              event.flops / seconds / 1e12, double(event.memory_bytes) / seconds / 1e9);
}

int run(int argc, char** argv) {
  std::vector<std::string> signatures;
  int iters = 10;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--list") {
      list = true;
    } else if (arg == "--all") {
      signatures = exampleSignatures();
    } else if (arg == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
      if (iters <= 0) EVSIM_THROW(InputError, "--iters '{}': must be > 0", argv[i]);
    } else if (!arg.starts_with("--")) {
      signatures.push_back(arg);
    } else {
      EVSIM_THROW(InputError, "unknown flag '{}' (use --list, --all, --iters N)", arg);
    }
  }
  if (list) {
    for (const std::string& s : exampleSignatures()) std::printf("%s\n", s.c_str());
    return 0;
  }
  if (signatures.empty()) {
    EVSIM_THROW(InputError,
                "usage: cuda_kernel_smoke --list | --all | \"<signature>\" "
                "[--iters N]");
  }
  std::vector<evsim::Event> events;  // all parsed first: a typo fails before any GPU work
  for (const std::string& s : signatures)
    events.push_back(evsim::parseEventSignature(s, "argument"));
  if (evsim::cudaDeviceCount() == 0) EVSIM_THROW(Error, "no CUDA device visible");
  cudaDeviceProp prop{};
  EVSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s, %d iterations per event\n", prop.name, iters);
  for (const evsim::Event& event : events) timeEvent(event, iters);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const evsim::InputError& e) {
    std::fprintf(stderr, "cuda_kernel_smoke: %s\n", e.what());
    return evsim::kInputErrorExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_kernel_smoke: %s\n", e.what());
    return 1;
  }
}
