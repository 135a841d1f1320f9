#include "events/cluster_config.h"

#include "common/error.h"
#include "common/units.h"
#include "events/yaml_reader.h"

namespace evsim {

namespace {

Link readLink(const YamlReader& link) {
  link.allowOnly({"name", "bandwidth_gb_s", "latency_us"});
  return Link{link.str("name"), link.positiveDouble("bandwidth_gb_s"),
              link.nonNegativeDouble("latency_us")};
}

ClusterConfig readCluster(const YamlReader& root) {
  root.allowOnly({"name", "nodes", "node", "network", "description"});
  ClusterConfig cluster;
  cluster.source = root.file();
  cluster.name = root.str("name");
  if (root.has("nodes")) cluster.nodes = static_cast<int>(root.positiveInt("nodes"));

  YamlReader node = root.child("node");
  node.allowOnly({"gpus", "device", "intra_link"});
  cluster.gpus_per_node = static_cast<int>(node.positiveInt("gpus"));
  cluster.intra_link = readLink(node.child("intra_link"));

  YamlReader device = node.child("device");
  device.allowOnly({"name", "peak_tflops", "memory_bandwidth_gb_s", "memory_gib"});
  cluster.device.name = device.str("name");
  cluster.device.memory_bandwidth_gb_s = device.positiveDouble("memory_bandwidth_gb_s");
  cluster.device.memory_gib = device.positiveDouble("memory_gib");
  for (const auto& [dtype_name, value] : device.child("peak_tflops").entries()) {
    DType dtype = parseDType(dtype_name, value.where(""));
    cluster.device.peak_tflops[dtype] = value.asPositiveDouble();
  }
  if (cluster.device.peak_tflops.empty()) {
    device.fail("peak_tflops", "needs at least one dtype");
  }
  cluster.network = readLink(root.child("network"));
  return cluster;
}

}  // namespace

double DeviceSpec::peakTflops(DType dtype) const {
  auto it = peak_tflops.find(dtype);
  if (it == peak_tflops.end()) {
    EVSIM_THROW(InputError, "device '{}': no peak_tflops for {}", name, dtypeName(dtype));
  }
  return it->second;
}

int64_t DeviceSpec::memoryBytes() const { return static_cast<int64_t>(memory_gib * kBytesPerGiB); }

std::optional<int64_t> ClusterConfig::totalGpus() const {
  if (!nodes) return std::nullopt;
  return static_cast<int64_t>(*nodes) * gpus_per_node;
}

ClusterConfig loadClusterConfig(const std::string& path) {
  return readCluster(YamlReader::fromFile(path));
}

ClusterConfig parseClusterConfig(const std::string& yaml_text, const std::string& origin) {
  return readCluster(YamlReader::fromString(yaml_text, origin));
}

}  // namespace evsim
