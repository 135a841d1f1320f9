#pragma once
// The transfers of a timed iteration as flows over the cluster's links (network/link_sharing.h),
// and the timing re-run until each transfer's time agrees with the links it shared.
//
// Resources: modeler/link_map.h (the GPU's NVLink ports, the node's NICs, pooled or one rail per
// GPU, and the node's share of each oversubscribed tier's uplinks, each direction its own).
//
// Flows: each pipeline send (sender's tx, receiver's rx: NVLink inside a node, else the NICs and
// the tiers the pair crosses), each DP gradient collective or bucket and the ZeRO parameter
// all-gather (both directions of the device's node; NVLink too where the group has several ranks
// on a node), with bytes = the message times the collective's bus factor (nccl-tests: what each
// rank's link carries) and copies = the device's GPUs on its node / the group's ranks per node
// (at least 1); with per-GPU NICs, its GPUs on its rail / the group's ranks per node (the group's
// rings leave through each of its ranks' rails, one rail per channel). A pipeline send to another
// rail goes out through the receiver's rail on the sender's node when NCCL's PXN applies (the
// node's GPU on that rail is in the send's communicator; it then also loads that GPU's NVLink rx),
// else through its own (link_map.h, SendRoute).
// The collectives inside tasks whose group spans nodes (TP, CP, EP; ZeRO-3/FSDP gathers and
// reduce-scatters) are flows too: each starts where its op starts in the task (op_offsets.h, scaled
// to the task's run in the timeline) and lasts its standalone time. An all-to-all differs from the
// ring rule: every GPU of the node pushes its own cross-node share through the NICs (copies = the
// device's GPUs on the node, times the share of its peers on other nodes over all its peers), and
// its NVLink carries the share on its own node. In a fused task (DualPipeV's F&B, timing_engine.h)
// its members' expert all-to-alls run back to back on the communication stream from the run's
// start (in-node ones too, which are no flows but hold the stream), and their other collectives
// across nodes on the compute stream, at their offsets in their members' compute, one member after
// another: two chains. The run is max(compute, all-to-all), so sharing stretches it only where a
// stream, stretched, outlasts it: by max(0, each chain's delay - its stream's slack), the slack
// being the run less the stream's own time (an all-to-all delayed beside a longer compute is
// hidden).
//
// One sharing pass: the standalone timing's transfers become flows at their start times with their
// standalone durations, the links are shared, each transfer is given what sharing added
// (TimingInput's stretch fields; a task, the sum over its collectives), and the iteration is timed
// once more. The re-timed schedule is
// not shared again: a transfer stretched here moves later ones, and iterating to a fixed point
// oscillated (interleaved GPT-3 on 2,048 GPUs: a send's stretch went 1584, 120, 927, 0 us over four
// passes), so the first-order pass is what we keep. A plan whose transfers cannot overlap on a
// resource skips all this, and so does one where none did.

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "modeler/cost_source.h"
#include "modeler/link_map.h"
#include "modeler/network/link_sharing.h"
#include "modeler/network/nccl_tuner.h"
#include "modeler/simulation.h"
#include "modeler/timing_engine.h"
#include "plan/iteration_plan.h"

namespace evsim {

// What a flow carries, for the "where the time went" outputs.
// kZero: the ZeRO 1/2 parameter all-gather after the optimizer; kZero3: ZeRO-3/FSDP collectives
// inside tasks.
enum class FlowKind { kPp, kDp, kZero, kTp, kCp, kEp, kZero3 };
const char* flowKindName(FlowKind kind);  // "pp", "dp", "zero", "tp", "cp", "ep", "zero3"

// The building blocks of a flow (also in_task_flows.cpp's).
// Bytes one rank's links carry for `event` (nccl-tests' bus factor; a P2P send carries its
// message).
double linkBytes(const Event& event);
// Whether a group over `nodes` nodes crosses `tier`'s uplinks (fabric.cpp's rule).
bool crossesTier(const NetworkTopology& topology, const FabricTier& tier, int nodes);
// `uplinks`' oversubscribed tiers that a group over `nodes` nodes crosses, each loaded `copies`
// times, appended to `uses`.
void addUplinks(const NetworkTopology& topology, const std::vector<int>& uplinks, int nodes,
                float copies, LinkUses& uses);
// A collective of device `d` over `placement`, moving `bytes` per rank; `tree`: NCCL runs it as
// its tree, whose channels keep their rail (network/ring_channels.h, treeChannels).
SharedFlow collectiveFlow(const NetworkTopology& topology, const DeviceLinks& d,
                          const Placement& placement, double bytes, double start_us,
                          double duration_us, bool tree);
// Whether `event` of device `d` runs as NCCL's tree in a way that moves its flow: asked of the
// network model's tuner (NcclTuner on `cluster`) only where a ring's channels would change rail
// (NCCL_CROSS_NIC), as only then do the two differ; false elsewhere, at no cost.
bool treeKeepsRail(const ClusterConfig& cluster, const DeviceLinks& d, const Event& event);
// treeKeepsRail for a walk over many devices and intervals: the tuner is built once, on the first
// question that needs it, and its choice kept per event (it depends on the event alone; the
// rail question on the device).
class TreeRailRule {
 public:
  explicit TreeRailRule(const ClusterConfig& cluster) : cluster_(cluster) {}
  bool keepsRail(const DeviceLinks& d, const Event& event);

