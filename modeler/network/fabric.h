#pragma once
// Where a communication group sits on the cluster's network (config/network_topology.h): its
// ranks, nodes and ranks per node, the links its traffic crosses, and the bandwidth those links
// leave it. The collective algorithms (algorithm.h) cost a collective from this alone.
//
// Bandwidth a group gets (GB/s, one direction):
//   intra: each GPU's NVLink / PCIe link (intra_link.bandwidth_gb_s);
//   net:   the group's share of each node's NICs, network * min(1, ranks_per_node / gpus_per_node)
//          (the node's other GPUs run their own groups' collectives at the same time, each over
//          its own NICs), divided by the oversubscription of the most oversubscribed fabric tier
//          the group crosses: with every node's traffic crossing at once (the DP all-reduce of
//          every replica, an all-to-all), an uplink that is s:1 oversubscribed leaves 1/s.
// Rings whose channels change rail between nodes (NCCL_CROSS_NIC, ring_channels.h) also cross a
// rail-optimised bottom tier's uplinks (ring_net_bw_gb_s); trees keep their rail (treeChannels).
// Tiers crossed: with contiguous placement a group over k nodes stays under one switch group of a
// tier holding >= k nodes and crosses the uplinks of every tier below it; with scattered placement
// any group over more than one node may cross every tier.

#include <string>

#include "config/cluster_config.h"
#include "events/event.h"

namespace evsim {

struct GroupOnFabric {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;
  double intra_bw_gb_s = 0;     // per GPU
  double net_bw_gb_s = 0;       // the group's share of one node's NICs, after oversubscription
  // What a ring's channels get across nodes: net_bw_gb_s, but where they change rail
  // (ring_channels.h: NCCL_CROSS_NIC) on a rail-optimised bottom tier the group does not cross by
  // its node count, that tier's oversubscription applies too (every channel goes up and down it).
  double ring_net_bw_gb_s = 0;
  double oversubscription = 1;  // of the highest tier crossed (1: none or non-blocking)
  std::string crossed;          // "node", "network" (one switch), or the highest tier's name
  bool nvswitch = false;
  bool nvls = false;
  bool sharp = false;
  const NcclTuning* tuning = nullptr;  // the cluster's (outlives this)
};

// The cluster's topology; a ClusterConfig built in code (no loader) gets the derived one.
const NetworkTopology& topologyOf(const ClusterConfig& cluster, NetworkTopology& scratch);

GroupOnFabric mapGroup(const ClusterConfig& cluster, const NetworkTopology& topology,
                       const Placement& placement);

}  // namespace evsim
