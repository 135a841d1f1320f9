#pragma once
// How NCCL's ring and tree channels of a group over several nodes pass through each node, with
// per-GPU NICs (config/network_topology.h: nic_affinity per_gpu), by NCCL_CROSS_NIC and PXN
// (topology.nccl.cross_nic, pxn_disable). Read from NCCL's graph search (NVIDIA/nccl master,
// src/graph/search.cc: ncclTopoCompute's crossNic, ncclTopoSearchRecNet, ncclTopoSearchRecGpu,
// ncclTopoSearchCheckNet; src/graph/paths.cc: the GPU -> NET PXN paths of ncclTopoComputePaths).
//
// A channel comes in through NIC n to the GPU beside it, visits the group's rpn GPUs on the node
// over NVLink (rpn - 1 hops), and its last GPU x hands it to the NIC it leaves by; node i's
// leaving NIC sends to node i+1's entry NIC (every node runs the same graph).
//   - Rail-local (crossNic 0, where ncclTopoSearchCheckNet wants the same rail; and 2, NCCL's
//     default, whose search tries crossNic 0 first and keeps it when it reaches full bandwidth):
//     the channel leaves by NIC n again. x reaches n through PXN where NVLink does and PXN is on
//     (paths.cc makes GPU -> NET PXN paths unless NCCL_PXN_DISABLE; "[PXN] can also be used to
//     close rings", NVIDIA/nccl#2193): x writes over NVLink into n's GPU, so every GPU's NVLink
//     carries each channel both ways, as a ring closed inside the node (what eventsim charged
//     before it modelled the choice). Without PXN, x reaches n over PCIe, through their switch or
//     through the host: rpn - 1 of the rpn hops are NVLink. (Where x is under n's PCIe switch and
//     PXN is on, NCCL's search may also close through the switch, a lower path type, at the same
//     bandwidth: a tie eventsim does not settle; it keeps PXN.)
//   - Cross-NIC (crossNic 1: the search puts no constraint on the leaving NIC and lists x's own,
//     the nearest, first; crossNic 2 where no channel closes on its NIC without crossing the host:
//     no PXN, and no two of the group's GPUs under one PCIe switch. The search then pairs
//     channels n -> x and x -> n, as NVIDIA/nccl#1189's log with NCCL_PXN_DISABLE=1 on an
//     NVSwitch node shows: "NET/3 GPU/0 GPU/1 NET/2", "NET/2 GPU/1 GPU/0 NET/3"): x sends
//     through its own NIC, no NVLink hop out, and between nodes every channel goes from rail x to
//     rail n: on a rail-optimised bottom tier, up that tier's uplinks and back down.
// Where the group has several GPUs behind one NIC (rpn > rails), x can share the entry NIC
// directly and every setting stays rail-local. The group's GPUs are taken to spread evenly over
// the node (Megatron's order gives a group that spans nodes a stride of G / rpn GPUs), so two of
// them share a PCIe switch iff rpn x pci_rails > rails. NCCL_P2P_PXN_LEVEL does not apply (a
// graph's NIC is the graph's, ncclTopoGetNetDev).
// Pooled NICs, one rank per node, or one node: the ring as it was (NVLink share 1, no rail).
//
// Trees keep their rail under every NCCL_CROSS_NIC and PXN setting (treeChannels). NCCL builds the
// tree graph with NCCL_TOPO_PATTERN_BALANCED_TREE (src/init.cc), and on sm90+ may retry it as
// NCCL_TOPO_PATTERN_TREE (search.cc, ncclTopoCompute: "Try a simpler tree"). For both,
// ncclTopoSearchParams sets backToNet = 0: the channel's first GPU a, the one the search enters
// from NIC n (ncclTopoSearchRecNet tries n's localGpu first), is the one that goes back to a NIC,
// and ncclTopoSearchRecGpu picks that NIC from ncclTopoSelectNets(.., a, ..), which lists a's own
// NICs first (ncclTopoPrefNetsChannelFirst): n again, whatever crossNic allows (crossNic only
// widens ncclTopoSearchCheckNet's test; the first NIC that passes and has the bandwidth is kept,
// and n's GPU -> NET direction is unused by the channel). PATTERN_TREE goes further and refuses
// any other NIC ("Trees are symmetric", ncclTopoSearchCheckNet). The balanced tree's second GPU b
// (its second child) must use that same NIC (ncclTopoSearchCheckNet, step != 0), through PXN or
// PCIe: so both NIC ends of the channel, graph->inter[2c] and inter[2c + 1], are n, and
// ncclTopoGetNetDev gives every rank of the channel one of the two. Every node runs the same
// graph, so channel c's parent and child edges between nodes (connect.cc: treeToParent,
// treeToChild0/1 at intra[0] and intra[1]) all go rail n -> rail n: a rail-optimised tier's
// uplinks are not crossed by the tree, where a cross-NIC ring's channels cross them.
// Its NVLink share is left as the ring rule's (an approximation; the chain and the PXN hop of the
// second child are not traced per GPU).

#include "config/network_topology.h"
#include "events/event.h"

namespace evsim {

struct RingChannels {
  double nvlink = 1;        // of the bytes, on each direction of each GPU's NVLink (rpn > 1)
  bool cross_rail = false;  // each channel between nodes goes from one rail to another
};

// For a group over `p` on a node with `rails` rails (per-GPU NIC groups), `pci_rails` of them
// under one PCIe switch (NetworkTopology::rails, pciSwitchRails).
RingChannels ringChannels(const NetworkTopology& topology, int rails, int pci_rails,
                          const Placement& p);
// The same for NCCL's tree (all-reduce): the ring's NVLink share, and never a change of rail.
RingChannels treeChannels(const NetworkTopology& topology, int rails, int pci_rails,
                          const Placement& p);

}  // namespace evsim
