#pragma once
// The cluster's links as shared resources (network/link_sharing.h) for the representative devices
// the timing engine simulates (one per pipeline class and device stage; its TP ranks and the
// replicas of its class on the same node are symmetric copies), from the cluster topology
// (config/network_topology.h):
//   rank r nvlink tx / rx             the GPU's NVLink or PCIe ports, intra_link bandwidth;
//   node n nic tx / rx                nic_affinity pooled: the node's NICs, nics_per_node x
//                                     nic_bandwidth, one resource every GPU of the node shares;
//   node n nic i tx / rx              nic_affinity per_gpu: rail i, the NIC group of the node's
//                                     GPUs on rail i (NetworkTopology::railOf);
//   node n <tier> uplink [i] tx / rx  the node's (or its rail i's) share of an oversubscribed
//                                     tier's uplinks, the NICs' bandwidth / oversubscription
//                                     (symmetry: every node under the switch sends at once, as
//                                     fabric.h assumes for the standalone cost).
// Devices of several stages or classes on one node (on one rail, per_gpu) share its NIC and uplink
// resources. Per GPU, a device's copies count on its own rail only (the representative's NIC
// group): by symmetry the node's other rails carry their copies' equal load, and a device's copies
// on another representative's rail are not added to that rail (link_flows.h, limits).
//
// PXN (NCCL's send/recv through a NIC on the peer's rail, NCCL_P2P_PXN_LEVEL=2, its default;
// src/graph/search.cc ncclTopoGetNetDev, src/transport/net.cc): with per_gpu NICs and an NVSwitch,
// a send to a rank on another node leaves through the sender node's NIC nearest the GPU with the
// receiver's device index (the receiver's rail), driven by the first GPU of the communicator that
// uses that NIC (ncclTopoGetLocalGpu), the *intermediate*, when it is not the sender:
//   - the sender's kernel writes over NVLink into a buffer in the intermediate's memory, which that
//     NIC reads (GPUDirect RDMA): the sender's NVLink tx and the intermediate's NVLink rx (its
//     second NVLink hop, "rank R nvlink rx") carry it, then the intermediate's rail;
//   - the receive side has no PXN ("We don't support PXN on receive yet", recvSetup): the data
//     arrives through the receiver's own NIC, which is on the same rail, so no NVLink hop there;
//   - the intermediate must be a rank of the same communicator on the sender's node (NCCL's
//     topology holds only the communicator's GPUs): for a pipeline send, Megatron's batched P2P
//     (batch_isend_irecv) runs on the pipeline group's communicator, whose ranks on the node are
//     the pipeline's other stages there. Where that GPU is another pipeline's, the send leaves
//     through the sender's own NIC (and, on a rail-optimised bottom tier, crosses its uplinks).
// Without an NVSwitch a cross-rail send leaves through its own NIC and, on a rail-optimised bottom
// tier, crosses that tier's uplinks (its rail switch does not reach the receiver's rail).
// An all-to-all (grouped sends to every peer, on the expert group's communicator): each GPU's
// cross-node bytes to peers on another rail detour over NVLink through the group's GPU on that
// rail (alltoallNvlinkShare).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/network_topology.h"
#include "modeler/network/link_sharing.h"
#include "plan/iteration_plan.h"

