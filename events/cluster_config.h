#pragma once
// A cluster: identical nodes of GPUs joined by a network. Loaded from configs/clusters/*.yaml:
//
//   name: dgx-a100
//   nodes: 4                      # optional: without it a strategy uses as many nodes as it needs
//   node:
//     gpus: 8
//     device: a100-sxm4-80gb       # a device file: configs/devices/a100-sxm4-80gb.yaml
//                                  # (events/device_config.h), or inline datasheet figures only:
//     device:
//       name: NVIDIA A100-SXM4-80GB
//       peak_tflops: {fp16: 312, bf16: 312, fp32: 19.5}   # dense, per GPU
//       memory_bandwidth_gb_s: 2039
//       memory_gib: 80
//     intra_link: {name: NVSwitch, bandwidth_gb_s: 300, latency_us: 3}   # per GPU, one direction
//   network: {name: 8x HDR 200Gb/s, bandwidth_gb_s: 200, latency_us: 5}  # per node, one direction

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "events/device_config.h"

namespace evsim {

struct Link {
  std::string name;
  double bandwidth_gb_s = 0;
  double latency_us = 0;
};

struct ClusterConfig {
  std::string name;
  std::string source;
  std::optional<int> nodes;  // node count, when the cluster is a fixed size
  int gpus_per_node = 0;
  DeviceSpec device;
  Link intra_link;  // bandwidth per GPU
  Link network;     // bandwidth per node

  // GPUs available, or nullopt when the node count is open.
  std::optional<int64_t> totalGpus() const;
  int nodeOfRank(int64_t rank) const { return static_cast<int>(rank / gpus_per_node); }
};

ClusterConfig loadClusterConfig(const std::string& path);
ClusterConfig parseClusterConfig(const std::string& yaml_text, const std::string& origin);

}  // namespace evsim
