// Parsing of the cluster's `topology:` section; config/network_topology.h states the keys.
#include "config/network_topology.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/yaml_reader.h"

namespace evsim {

namespace {

constexpr double kMaxBandwidthGBs = 1e7;
constexpr double kMaxLatencyUs = 1e6;
constexpr double kMaxOversubscription = 1e3;
constexpr int64_t kMaxNics = 1 << 12;
constexpr int64_t kMaxTierNodes = int64_t{1} << 20;

// NCCL's per-step ring latencies (src/graph/tuning.cc, hwLat: NVLink and network rows, Ring), used
// where a topology names no fitted figures.
constexpr std::array<double, kNcclProtocolCount> kNcclNvlinkStepUs = {0.6, 1.9, 3.4};
constexpr std::array<double, kNcclProtocolCount> kNcclNetStepUs = {2.7, 4.0, 14.0};

constexpr const char* kProtocolKeys[kNcclProtocolCount] = {"ll", "ll128", "simple"};

// {ll: .., ll128: .., simple: ..} over `latencies` (the keys given replace theirs).
void readLatencies(const YamlReader& lat, std::array<double, kNcclProtocolCount>& latencies) {
  lat.allowOnly({"ll", "ll128", "simple"});
  for (int p = 0; p < kNcclProtocolCount; ++p) {
    if (lat.has(kProtocolKeys[p])) {
      latencies[p] = lat.nonNegativeDouble(kProtocolKeys[p], kMaxLatencyUs);
    }
  }
}

void checkAlgorithmName(const YamlReader& where, const std::string& name) {
  const auto& names = ncclAlgorithmNames();
  if (name != "p2p" && std::find(names.begin(), names.end(), name) == names.end()) {
    where.fail(name, "not an algorithm (ring, tree, nvls, nvls_tree, collnet, pat, p2p)");
  }
}

HopTuning readHop(const YamlReader& hop, const std::array<double, kNcclProtocolCount>& defaults,
                  bool network) {
  if (network) {
    hop.allowOnly({"latency_us", "efficiency", "algorithm_latency_us", "ll_channel_us"});
  } else {
    hop.allowOnly({"latency_us", "efficiency", "algorithm_latency_us"});
  }
  HopTuning tuning;
  tuning.latency_us = defaults;
  tuning.efficiency["ring"] = 1.0;
  if (hop.has("latency_us")) readLatencies(hop.child("latency_us"), tuning.latency_us);
  if (hop.has("algorithm_latency_us")) {
    const YamlReader by = hop.child("algorithm_latency_us");
    for (const auto& [name, lat] : by.entries()) {
      checkAlgorithmName(by, name);
      std::array<double, kNcclProtocolCount> own = tuning.latency_us;
      readLatencies(lat, own);
      tuning.algorithm_latency_us[name] = own;
    }
  }
  if (hop.has("efficiency")) {
    const YamlReader eff = hop.child("efficiency");
    for (const auto& [name, value] : eff.entries()) {
      checkAlgorithmName(eff, name);
      const double e = eff.positiveDouble(name, 1.0);
      tuning.efficiency[name] = e;
    }
  }
  if (network && hop.has("ll_channel_us")) {
    tuning.ll_channel_us = hop.nonNegativeDouble("ll_channel_us", 1000);
  }
  return tuning;
}

// "a or b", "a, b or c": the spellings of `choices`.
template <typename T>
std::string spelledChoices(std::initializer_list<std::pair<const char*, T>> choices) {
  std::string out;
  size_t i = 0;
  for (const auto& choice : choices) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choice.first;
    ++i;
  }
  return out;
}

// The value `key` names among `choices` (its spelling in the file, the value), else one line
// naming the key and what it may be ("'x': must be a, b or c"), then `note`.
template <typename T>
T readChoice(const YamlReader& r, const std::string& key,
             std::initializer_list<std::pair<const char*, T>> choices, const char* note = "") {
  const std::string v = r.str(key);
  for (const auto& [name, value] : choices) {
    if (v == name) return value;
  }
  r.fail(key, fmt::format("'{}': must be {}{}", v, spelledChoices(choices), note));
}

}  // namespace

const char* ncclProtocolName(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "Simple";
  }
  return "?";
}

