#pragma once
// The round-numbered test GPU that the device-model tests (device_model, fp8_gemm,
// fused_attention, sustained_clock) work their times out on by hand: 108 SMs, fp16 324 TFLOP/s
// (3e6 flop/us per SM), 2000 GB/s memory; GEMM efficiency 0.75 with 64 of k tile overhead, 5 us
// per GEMM kernel; memory efficiency 0.8 (1.6e6 bytes/us), 2 us per memory-bound kernel; 20 us
// host time per op; 10% uncertainty. Each test adds its own keys and keeps its figures beside it.

#include <string>
#include <string_view>

#include "config/cluster_config.h"

namespace evsim::test {

// The device file: `name` (gpu: the same words capitalised by the caller), `peaks` the entries
// of datasheet.peak_tflops, `model_extra` YAML lines appended to the model section (each indented
// two spaces, ending in '\n').
inline std::string roundGpuYaml(std::string_view name, std::string_view gpu,
                                std::string_view model_extra = "",
                                std::string_view peaks = "fp16: 324") {
  std::string yaml = "\nname: ";
  yaml.append(name).append("\ngpu: ").append(gpu).append(R"(
datasheet:
  source: "test datasheet"
  peak_tflops: {)");
  yaml.append(peaks).append(R"(}
  memory_bandwidth_gb_s: 2000
  memory_gib: 80
  sm_count: 108
model:
  gemm_efficiency: {value: 0.75, source: "test"}
  gemm_tile_overhead_k: {value: 64, source: "test"}
  gemm_kernel_us: {value: 5, source: "test"}
  memory_efficiency: {value: 0.8, source: "test"}
  memory_kernel_us: {value: 2, source: "test"}
  host_op_us: {value: 20, source: "test"}
  host_call_us: {value: 5, source: "test"}
  uncertainty_pct: {value: 10, source: "test"}
)");
  return yaml.append(model_extra);
}

// Eight of them in a node (NVLink-like 300 GB/s, 3 us; network 200 GB/s, 5 us); `origin` names the
// device file in errors.
inline ClusterConfig roundGpuCluster(const std::string& device_yaml,
                                     const std::string& origin = "round-gpu.yaml") {
  ClusterConfig c;
  c.name = "round";
  c.gpus_per_node = 8;
  c.device = parseDeviceConfig(device_yaml, origin);
  c.intra_link = {"link", 300, 3};
  c.network = {"net", 200, 5};
  return c;
}

}  // namespace evsim::test
