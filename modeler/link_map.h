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
// PXN (NCCL's send/recv through a NIC on the peer's rail, NCCL_P2P_PXN_LEVEL=2, its default):
// with per_gpu NICs and an NVSwitch, a pipeline send to a GPU on another rail first crosses NVLink
// to the sender node's GPU on the receiver's rail and leaves through that GPU's NIC, so it loads
// that rail, not the sender's; linkMap makes those resources too. Without an NVSwitch a cross-rail
// send leaves through its own NIC and, on a rail-optimised bottom tier, crosses that tier's uplinks
// (its rail switch does not reach the receiver's rail).

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
  int rail = -1;     // per_gpu: the representative GPU's rail; -1: pooled NICs
  float copies = 1;  // the node's GPUs that are copies of this device (same class and stage)
  // Of those, the ones whose traffic leaves through the NIC resource above: all of them (pooled),
  // or those on the representative's rail (per_gpu).
  float nic_copies = 1;
  int nvlink_tx = -1, nvlink_rx = -1;
};

struct LinkMap {
  std::vector<LinkResource> resources;
  std::vector<std::vector<DeviceLinks>> devices;  // per pipeline class, per device stage
  // Per (node, rail) (rail -1: pooled): every NIC resource made, the representatives' own and
  // the rails PXN sends leave through.
  std::map<std::pair<int, int>, NicLinks> nics;
  std::vector<double> capacities() const;
  // The resources of `rail` on `node` (made by linkMap); Error if it made none.
  const NicLinks& nicsOf(int node, int rail) const;
};

LinkMap linkMap(const IterationPlan& plan);

// Whether a pipeline send from `from` to `to` on another node leaves through the sender node's
// NIC on the receiver's rail (PXN, above).
bool pxnSend(const NetworkTopology& topology, const DeviceLinks& from, const DeviceLinks& to);

}  // namespace evsim