 private:
  const ClusterConfig& cluster_;  // outlives the rule
  std::optional<NcclTuner> tuner_;
  std::unordered_map<const Event*, bool> runs_as_tree_;
};

// The flows of `timeline` and where each came from.
struct TimelineFlows {
  struct Origin {
    FlowKind kind = FlowKind::kPp;
    int pipeline = 0;
    int stage = 0;  // device stage
    int index = 0;  // position in the device's order (sends, in-task) or grad_sync interval
    // In a fused task: the time its stream of the run is free beside it (the run less the
    // stream's own work), which a stretch uses up before it stretches the task; else 0.
    double slack_us = 0;
    // A lone task's collective: its position in the task's op list (stretched_task.h times the
    // task again with it stretched); -1 for every other flow.
    int op = -1;
  };
  // The flows, and their origins: what is the same for every flow of a shape (kind, class,
  // stage, slack, op) per shape, the index as runs of flows that share it (a lone task's
  // collectives and its send; issue 34: ~10^6 in-task flows of one simulation, each its start
  // and shape: 12 bytes, and a run per task).
  FlowList list;
  std::vector<Origin> shape_origins;  // per shape of `list` (their `index` unused)
  // (first flow, Origin::index) of each run of flows with one index, in list order.
  std::vector<std::pair<int, int>> index_runs;

  size_t size() const { return list.size(); }
  SharedFlow flow(size_t f) const { return list.flow(f); }
  Origin origin(size_t f) const {
    const auto run = std::upper_bound(index_runs.begin(), index_runs.end(),
                                      std::pair<int, int>{static_cast<int>(f), INT_MAX});
    return originIn(f, static_cast<size_t>(run - index_runs.begin()) - 1);
  }
  // The same for flows read in list order: `run` (0 before the first) follows them.
  Origin origin(size_t f, size_t& run) const {
    while (run + 1 < index_runs.size() && static_cast<size_t>(index_runs[run + 1].first) <= f) {
      ++run;
    }
    return originIn(f, run);
  }
  // A flow of a shape of its own (`f.after` kept); its index.
  int add(const SharedFlow& f, const Origin& origin);
  // A flow of an existing shape; its index.
  int add(double start_us, int shape, int after, int index);

 private:
  Origin originIn(size_t f, size_t run) const {
    Origin o = shape_origins[static_cast<size_t>(list.shapeOf(f))];
    o.index = index_runs[run].second;
    return o;
  }
};

// Each flow starts where `timeline` has it and lasts its standalone time (`input`'s stretch taken
// off), so the flows of a shared timeline share again as they did. `costs` (per plan event) and
// `offsets` (per virtual stage, simulation.h) place the in-task collectives; empty: none.
TimelineFlows timelineFlows(const IterationPlan& plan, const std::vector<EventCost>& costs,
                            const std::vector<StageOpOffsets>& offsets, const TimingInput& input,
                            const IterationTimeline& timeline, const LinkMap& map);

// How many flows timelineFlows lists for `plan`, from the plan alone (before any timing): a
// search's memory estimate of its sharing pass. Per pipeline class, every task's send (an upper
// count: a send inside one device is none), every virtual stage's DP collectives (one per bucket,
// or one; under --grad-reduce-sync step one per bucket and micro-batch) and ZeRO gather, and every task's collectives across nodes (inTaskFlowKind). 0 when
// the cluster's link sharing is off.
size_t sharingFlowCount(const IterationPlan& plan, const std::vector<EventCost>& costs);

// linkUsage's common case without the flow list: when no collective runs inside a task (else
// false, nothing set), each flow of timelineFlows as the segment it loads alone on each resource
// it uses ([start, start + duration) at demand x copies; a flow with no use, bytes or time loads
// nothing) appended to `load` (per resource, in timelineFlows' order), and `capacity` raised
// where one flow alone needs more (link_sharing.h).
bool transferLoads(const IterationPlan& plan, const std::vector<EventCost>& costs,
                   const std::vector<StageOpOffsets>& offsets, const TimingInput& input,
                   const IterationTimeline& timeline, const LinkMap& map,
                   std::vector<double>& capacity, std::vector<std::vector<LoadSegment>>& load);

// Runs the sharing pass above on `input` (no stretch yet) and `timeline` (computeTimeline(input))
// when the cluster's topology has link sharing on (`--link-sharing off` turns it off). Returns
// whether sharing changed the timeline (false: nothing could share, or nothing did; past the
// cheap checks `timeline` is timed again either way). `by_kind`, when given, gets
// per pipeline class and device stage what sharing added to its in-task collectives (empty when
// it did not re-time).
bool shareLinksOverTime(const IterationPlan& plan, const std::vector<EventCost>& costs,
                        const std::vector<StageOpOffsets>& offsets, TimingInput& input,
                        IterationTimeline& timeline,
                        std::vector<std::vector<TaskLinkStretch>>* by_kind = nullptr);

}  // namespace evsim
