#pragma once
// A cluster: identical nodes of GPUs joined by a network. Loaded from configs/clusters/*.yaml:
//
//   name: dgx-a100
//   nodes: 4                      # optional: without it a strategy uses as many nodes as it needs
//   node:
//     gpus: 8
//     device: a100-sxm4-80gb       # a device file: configs/devices/a100-sxm4-80gb.yaml
//                                  # (config/device_config.h), or inline datasheet figures only:
//     device:
//       name: NVIDIA A100-SXM4-80GB
//       peak_tflops: {fp16: 312, bf16: 312, fp32: 19.5}   # dense, per GPU
//       memory_bandwidth_gb_s: 2039
//       memory_gib: 79.15         # CUDA's total (cudaMemGetInfo), not the datasheet's 80 GB
//     intra_link: {name: NVSwitch, bandwidth_gb_s: 300, latency_us: 3}   # per GPU, one direction
//     # Optional, needed only to offload to host memory (--offload): each GPU's link to the host
//     # (pinned-memory copy rate, one direction) and the node's host memory (all its GPUs share
//     # it; its bandwidth bounds the CPU optimizer step).
//     host_link: {name: PCIe Gen4 x16, bandwidth_gb_s: 25, latency_us: 10}
//     host_memory: {gib: 2048, bandwidth_gb_s: 400}
//   network: {name: 8x HDR 200Gb/s, bandwidth_gb_s: 200, latency_us: 5}  # per node, one direction
//   attention_kernel: cudnn   # optional: fa2 | fa3 | cudnn, the fused-attention kernel its runs
//   use topology: {...}   # optional: NICs, NVSwitch, fabric tiers, fitted NCCL terms
//                     # (config/network_topology.h); derived from the links when absent

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "config/device_config.h"
#include "config/network_topology.h"

namespace evsim {

struct Link {
  std::string name;
  double bandwidth_gb_s = 0;
  double latency_us = 0;
};

struct HostMemory {
  double gib = 0;             // per node
  double bandwidth_gb_s = 0;  // per node, shared by its GPUs' host-side work
};

struct ClusterConfig {
  std::string name;
  std::string source;
  std::optional<int> nodes;  // node count, when the cluster is a fixed size
  int gpus_per_node = 0;
  DeviceSpec device;
  Link intra_link;                        // bandwidth per GPU
  Link network;                           // bandwidth per node
  std::optional<Link> host_link;          // bandwidth per GPU; absent: no offload
  std::optional<HostMemory> host_memory;  // per node; absent: no offload
  NetworkTopology topology;               // always set (derived from the links for old files)
  // The fused-attention kernel the run's software uses (the cluster file's `attention_kernel:`,
  // replaced by --attention-kernel; a run without either takes its framework's:
  // io/run_options.h). Unset (a cluster loaded outside a run): FlashAttention-2.
  std::optional<AttentionKernel> attention_kernel;
  AttentionKernel attentionKernel() const {
    return attention_kernel.value_or(AttentionKernel::kFa2);
  }

  // GPUs available, or nullopt when the node count is open.
  std::optional<int64_t> totalGpus() const;
  int nodeOfRank(int64_t rank) const { return static_cast<int>(rank / gpus_per_node); }
};

ClusterConfig loadClusterConfig(const std::string& path);
// A line for the user when the cluster describes its network (`topology:`) but its device names no
// GPU generation NCCL's tuner tables know, so the tuner takes Ampere's row (the rows differ in
// protocol latencies and LL128's use); empty otherwise. Printed by the commands that cost
// collectives, so that the assumption is never silent.
std::string assumedNcclArchNote(const ClusterConfig& cluster);
ClusterConfig parseClusterConfig(const std::string& yaml_text, const std::string& origin);

}  // namespace evsim