double HopTuning::latencyOf(std::string_view algorithm, NcclProtocol protocol) const {
  auto own = algorithm_latency_us.find(algorithm);
  return (own != algorithm_latency_us.end() ? own->second : latency_us)[static_cast<int>(protocol)];
}

double HopTuning::efficiencyOf(std::string_view algorithm) const {
  auto own = efficiency.find(algorithm);
  if (own != efficiency.end()) return own->second;
  auto ring = efficiency.find("ring");
  return ring != efficiency.end() ? ring->second : 1.0;
}

NcclGpuArch ncclGpuArchOfName(std::string_view name) {
  std::string upper(name);
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  auto has = [&](std::string_view part) { return upper.find(part) != std::string::npos; };
  // Blackwell first: "GB200" also holds "B200"; Hopper's names before Ampere's "A100".
  if (has("B200") || has("B100") || has("B300")) return NcclGpuArch::kBlackwell;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200")) {
    return NcclGpuArch::kHopper;
  }
  if (has("A100") || has("A800") || has("A40") || has("A30") || has("A10") || has("L40")) {
    return NcclGpuArch::kAmpere;
  }
  if (has("V100")) return NcclGpuArch::kVolta;
  return NcclGpuArch::kUnset;
}

int NetworkTopology::rails(int gpus_per_node) const {
  return std::max(1, std::min(nics_per_node, gpus_per_node));
}

int NetworkTopology::railOf(int local, int gpus_per_node) const {
  return static_cast<int>(int64_t{local} * rails(gpus_per_node) / std::max(1, gpus_per_node));
}

double NetworkTopology::railBandwidthGbS(int gpus_per_node) const {
  return nic_bandwidth_gb_s * nics_per_node / rails(gpus_per_node);
}

int NetworkTopology::pciSwitchRails(int gpus_per_node) const {
  if (pci_switch_gpus <= 0) return 1;
  return std::max(1, static_cast<int>(int64_t{pci_switch_gpus} * rails(gpus_per_node) /
                                      std::max(1, gpus_per_node)));
}

bool NetworkTopology::samePciSwitch(int a, int b, int gpus_per_node) const {
  if (pci_switch_gpus <= 0) return railOf(a, gpus_per_node) == railOf(b, gpus_per_node);
  return a / pci_switch_gpus == b / pci_switch_gpus;
}

const std::vector<std::string>& ncclAlgorithmNames() {
  static const std::vector<std::string> names = {"ring",      "tree",    "nvls",
                                                 "nvls_tree", "collnet", "pat"};
  return names;
}

NetworkTopology derivedNetworkTopology(int gpus_per_node, double intra_latency_us,
                                       double network_bandwidth_gb_s, double network_latency_us) {
  NetworkTopology t;
  t.derived = true;
  t.nics_per_node = gpus_per_node;
  t.nic_bandwidth_gb_s = network_bandwidth_gb_s / gpus_per_node;
  t.nccl.source = "derived from the cluster's intra_link and network latencies";
  t.nccl.intra.latency_us.fill(intra_latency_us);
  t.nccl.net.latency_us.fill(network_latency_us);
  t.nccl.intra.efficiency["ring"] = 1.0;
  t.nccl.net.efficiency["ring"] = 1.0;
  return t;
}

