#pragma once
// A PyTorch profiler (Kineto) trace, Chrome JSON, read into a tree of host operations per thread,
// each with the device time of the kernels it launched (docs/PROFILER.md, "Importing a PyTorch
// profiler trace"). CPU ops ("cpu_op") and user annotations ("user_annotation") nest by time on
// their thread; a GPU kernel ("kernel", "gpu_memcpy", "gpu_memset") is charged to the innermost op
// whose thread made the runtime call ("cuda_runtime", "cuda_driver") with the kernel's correlation
// id. Without kernels (a CPU trace) an op's time is its own duration.

#include <cstdint>
#include <string>
#include <vector>

namespace evsim {

struct KinetoOp {
  std::string name;      // "aten::mm", "Optimizer.step#Adam.step", ...
  std::string category;  // cpu_op, user_annotation
  double start_us = 0;
  double duration_us = 0;
  std::vector<std::vector<int64_t>> input_dims;     // args "Input Dims" ([] for a scalar)
  std::vector<std::vector<int64_t>> input_strides;  // args "Input Strides" (may be empty)
  std::vector<std::string> input_types;             // args "Input type": "float", "c10::BFloat16"
  std::vector<int> children;                        // indices into KinetoTrace::ops, by time
  int parent = -1;
  double kernel_us = 0;  // the device time of the kernels it launched itself
  int kernels = 0;
};

struct KinetoKernel {
  std::string name;
  double duration_us = 0;
  int op = -1;  // the op that launched it, -1 when none was found
};

struct KinetoTrace {
  std::vector<KinetoOp> ops;
  std::vector<int> roots;  // ops without a parent, by thread then time
  std::vector<KinetoKernel> kernels;
  bool has_device_kernels = false;

  // The op's time: the device time of the kernels launched in its subtree when the trace has
  // kernels, else its own host duration.
  double opTimeUs(int op) const;
  double subtreeKernelUs(int op) const;
  int subtreeKernels(int op) const;
};

// Throws InputError naming the file: not JSON, no traceEvents, an event without ts/dur.
KinetoTrace loadKinetoTrace(const std::string& path);
KinetoTrace parseKinetoTrace(const std::string& text, const std::string& origin);

}  // namespace evsim
