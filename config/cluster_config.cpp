#include "config/cluster_config.h"

#include <filesystem>
#include <vector>

#include "common/data_dir.h"
#include "common/error.h"
#include "common/units.h"
#include "common/yaml_reader.h"

namespace evsim {

namespace {

// Bounds far beyond any machine (a link of 10 PB/s, a latency of 1000 s, a million nodes of 65536
// GPUs): what lies outside is a typo, and would overflow the products the planner forms.
constexpr double kMaxBandwidthGBs = 1e7;
// And a floor (1 kB/s): a bandwidth of 1e-300 GB/s is positive but made an iteration take 7e304 ms.
constexpr double kMinBandwidthGBs = 1e-6;
constexpr double kMaxLatencyUs = 1e9;
constexpr double kMaxHostMemoryGib = 1e9;  // a petabyte per node
constexpr int64_t kMaxNodes = int64_t{1} << 20;
constexpr int64_t kMaxGpusPerNode = int64_t{1} << 16;

Link readLink(const YamlReader& link) {
  link.allowOnly({"name", "bandwidth_gb_s", "latency_us"});
  const double bandwidth = link.positiveDouble("bandwidth_gb_s", kMaxBandwidthGBs);
  if (bandwidth < kMinBandwidthGBs) {
    link.fail("bandwidth_gb_s", fmt::format("{:g}: must be >= {:g}", bandwidth, kMinBandwidthGBs));
  }
  return Link{link.str("name"), bandwidth, link.nonNegativeDouble("latency_us", kMaxLatencyUs)};
}

// `device: NAME` — a path (absolute or relative to the cluster file), or a bundled device: a
// devices/ folder beside the cluster's folder (configs/clusters -> configs/devices), then the
// project's configs/devices.
DeviceSpec readDeviceFile(const YamlReader& node, const std::string& cluster_file) {
  namespace fs = std::filesystem;
  const std::string name = node.str("device");
  const fs::path cluster_dir = fs::path(cluster_file).parent_path();
  std::vector<fs::path> candidates = {fs::path(name), cluster_dir / name,
                                      cluster_dir / ".." / "devices" / (name + ".yaml"),
                                      bundledConfigDir() / "devices" / (name + ".yaml")};
  for (const fs::path& candidate : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return loadDeviceConfig(candidate.string());
  }
  node.fail("device",
            fmt::format("'{}': no such device file, and no bundled devices/{}.yaml", name, name));
}

ClusterConfig readCluster(const YamlReader& root) {
  root.allowOnly(
      {"name", "nodes", "node", "network", "topology", "description", "attention_kernel"});
  ClusterConfig cluster;
  cluster.source = root.file();
  if (root.has("attention_kernel")) {
    cluster.attention_kernel =
        parseAttentionKernel(root.str("attention_kernel"), root.where("attention_kernel"));
  }
  cluster.name = root.str("name");
  if (root.has("nodes")) cluster.nodes = static_cast<int>(root.positiveInt("nodes", kMaxNodes));

  YamlReader node = root.child("node");
  node.allowOnly({"gpus", "device", "intra_link", "host_link", "host_memory"});
  cluster.gpus_per_node = static_cast<int>(node.positiveInt("gpus", kMaxGpusPerNode));
  cluster.intra_link = readLink(node.child("intra_link"));
  if (node.has("host_link")) cluster.host_link = readLink(node.child("host_link"));
  if (node.has("host_memory")) {
    const YamlReader host = node.child("host_memory");
    host.allowOnly({"gib", "bandwidth_gb_s"});
    cluster.host_memory = HostMemory{host.positiveDouble("gib", kMaxHostMemoryGib),
                                     host.positiveDouble("bandwidth_gb_s", kMaxBandwidthGBs)};
  }

  // child() first: indexing a missing key made yaml-cpp throw "invalid node", an internal error
  // (found by fuzzing).
  const YamlReader device = node.child("device");
  cluster.device =
      device.node().IsScalar() ? readDeviceFile(node, root.file()) : readInlineDevice(device);
  cluster.network = readLink(root.child("network"));
  cluster.topology =
      root.has("topology")
          ? readNetworkTopology(root.child("topology"), cluster.gpus_per_node,
                                cluster.intra_link.latency_us, cluster.network.bandwidth_gb_s,
                                cluster.network.latency_us)
          : derivedNetworkTopology(cluster.gpus_per_node, cluster.intra_link.latency_us,
                                   cluster.network.bandwidth_gb_s, cluster.network.latency_us);
  if (cluster.topology.nccl.gpu_arch == NcclGpuArch::kUnset) {
    cluster.topology.nccl.gpu_arch = ncclGpuArchOfName(cluster.device.name);
    if (cluster.topology.nccl.gpu_arch == NcclGpuArch::kUnset) {
      cluster.topology.nccl.gpu_arch = ncclGpuArchOfName(cluster.device.id);
    }
    if (cluster.topology.nccl.gpu_arch == NcclGpuArch::kUnset) {
      cluster.topology.nccl.gpu_arch = NcclGpuArch::kAmpere;
      cluster.topology.nccl.gpu_arch_assumed = true;
    }
  }
  return cluster;
}

}  // namespace

std::optional<int64_t> ClusterConfig::totalGpus() const {
  if (!nodes) return std::nullopt;
  return static_cast<int64_t>(*nodes) * gpus_per_node;
}

ClusterConfig loadClusterConfig(const std::string& path) {
  return readCluster(YamlReader::fromFile(path));
}

std::string assumedNcclArchNote(const ClusterConfig& cluster) {
  // A derived topology (an old file without `topology:`, the CPU clusters) makes no NCCL claim.
  if (!cluster.topology.nccl.gpu_arch_assumed || cluster.topology.derived) return {};
  return fmt::format(
      "cluster {}: device '{}' is no GPU generation NCCL's tuner tables know; its collectives "
      "use Ampere's row (set topology.nccl.gpu_arch: volta|ampere|hopper|blackwell)",
      cluster.name, cluster.device.name);
}

ClusterConfig parseClusterConfig(const std::string& yaml_text, const std::string& origin) {
  return readCluster(YamlReader::fromString(yaml_text, origin));
}

}  // namespace evsim
