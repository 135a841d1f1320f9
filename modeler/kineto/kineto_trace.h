#pragma once
// A PyTorch profiler (Kineto) trace, Chrome JSON, read into a tree of host operations per thread,
// each with the device time of the kernels it launched (docs/PROFILER.md, "Importing a PyTorch
// profiler trace"). CPU ops ("cpu_op") and user annotations ("user_annotation") nest by time on
// their thread; a GPU kernel ("kernel", "gpu_memcpy", "gpu_memset") is charged to the innermost op
// whose thread made the runtime call ("cuda_runtime", "cuda_driver") with the kernel's correlation
// id. Without kernels (a CPU trace) an op's time is its own duration.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace evsim {

// A collective as PyTorch's ProcessGroupNCCL records it (its `record_param_comms` CPU op; recent
// Kineto copies the same args onto the NCCL kernel): args "Collective name" ("allreduce",
// "_allgather_base", "_reduce_scatter_base", "alltoall_base", "send", "recv", "broadcast", ...),
// "In msg nelems", "Out msg nelems", "dtype" (c10 names: "Float", "BFloat16", "Half"), "Group size"
// and "Process Group Ranks" ("[0, 1, 2, 3]"; long lists end in ", ...]", extended by their
// stride to the group size).
struct KinetoCollective {
  std::string name;
  int64_t in_elems = 0;
  int64_t out_elems = 0;
  std::string dtype;
  int group_size = 0;
  std::vector<int64_t> ranks;  // global ranks of the group; empty when the trace has none
};

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
  std::optional<KinetoCollective> collective;  // a record_param_comms (or nccl:*) op's args
};

struct KinetoKernel {
  std::string name;
  double duration_us = 0;
  int op = -1;                                 // the op that launched it, -1 when none was found
  std::optional<KinetoCollective> collective;  // an NCCL kernel's collective args
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
