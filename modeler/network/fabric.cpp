// Mapping a group onto the fabric; fabric.h states the rules.
#include "modeler/network/fabric.h"

#include <algorithm>

#include "modeler/network/ring_channels.h"

namespace evsim {

const NetworkTopology& topologyOf(const ClusterConfig& cluster, NetworkTopology& scratch) {
  if (cluster.topology.nics_per_node > 0) return cluster.topology;
  scratch = derivedNetworkTopology(cluster.gpus_per_node, cluster.intra_link.latency_us,
                                   cluster.network.bandwidth_gb_s, cluster.network.latency_us);
  return scratch;
}

GroupOnFabric mapGroup(const ClusterConfig& cluster, const NetworkTopology& topology,
                       const Placement& placement) {
  GroupOnFabric g;
  g.ranks = placement.group_size;
  g.nodes = placement.nodes;
  g.ranks_per_node = placement.ranks_per_node;
  g.intra_bw_gb_s = cluster.intra_link.bandwidth_gb_s;
  g.nvswitch = topology.nvswitch;
  g.nvls = topology.nvls;
  g.sharp = topology.sharp;
  g.tuning = &topology.nccl;
  g.crossed = placement.nodes > 1 ? "network" : "node";
  // A profile's placement may hold more ranks per node than this cluster has GPUs: cap at 1.
  const double share = std::min(1.0, double(placement.ranks_per_node) / cluster.gpus_per_node);
  const double node_nic_gb_s = topology.nic_bandwidth_gb_s * topology.nics_per_node;
  if (placement.nodes > 1) {
    for (const FabricTier& tier : topology.tiers) {
      const bool crosses =
          topology.placement == JobPlacement::kScattered || placement.nodes > tier.nodes;
      if (!crosses) break;
      g.crossed = tier.name;
      g.oversubscription = std::max(g.oversubscription, tier.oversubscription);
    }
  }
  g.net_bw_gb_s = node_nic_gb_s * share / g.oversubscription;
  g.ring_net_bw_gb_s = g.net_bw_gb_s;
  // Channels that change rail go up a rail-optimised leaf the group would otherwise stay under.
  if (placement.nodes > 1 && topology.railOptimized()) {
    const FabricTier& leaf = topology.tiers.front();
    const bool under_leaf =
        topology.placement != JobPlacement::kScattered && placement.nodes <= leaf.nodes;
    const int G = cluster.gpus_per_node;
    if (under_leaf && leaf.oversubscription > 1 &&
        ringChannels(topology, topology.rails(G), topology.pciSwitchRails(G), placement)
            .cross_rail) {
      g.ring_net_bw_gb_s =
          node_nic_gb_s * share / std::max(g.oversubscription, leaf.oversubscription);
    }
  }
  return g;
}

}  // namespace evsim