NetworkTopology readNetworkTopology(const YamlReader& topo, int gpus_per_node,
                                    double intra_latency_us, double network_bandwidth_gb_s,
                                    double network_latency_us) {
  topo.allowOnly({"nvswitch", "nvls", "nics_per_node", "nic_bandwidth_gb_s", "sharp", "placement",
                  "nic_affinity", "pci_switch_gpus", "tiers", "nccl"});
  NetworkTopology t = derivedNetworkTopology(gpus_per_node, intra_latency_us,
                                             network_bandwidth_gb_s, network_latency_us);
  t.derived = false;
  // A described topology without fitted figures starts from NCCL's own per-step latencies.
  t.nccl.source = "NCCL's default per-step latencies (src/graph/tuning.cc), not fitted";
  t.nccl.intra.latency_us = kNcclNvlinkStepUs;
  t.nccl.net.latency_us = kNcclNetStepUs;
  if (topo.has("nvswitch")) t.nvswitch = topo.boolean("nvswitch");
  if (topo.has("nvls")) t.nvls = topo.boolean("nvls");
  if (t.nvls && !t.nvswitch) topo.fail("nvls", "NVLink SHARP needs nvswitch: true");
  if (topo.has("nics_per_node")) {
    t.nics_per_node = static_cast<int>(topo.positiveInt("nics_per_node", kMaxNics));
    t.nic_bandwidth_gb_s = network_bandwidth_gb_s / t.nics_per_node;
  }
  if (topo.has("nic_bandwidth_gb_s")) {
    t.nic_bandwidth_gb_s = topo.positiveDouble("nic_bandwidth_gb_s", kMaxBandwidthGBs);
  }
  const double nic_total = t.nic_bandwidth_gb_s * t.nics_per_node;
  if (std::abs(nic_total - network_bandwidth_gb_s) > 1e-6 * network_bandwidth_gb_s) {
    topo.fail(
        "nic_bandwidth_gb_s",
        fmt::format("{} NICs x {:g} GB/s = {:g} GB/s, but network.bandwidth_gb_s is {:g}",
                    t.nics_per_node, t.nic_bandwidth_gb_s, nic_total, network_bandwidth_gb_s));
  }
  if (topo.has("sharp")) t.sharp = topo.boolean("sharp");
  if (topo.has("placement")) {
    t.placement = readChoice<JobPlacement>(
        topo, "placement",
        {{"contiguous", JobPlacement::kContiguous}, {"scattered", JobPlacement::kScattered}});
  }
  if (topo.has("nic_affinity")) {
    t.nic_affinity = readChoice<NicAffinity>(
        topo, "nic_affinity",
        {{"pooled", NicAffinity::kPooled}, {"per_gpu", NicAffinity::kPerGpu}});
    const int nics = t.nics_per_node;
    if (t.perGpuNics() && nics % gpus_per_node != 0 && gpus_per_node % nics != 0) {
      topo.fail("nic_affinity",
                fmt::format("per_gpu: {} NICs on {} GPUs; one count must divide the other", nics,
                            gpus_per_node));
    }
  }
  if (topo.has("pci_switch_gpus")) {
    const int s = static_cast<int>(topo.positiveInt("pci_switch_gpus", kMaxNics));
    // The switch layout is read only with per-GPU NICs (a send's or a ring's NIC, link_map.h);
    // pooled NICs have no rails to place under a switch, so its rules are not checked there.
    if (t.perGpuNics() && gpus_per_node % s != 0) {
      topo.fail("pci_switch_gpus",
                fmt::format("{}: must divide the node's {} GPUs", s, gpus_per_node));
    }
    // The GPUs sharing a NIC sit under its switch.
    const int per_nic = t.nics_per_node < gpus_per_node && t.nics_per_node > 0 &&
                                gpus_per_node % t.nics_per_node == 0
                            ? gpus_per_node / t.nics_per_node
                            : 1;
    if (t.perGpuNics() && s % per_nic != 0) {
      topo.fail("pci_switch_gpus",
                fmt::format("{}: {} GPUs share each NIC, so a PCIe switch holds a multiple of {}",
                            s, per_nic, per_nic));
    }
    t.pci_switch_gpus = s;
  }
  if (topo.has("tiers")) {
    int below = 1;
    for (const YamlReader& tier : topo.items("tiers")) {
      tier.allowOnly({"name", "nodes", "oversubscription", "rail_optimized"});
      FabricTier f{tier.str("name"), static_cast<int>(tier.positiveInt("nodes", kMaxTierNodes)),
                   1.0};
      if (tier.has("oversubscription")) {
        f.oversubscription = tier.positiveDouble("oversubscription", kMaxOversubscription);
        if (f.oversubscription < 1) {
          tier.fail("oversubscription",
                    fmt::format("{:g}: must be >= 1 (down:up bandwidth)", f.oversubscription));
        }
      }
      if (f.nodes <= below) {
        tier.fail("nodes", fmt::format("{}: a tier must hold more nodes than the one below ({})",
                                       f.nodes, below));
      }
      if (tier.has("rail_optimized")) {
        f.rail_optimized = tier.boolean("rail_optimized");
        if (f.rail_optimized && !t.tiers.empty()) {
          tier.fail("rail_optimized", "only the bottom tier (the leaves) may be rail-optimised");
        }
        if (f.rail_optimized && !t.perGpuNics()) {
          tier.fail("rail_optimized",
                    "rails pair NIC i with rail switch i: needs topology.nic_affinity: per_gpu");
        }
      }
      below = f.nodes;
      t.tiers.push_back(f);
    }
  }
  if (topo.has("nccl")) {
    const YamlReader nccl = topo.child("nccl");
    nccl.allowOnly({"version", "gpu_arch", "cpu_vendor", "launch_us", "algorithm", "protocols",
                    "pxn_disable", "p2p_pxn_level", "cross_nic", "source", "intra", "net"});
    if (nccl.has("launch_us"))
      t.nccl.launch_us = nccl.nonNegativeDouble("launch_us", kMaxLatencyUs);
    if (nccl.has("version")) {
      // "2.23" .. "2.27": the releases whose tuning.cc constants modeler/network/nccl_estimate.cpp
      // holds (their ring/tree tables are the same; PAT and Blackwell differ by release).
      const std::string v = nccl.str("version");
      int minor = 0;
      char tail = 0;
      if (std::sscanf(v.c_str(), "2.%d%c", &minor, &tail) != 1 || minor < 23 || minor > 27) {
        nccl.fail("version",
                  fmt::format("'{}': eventsim holds NCCL's tuner tables of 2.23 to 2.27", v));
      }
      t.nccl.version_minor = minor;
    }
    if (nccl.has("gpu_arch")) {
      t.nccl.gpu_arch = readChoice<NcclGpuArch>(nccl, "gpu_arch",
                                                {{"volta", NcclGpuArch::kVolta},
                                                 {"ampere", NcclGpuArch::kAmpere},
                                                 {"hopper", NcclGpuArch::kHopper},
                                                 {"blackwell", NcclGpuArch::kBlackwell}});
    }
    if (nccl.has("cpu_vendor")) {
      t.nccl.cpu_amd = readChoice<bool>(nccl, "cpu_vendor", {{"intel", false}, {"amd", true}});
    }
    if (nccl.has("protocols")) {
      t.nccl.protocols.fill(false);
      for (const YamlReader& item : nccl.items("protocols")) {
        if (!item.node().IsScalar()) nccl.fail("protocols", "a list of ll, ll128, simple");
        const std::string name = item.node().as<std::string>();
        const auto* key = std::find_if(std::begin(kProtocolKeys), std::end(kProtocolKeys),
                                       [&](const char* k) { return name == k; });
        if (key == std::end(kProtocolKeys)) {
          nccl.fail("protocols", fmt::format("'{}': must be ll, ll128 or simple", name));
        }
        t.nccl.protocols[key - std::begin(kProtocolKeys)] = true;
      }
    }
    if (nccl.has("algorithm")) {
      const std::string a = nccl.str("algorithm");
      const auto& names = ncclAlgorithmNames();
      if (a != "auto" && std::find(names.begin(), names.end(), a) == names.end()) {
        nccl.fail(
            "algorithm",
            fmt::format("'{}': must be auto, ring, tree, nvls, nvls_tree, collnet or pat", a));
      }
      t.nccl.algorithm = a;
    }
    // NCCL's environment switches for PXN, with NCCL's values (config/network_topology.h).
    if (nccl.has("pxn_disable")) {
      t.nccl.pxn_disable = readChoice<bool>(nccl, "pxn_disable", {{"0", false}, {"1", true}},
                                            " (as NCCL_PXN_DISABLE)");
    }
    if (nccl.has("p2p_pxn_level")) {
      t.nccl.p2p_pxn_level = readChoice<int>(nccl, "p2p_pxn_level", {{"0", 0}, {"1", 1}, {"2", 2}},
                                             " (as NCCL_P2P_PXN_LEVEL)");
    }
    if (nccl.has("cross_nic")) {
      t.nccl.cross_nic = readChoice<int>(nccl, "cross_nic", {{"0", 0}, {"1", 1}, {"2", 2}},
                                         " (as NCCL_CROSS_NIC)");
    }
    if (nccl.has("source")) t.nccl.source = nccl.str("source");
    if (nccl.has("intra")) t.nccl.intra = readHop(nccl.child("intra"), kNcclNvlinkStepUs, false);
    if (nccl.has("net")) t.nccl.net = readHop(nccl.child("net"), kNcclNetStepUs, true);
  }
  return t;
}

}  // namespace evsim