namespace evsim {

struct LinkResource {
  enum Kind { kNvlink, kNic, kUplink };
  Kind kind = kNic;
  int64_t where = 0;  // kNvlink: the representative GPU's rank; else the node
  int tier = -1;      // kUplink: index into the topology's tiers
  bool tx = true;     // which direction (each is its own resource: links are full duplex)
  double capacity_bytes_per_us = 0;
  int rail = -1;  // kNic, kUplink with per_gpu NICs: the rail; -1: the node's pooled NICs
};

// "rank 17 nvlink tx", "node 3 nic rx", "node 3 nic 2 rx", "node 3 pod uplink tx",
// "node 3 pod uplink 2 tx".
std::string linkName(const NetworkTopology& topology, const LinkResource& resource);

// A node's NICs (pooled) or one of its rails (per_gpu), and its share of each tier's uplinks.
struct NicLinks {
  int nic_tx = -1, nic_rx = -1;
  // Per topology tier (bottom up): the uplink share, -1 where the tier is not oversubscribed.
  std::vector<int> uplink_tx, uplink_rx;
};

struct DeviceLinks : NicLinks {  // the NICs of its rail (pooled: of its node)
  int node = 0;      // of the class's first replica, TP rank 0
  int local = 0;     // that GPU's index on its node
  int rail = -1;     // per_gpu: the representative GPU's rail; -1: pooled NICs
  int rails = 1;     // per_gpu: the node's rails (min(NICs, GPUs)); 1 pooled
  float copies = 1;  // the node's GPUs that are copies of this device (same class and stage)
  // Of those, the ones whose traffic leaves through the NIC resource above: all of them (pooled),
  // or those on the representative's rail (per_gpu).
  float nic_copies = 1;
  int nvlink_tx = -1, nvlink_rx = -1;
};

// How a pipeline send between nodes leaves the sender's node (above).
struct SendRoute {
  int nic_node = 0, nic_rail = -1;  // the NIC resources it leaves through (LinkMap::nicsOf)
  int via_nvlink_rx = -1;           // PXN: the intermediate GPU's NVLink rx; -1: no PXN
  bool up_rail_tier = false;        // cross-rail without PXN on a rail-optimised bottom tier
  bool pxn() const { return via_nvlink_rx >= 0; }
};

struct LinkMap {
  std::vector<LinkResource> resources;
  std::vector<std::vector<DeviceLinks>> devices;  // per pipeline class, per device stage
  // Per pipeline class, per pipeline link: [2 l] the activation l -> l + 1, [2 l + 1] the
  // gradient back; meaningful for links whose send crosses nodes.
  std::vector<std::vector<SendRoute>> sends;
  // Per (node, rail) (rail -1: pooled): every NIC resource made, the representatives' own and
  // the rails PXN sends leave through.
  std::map<std::pair<int, int>, NicLinks> nics;
  std::vector<double> capacities() const;
  // The resources of `rail` on `node` (made by linkMap); Error if it made none.
  const NicLinks& nicsOf(int node, int rail) const;
};

LinkMap linkMap(const IterationPlan& plan);

// PXN's intermediate for a send from GPU `sender` of a node to a GPU with device index `receiver`
// on another node (above): the first GPU of the node on the receiver's rail that `in_comm` says is
// a rank of the communicator, or -1 when the send leaves through the sender's own NIC (no PXN: per
// GPU NICs and an NVSwitch needed; the receiver's index GPU not in the communicator; the
// intermediate is the sender itself).
template <typename InComm>
int pxnIntermediate(const NetworkTopology& topology, int gpus_per_node, int sender, int receiver,
                    InComm in_comm) {
  if (!topology.perGpuNics() || !topology.nvswitch || !in_comm(receiver)) return -1;
  const int rail = topology.railOf(receiver, gpus_per_node);
  for (int g = 0; g < gpus_per_node; ++g) {
    if (topology.railOf(g, gpus_per_node) == rail && in_comm(g)) return g == sender ? -1 : g;
  }
  return -1;
}

// The share of an all-to-all's bytes (linkBytes: what one GPU sends to all its peers) that each
// direction of a GPU's NVLink carries, for `p` on a node of `d`'s kind: the peers on its own node,
// (rpn - 1) / (n - 1), and with PXN the cross-node bytes, (n - rpn) / (n - 1), to peers on another
// rail, which go to the group's GPU on that rail first. The group's rpn GPUs on a node are taken
// to sit on m = min(rpn, rails) rails and its peers elsewhere on the same indices (Megatron's
// order spreads a group's ranks evenly over a node), so (m - 1) / m of the cross-node bytes
// detour out over the sender's NVLink, and by symmetry as much comes in to each GPU as an
// intermediate.
double alltoallNvlinkShare(const NetworkTopology& topology, const DeviceLinks& d,
                           const Placement& p);

}  // namespace evsim
