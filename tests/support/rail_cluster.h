#pragma once
// The small cluster the rail and PXN tests (rail_test.cpp, pxn_level_test.cpp) trace by hand:
// `gpus` GPUs per node (fp16 100 TFLOP/s), NVLink 100 GB/s, `nics` NICs sharing 10 GB/s a node,
// and `topology` lines under `topology:` after the NIC keys; and the four-stage pipeline on two
// such nodes of two GPUs whose sends they follow.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "modeler/link_flows.h"
#include "modeler/link_map.h"
#include "modeler/link_usage.h"
#include "modeler/network/link_sharing.h"
#include "modeler/simulation.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim::test {

// A topology section's lines for NVSwitch nodes whose GPUs each have a NIC of their own (rails).
inline constexpr const char* kPerGpu = "  nvswitch: true\n  nic_affinity: per_gpu\n";

inline ClusterConfig railCluster(int gpus, int nics, const std::string& topology) {
  return parseClusterConfig(
      "name: rails\nnode:\n  gpus: " + std::to_string(gpus) +
          "\n  device: {name: T, peak_tflops: {fp16: 100, fp32: 20}, memory_bandwidth_gb_s: 1000,"
          " memory_gib: 40}\n"
          "  intra_link: {name: NVLink, bandwidth_gb_s: 100, latency_us: 2}\n"
          "network: {name: IB, bandwidth_gb_s: 10, latency_us: 5}\n"
          "topology:\n  nics_per_node: " +
          std::to_string(nics) + "\n" + topology,
      "rails.yaml");
}

// The error railCluster's file gets, or "accepted".
inline std::string topologyError(int gpus, int nics, const std::string& topology) {
  try {
    railCluster(gpus, nics, topology);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

// 1M4P1D of test::model(64, 4, 256, 32, 512, 4, "fp16") on two nodes of two GPUs (railCluster(2,
// 2, topology)), every event 1 us, m = 1: stage s is rank s, on node s / 2, local GPU s % 2, so
// the send from stage 1 (node 0, GPU 1) to stage 2 (node 1, GPU 0) crosses rails 1 -> 0. Its flows,
// with `map` set to the plan's link map.
inline TimelineFlows fourStageFlows(const std::string& topology, LinkMap& map) {
  const IterationPlan plan =
      buildIterationPlan(model(64, 4, 256, 32, 512, 4, "fp16"), railCluster(2, 2, topology),
                         Strategy::of(1, 4, 1, 1, 1));
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  const Simulation sim = simulate(plan, costs);
  map = linkMap(sim.plan);
  return timelineFlows(sim.plan, sim.costs, sim.offsets, sim.input, sim.timeline, map);
}

// The first pipeline send of device stage `stage` in `flows`.
inline SharedFlow firstSendOf(const TimelineFlows& flows, int stage) {
  for (size_t i = 0; i < flows.size(); ++i) {
    const TimelineFlows::Origin o = flows.origin(i);
    if (o.kind == FlowKind::kPp && o.stage == stage) return flows.flow(i);
  }
  ADD_FAILURE() << "no send from stage " << stage;
  return SharedFlow{};
}

// `send` (a flow of fourStageFlows) as 1000 bytes in 0.2 us from 0 (5e3 bytes/us, its rail's
// rate), beside a flow of 2e4 bytes in 0.2 us (1e5 bytes/us: a whole NVLink port) into the
// NVLink rx `nvlink_rx` at the same time, shared on `map`'s links: [0] the send, [1] the other.
inline SharingResult sendBesideNvlinkRx(SharedFlow send, int nvlink_rx, const LinkMap& map) {
  send.start_us = 0;
  send.duration_us = 0.2;
  send.bytes = 1000;
  const std::vector<SharedFlow> both{send, SharedFlow{0, 0.2, 2e4, {{nvlink_rx, 1}}}};
  return shareLinks(both, map.capacities());
}

// A device by hand for an in-task flow (inTaskFlow) on resources 0 .. 3: NVLink tx, rx, its NIC
// tx, rx; local GPU 0, rail 0 of `rails`.
inline DeviceLinks handDevice(int rails) {
  DeviceLinks d;
  d.nvlink_tx = 0;
  d.nvlink_rx = 1;
  d.nic_tx = 2;
  d.nic_rx = 3;
  d.rail = 0;
  d.rails = rails;
  d.local = 0;
  return d;
}

// A flow's (resource, copies) pairs, in order.
using Uses = std::vector<std::pair<int, float>>;
inline Uses usesOf(const SharedFlow& f) {
  Uses out;
  for (const LinkUse& u : f.uses) out.emplace_back(u.resource, u.copies);
  return out;
}

// The bytes of the link named `link` in a simulation of `strategy` on test::model's tiny GPT over
// two railCluster nodes of two GPUs with `topology`, every event at EventCost{1.0} (0: no such
// link or nothing on it).
inline double linkBytesOn(const std::string& topology, const Strategy& strategy,
                          const std::string& link) {
  const IterationPlan plan = buildIterationPlan(test::model(64, 4, 256, 32, 512, 4, "fp16"),
                                                railCluster(2, 2, topology), strategy);
  std::vector<EventCost> costs(plan.events.size(), EventCost{1.0});
  const LinkUsage usage = linkUsage(simulate(plan, costs), LinkDetail::kTotals);
  for (const LinkLoad& l : usage.links) {
    if (l.name == link) return l.bytes;
  }
  return 0;
}

}  // namespace evsim::test
