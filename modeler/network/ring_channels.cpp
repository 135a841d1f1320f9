// How NCCL's ring and tree channels pass through a node; ring_channels.h states the rule.
#include "modeler/network/ring_channels.h"

#include <cstdint>

namespace evsim {

RingChannels ringChannels(const NetworkTopology& topology, int rails, int pci_rails,
                          const Placement& p) {
  RingChannels out;
  const int rpn = p.ranks_per_node;
  if (!topology.perGpuNics() || rpn <= 1 || p.nodes <= 1) return out;
  const double open_ring = (rpn - 1.0) / rpn;  // the NVLink hops of a chain of rpn GPUs
  // Several of the group's GPUs behind one NIC: the last GPU leaves by the entry NIC (PIX).
  if (rpn > rails) {
    out.nvlink = open_ring;
    return out;
  }
  // Two of the group's GPUs under one PCIe switch (a stride of rails / rpn rails, fewer than
  // the switch's): the last GPU reaches the entry NIC through it (PXB), not through the host.
  const bool same_switch = int64_t{rpn} * pci_rails > rails;
  const bool pxn = topology.nvswitch && !topology.nccl.pxn_disable;
  const int cross_nic = topology.nccl.cross_nic;
  if (cross_nic == 1 || (cross_nic == 2 && !pxn && !same_switch)) {
    out.nvlink = open_ring;
    out.cross_rail = true;
  } else if (!pxn) {
    out.nvlink = open_ring;  // rail-local through the PCIe switch or the host
  }
  return out;
}

RingChannels treeChannels(const NetworkTopology& topology, int rails, int pci_rails,
                          const Placement& p) {
  RingChannels out = ringChannels(topology, rails, pci_rails, p);
  out.cross_rail = false;  // the tree's NIC is its entry NIC (ring_channels.h, search.cc)
  return out;
}

}  // namespace evsim
