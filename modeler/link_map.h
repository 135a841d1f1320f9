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
// PXN (NCCL's send/recv through a NIC on the peer's rail; src/graph/search.cc ncclTopoGetNetDev,
// src/transport/net.cc). At NCCL_P2P_PXN_LEVEL=2, its default (p2pNic below has levels 0 and 1,
// and NCCL_PXN_DISABLE): with per_gpu NICs and an NVSwitch,
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
  int pci_rails = 1;  // per_gpu: the rails under one PCIe switch (its own among them)
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
// The node of each pipeline class's device stages (DeviceLinks::node, per class and stage) without
// the rest of the map: whether two simulated devices share a node decides whether a plan may
// share links at all (link_flows.cpp), before the map is worth building.
std::vector<std::vector<int>> deviceNodes(const IterationPlan& plan);
// Error where the cluster's oversubscribed tiers need more uses a flow than LinkUses holds
// (linkMap checks it too).
void checkSharedTiers(const ClusterConfig& cluster);

// The NIC a send from GPU `sender` of a node to a GPU with device index `receiver` on another node
// leaves through, as NCCL's ncclTopoGetNetDev picks it for send/recv (no graph): `rail` (the
// sender's own, or the receiver's) and PXN's `proxy`, the GPU of the node beside that NIC whose
// memory the sender writes into over NVLink, or -1 (no NVLink hop). `in_comm(g)` says whether
// local GPU g is a rank of the send's communicator (NCCL's topology holds only those). Per GPU NICs
// only (pooled: the node's NICs, rail meaningless). By topology.nccl.pxnLevel():
//   0 (or NCCL_PXN_DISABLE=1): the sender's own NIC;
//   1: where the receiver's index GPU is in the communicator, its NIC: directly over PCIe when
//      it is under the sender's PCIe switch (a path of type PXB or better, which NCCL takes
//      as is), else through PXN when NVLink reaches that NIC's first GPU (paths.cc makes a PXN
//      path only where the sender's own would cross the CPU), else the sender's own NIC;
//   2 (NCCL's default): with NVLink, PXN through the first communicator GPU on the receiver's
//      rail (none when that is the sender: its own NIC); without NVLink its own NIC.
// With NCCL_CROSS_NIC=0 (topology.nccl.cross_nic) "its own NIC" above becomes the receiver's-rail
// NIC, reached directly over PCIe (through the host where it is not under the sender's switch; no
// proxy, no NVLink hop): ncclTopoGetNetDev takes that NIC first whenever crossNic is 0, at every
// PXN level ("if (ncclParamCrossNic() == 0) { *dev = netDev; }"), and PXN then only adds a proxy.
// The receiver's index GPU outside the communicator still leaves through the sender's own NIC
// (ncclTopoDevToRank fails first: the corner case NCCL's docs say may still cross rails).
struct P2pNic {
  int rail = -1;
  int proxy = -1;
};
template <typename InComm>
P2pNic p2pNic(const NetworkTopology& topology, int gpus_per_node, int sender, int receiver,
              InComm in_comm) {
  const int G = gpus_per_node;
  const P2pNic own{topology.railOf(sender, G), -1};
  const int level = topology.nccl.pxnLevel();
  const bool same_rail_nic = topology.nccl.cross_nic == 0;
  if (!topology.perGpuNics() || (level == 0 && !same_rail_nic) || !in_comm(receiver)) return own;
  const int rail = topology.railOf(receiver, G);
  const P2pNic fallback = same_rail_nic ? P2pNic{rail, -1} : own;
  if (level == 0) return fallback;
  if (level == 1 && topology.samePciSwitch(sender, receiver, G)) return P2pNic{rail, -1};
  if (!topology.nvswitch) return fallback;
  for (int g = 0; g < G; ++g) {
    if (topology.railOf(g, G) == rail && in_comm(g)) return P2pNic{rail, g == sender ? -1 : g};
  }
  return fallback;
}

// PXN's intermediate (p2pNic's proxy): a local GPU, or -1 when no NVLink hop is taken.
template <typename InComm>
int pxnIntermediate(const NetworkTopology& topology, int gpus_per_node, int sender, int receiver,
                    InComm in_comm) {
  return p2pNic(topology, gpus_per_node, sender, receiver, in_comm).proxy;
}

// An all-to-all (grouped sends to every peer, each picking its NIC as p2pNic does) of `p` from a
// GPU on a node of `d`'s kind, as shares of its bytes (linkBytes: what one GPU sends to all its
// peers). Its own node's peers take (rpn - 1) / (n - 1) over NVLink; the cross-node bytes,
// (n - rpn) / (n - 1), go to peers on m = min(rpn, rails) rails, (m - 1) / m of them on another
// rail than the sender's. Those leave through the NIC on the peer's rail, over NVLink into the
// group's GPU there first (PXN: more NVLink each way; by symmetry as much comes in to each GPU as
// an intermediate) or, at PXN level 1, directly over PCIe for the rails under the sender's PCIe
// switch; or, with PXN off or no NVLink, through the sender's own rail, which on a rail-optimised
// bottom tier crosses that tier's uplinks (its rail switch does not reach the peer's rail).
// The group's GPUs on a node are taken to spread evenly over its rails (Megatron's order gives an
// all-to-all group that spans nodes a stride of tp x cp over the whole node), s = max(1,
// pci_rails x m / rails) of them under the sender's switch. Either way rail j carries every local
// GPU's bytes to rail-j peers, as much as one GPU's own cross-node bytes: the NIC loads stay.
// With NCCL_CROSS_NIC=0 those that would leave through the sender's own rail go to the peer's-rail
// NIC directly over PCIe instead (p2pNic): neither NVLink nor the rail tier's uplinks.
struct AlltoallShares {
  double nvlink = 0;        // of the bytes, on each direction of the GPU's NVLink
  double up_rail_tier = 0;  // of the bytes, leaving through its own rail for another rail
};
AlltoallShares alltoallShares(const NetworkTopology& topology, const DeviceLinks& d,
                              const Placement& p);
// Its NVLink share alone (alltoallShares().nvlink).
double alltoallNvlinkShare(const NetworkTopology& topology, const DeviceLinks& d,
                           const Placement& p);

}  // namespace evsim
