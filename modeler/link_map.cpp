// The cluster's links as resources for the representative devices; link_map.h states the model.
#include "modeler/link_map.h"

#include <algorithm>

#include "common/error.h"
#include "fmt/format.h"
#include "plan/rank_layout.h"
#include "plan/task_graph.h"

namespace evsim {

namespace {

constexpr double kBytesPerUsPerGbS = 1e3;  // 1 GB/s = 1e9 bytes/s = 1e3 bytes/us

}  // namespace

std::string linkName(const NetworkTopology& topology, const LinkResource& r) {
  const char* dir = r.tx ? "tx" : "rx";
  const std::string rail = r.rail >= 0 ? fmt::format(" {}", r.rail) : std::string();
  switch (r.kind) {
    case LinkResource::kNvlink:
      return fmt::format("rank {} nvlink {}", r.where, dir);
    case LinkResource::kNic:
      return fmt::format("node {} nic{} {}", r.where, rail, dir);
    default:
      return fmt::format("node {} {} uplink{} {}", r.where, topology.tiers[r.tier].name, rail, dir);
  }
}

std::vector<double> LinkMap::capacities() const {
  std::vector<double> out;
  out.reserve(resources.size());
  for (const LinkResource& r : resources) out.push_back(r.capacity_bytes_per_us);
  return out;
}

const NicLinks& LinkMap::nicsOf(int node, int rail) const {
  const auto it = nics.find({node, rail});
  EVSIM_CHECK(it != nics.end(), "no NIC resources for node {} rail {}", node, rail);
  return it->second;
}

AlltoallShares alltoallShares(const NetworkTopology& topology, const DeviceLinks& d,
                              const Placement& p) {
  AlltoallShares out;
  const double peers = std::max(1, p.group_size - 1);
  if (p.ranks_per_node > 1) out.nvlink = (p.ranks_per_node - 1) / peers;
  if (!topology.perGpuNics() || d.rail < 0 || p.ranks_per_node <= 1 || p.nodes <= 1) return out;
  const int m = std::min(p.ranks_per_node, d.rails);
  const double cross = (p.group_size - p.ranks_per_node) / peers;
  const int level = topology.nccl.pxnLevel();
  // The group's other rails the cross-node bytes go to directly over PCIe (level 1: those under
  // the sender's switch), and the rest: over NVLink through PXN, or out through its own rail.
  const int direct = level == 1 ? std::max(1, d.pci_rails * m / std::max(1, d.rails)) - 1 : 0;
  const double rest = cross * (m - 1 - direct) / m;
  if (level > 0 && topology.nvswitch) {
    out.nvlink += rest;
  } else if (topology.nccl.cross_nic != 0) {
    out.up_rail_tier = rest;
  }  // crossNic 0: the peer's-rail NIC directly over PCIe (p2pNic), on the peer's rail
  return out;
}

double alltoallNvlinkShare(const NetworkTopology& topology, const DeviceLinks& d,
                           const Placement& p) {
  return alltoallShares(topology, d, p).nvlink;
}

void checkSharedTiers(const ClusterConfig& cluster) {
  // A flow holds its uses inline (link_sharing.h): NVLink and NICs both ways, and each
  // oversubscribed tier's uplinks both ways.
  const std::vector<FabricTier>& tiers = cluster.topology.tiers;
  const auto over = std::count_if(tiers.begin(), tiers.end(),
                                  [](const FabricTier& t) { return t.oversubscription > 1; });
  if (4 + 2 * over > LinkUses::kMax) {
    EVSIM_THROW(InputError,
                "{}: topology.tiers: {} oversubscribed tiers, link sharing models at most {}",
                cluster.name, over, (LinkUses::kMax - 4) / 2);
  }
}

std::vector<std::vector<int>> deviceNodes(const IterationPlan& plan) {
  const RankLayout layout = plan.layout();
  std::vector<std::vector<int>> nodes(plan.pipelines.size());
  for (size_t k = 0; k < plan.pipelines.size(); ++k) {
    const int replica = plan.pipelines[k].replicas.front();
    for (int s = 0; s < plan.deviceStages(); ++s) {
      nodes[k].push_back(layout.node(layout.rank(0, replica, s)));  // as linkMap's DeviceLinks
    }
  }
  return nodes;
}

LinkMap linkMap(const IterationPlan& plan) {
  const ClusterConfig& cluster = plan.cluster;
  const NetworkTopology& topology = cluster.topology;
  const RankLayout layout = plan.layout();
  const int P = plan.deviceStages();
  const int G = cluster.gpus_per_node;
  const bool per_gpu = topology.perGpuNics();
  const double pooled = topology.nics_per_node > 0
                            ? topology.nics_per_node * topology.nic_bandwidth_gb_s
                            : cluster.network.bandwidth_gb_s;
  const double nic = per_gpu ? topology.railBandwidthGbS(G) : pooled;
  LinkMap map;
  auto add = [&](LinkResource::Kind kind, int64_t where, int tier, bool tx, double gb_s,
                 int rail) {
    map.resources.push_back({kind, where, tier, tx, gb_s * kBytesPerUsPerGbS, rail});
    return static_cast<int>(map.resources.size()) - 1;
  };
  // The NIC and uplink resources of `node`'s `rail` (-1: its pooled NICs), made once.
  auto nicsOf = [&](int node, int rail) -> const NicLinks& {
    auto [it, fresh] = map.nics.try_emplace({node, rail});
    NicLinks& n = it->second;
    if (fresh) {
      n.nic_tx = add(LinkResource::kNic, node, -1, true, nic, rail);
      n.nic_rx = add(LinkResource::kNic, node, -1, false, nic, rail);
      for (size_t t = 0; t < topology.tiers.size(); ++t) {
        const double over = topology.tiers[t].oversubscription;
        const int tier = static_cast<int>(t);
        n.uplink_tx.push_back(
            over > 1 ? add(LinkResource::kUplink, node, tier, true, nic / over, rail) : -1);
        n.uplink_rx.push_back(
            over > 1 ? add(LinkResource::kUplink, node, tier, false, nic / over, rail) : -1);
      }
    }
    return n;
  };
  std::vector<int> class_of(plan.strategy.dp, 0);
  for (size_t k = 0; k < plan.pipelines.size(); ++k) {
    for (int r : plan.pipelines[k].replicas) class_of[r] = static_cast<int>(k);
  }
  checkSharedTiers(cluster);
  map.devices.resize(plan.pipelines.size());
  for (size_t k = 0; k < plan.pipelines.size(); ++k) {
    const int replica = plan.pipelines[k].replicas.front();
    for (int s = 0; s < P; ++s) {
      const int64_t rank = layout.rank(0, replica, s);
      const int node = layout.node(rank);
      const int rail = per_gpu ? topology.railOf(static_cast<int>(rank % G), G) : -1;
      DeviceLinks d;
      static_cast<NicLinks&>(d) = nicsOf(node, rail);
      d.node = node;
      d.local = static_cast<int>(rank % G);
      d.rail = rail;
      d.rails = per_gpu ? topology.rails(G) : 1;
      d.pci_rails = per_gpu ? topology.pciSwitchRails(G) : 1;
      d.copies = 0;
      d.nic_copies = 0;
      const int64_t first = int64_t{node} * G;
      for (int64_t r = first; r < first + G; ++r) {
        const RankCoord c = layout.coord(r);
        if (c.pp != s || class_of[c.dp] != static_cast<int>(k)) continue;
        d.copies += 1;
        if (!per_gpu || topology.railOf(static_cast<int>(r - first), G) == rail) d.nic_copies += 1;
      }
      d.copies = std::max(1.0f, d.copies);
      d.nic_copies = std::max(1.0f, d.nic_copies);
      const double nvlink = cluster.intra_link.bandwidth_gb_s;
      d.nvlink_tx = add(LinkResource::kNvlink, rank, -1, true, nvlink, -1);
      d.nvlink_rx = add(LinkResource::kNvlink, rank, -1, false, nvlink, -1);
      map.devices[k].push_back(std::move(d));
    }
  }
  // Each pipeline send between nodes: the NIC it leaves through and PXN's intermediate
  // (link_map.h). The intermediate's NVLink rx is its device's where it represents one, else a
  // resource of its own ("rank R nvlink rx").
  std::map<int64_t, int> nvlink_rx_of;
  for (size_t k = 0; k < plan.pipelines.size(); ++k) {
    for (int s = 0; s < P; ++s) {
      nvlink_rx_of[layout.rank(0, plan.pipelines[k].replicas.front(), s)] =
          map.devices[k][s].nvlink_rx;
    }
  }
  const PipelineLayout pipeline_layout = plan.pipelineLayout();
  const int64_t world = plan.strategy.gpus();
  map.sends.resize(plan.pipelines.size());
  for (size_t k = 0; k < plan.pipelines.size(); ++k) {
    const int replica = plan.pipelines[k].replicas.front();
    const size_t links = plan.pipelines[k].forward_p2p.size();
    map.sends[k].resize(2 * links);
    for (size_t l = 0; l < links; ++l) {
      for (const Send send : {Send::kActivation, Send::kGradient}) {
        const int link = static_cast<int>(l);
        const bool forward = send == Send::kActivation;
        const int from_stage = pipeline_layout.device(forward ? link : link + 1);
        const DeviceLinks& from = map.devices[k][from_stage];
        const DeviceLinks& to = map.devices[k][pipeline_layout.device(linkReceiver(send, link))];
        SendRoute& route = map.sends[k][2 * l + (forward ? 0 : 1)];
        route.nic_node = from.node;
        route.nic_rail = from.rail;
        if (from.node == to.node || !per_gpu) continue;  // pooled: the node's NICs
        // The pipeline group's communicator: the ranks of the sender's pipeline (its TP, CP and
        // DP indices) on the sender's node.
        const RankCoord me = layout.coord(layout.rank(0, replica, from_stage));
        auto in_comm = [&](int g) {
          const int64_t r = int64_t{from.node} * G + g;
          if (r >= world) return false;
          const RankCoord c = layout.coord(r);
          return c.tp == me.tp && c.cp == me.cp && c.dp == me.dp;
        };
        // The NIC it leaves through (p2pNic: its own, the receiver's rail directly over PCIe,
        // or the receiver's rail through PXN's proxy), and whether it then needs another rail.
        const P2pNic nic = p2pNic(topology, G, from.local, to.local, in_comm);
        route.nic_rail = nic.rail;
        route.up_rail_tier = nic.rail != to.rail && topology.railOptimized();
        if (nic.rail != from.rail) nicsOf(from.node, nic.rail);
        if (nic.proxy < 0) continue;
        const int64_t via_rank = int64_t{from.node} * G + nic.proxy;
        auto [it, fresh] = nvlink_rx_of.try_emplace(via_rank, -1);
        if (fresh) {
          it->second = add(LinkResource::kNvlink, via_rank, -1, false,
                           cluster.intra_link.bandwidth_gb_s, -1);
        }
        route.via_nvlink_rx = it->second;
      }
    }
  }
  return map;
}

}  // namespace evsim
