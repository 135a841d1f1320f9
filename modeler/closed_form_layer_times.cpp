// The closed-form tier's op-time sums of one micro-batch of each kind of block
// (closed_form_tier.h).
#include <algorithm>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "modeler/closed_form_facts.h"
#include "modeler/closed_form_tier.h"
#include "modeler/op_offsets.h"
#include "ops/fsdp_copies.h"
#include "ops/layer_footprint.h"
#include "ops/layer_ops.h"
#include "plan/layer_shape.h"

namespace evsim {

ClosedFormTier::LayerTimes ClosedFormTier::computeLayerTimes(
    const Strategy& strategy, bool zero3, const StageGroups& groups,
    const ModelFootprint& class_footprint, Workspace::State& workspace) const {
  LayerShape shape = layerShape(model_, strategy, groups.tp);
  if (strategy.cp > 1) shape.cp_ring = groups.cp_ring, shape.cp_group = groups.cp_group;
  if (strategy.ep > 1) shape.ep_group = groups.ep;
  shape.etp_group = groups.etp;
  // The workspace's events and their times, kept from the keys it computed before (closed_form_
  // facts.h): an event already there is found, not signed, copied and costed again.
  Workspace::State::LayerEvents& events = workspace.layer_events;
  if (events.table.size() > Workspace::State::LayerEvents::kKept) {
    events = Workspace::State::LayerEvents{};
  }
  EventTable& table = events.table;
  LayerOpBuilder builder(shape, table);
  LayerTimes out;
  std::vector<double>& op_us = events.op_us;
  std::vector<char>& uncosted = events.uncosted;
  // Op times as a task runs them (op_offsets.h), without host issue time (which only adds).
  auto sum = [&](const OpList& ops) {
    for (const OpInstance& op : ops) {
      while (static_cast<int>(op_us.size()) <= op.event) {
        std::optional<EventCost> c = costs_.cost(table[static_cast<int>(op_us.size())].event);
        uncosted.push_back(c ? 0 : 1);
        op_us.push_back(c ? c->time_us : 0);
      }
      if (uncosted[static_cast<size_t>(op.event)] != 0) out.complete = false;
    }
    return opOffsets(
        ops, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          return std::pair{0.0, op_us[op.event]};
        },
        [](size_t, double) {});
  };
  auto noteWindows = [&](const OpList& backward_ops) {
    for (const OpInstance& op : backward_ops) out.backward_windows |= op.overlap_ops > 0;
  };
  // ZeRO-3's transfers of a block, as the plan core places them (plan_core.cpp): its parameters
  // gathered before its forward and (resharding after the forward) again before its backward, its
  // gradients reduce-scattered after the backward, in the DP group, on the DP stream.
  const ModelFootprint* footprint = zero3 ? &class_footprint : nullptr;
  const bool fsdp = strategy.framework == Framework::kFsdp;
  auto zero3Op = [&](OpList& ops, int64_t params, EventKind kind, std::string_view name) {
    DType wire = model_.dtype;
    if (fsdp && kind == EventKind::kReduceScatter) wire = DType::kFp32;
    if (fsdp && kind == EventKind::kAllGather && model_.fp8WeightGather()) wire = DType::kFp8;
    Event e = makeCommunication(kind, checkedMul(params, dtypeBytes(wire), "ZeRO-3 gather bytes"),
                                groups.dp, wire);
    ops.push_back(OpInstance{table.intern(e), Stream::kDpComm, 0, name});
  };
  auto block = [&](bool cross, bool moe, double& forward, double& backward) {
    TransformerBlock b;
    b.cross_attention = cross;
    b.moe = moe;
    OpList& f = events.forward;
    OpList& g = events.backward;
    f.clear();
    g.clear();
    // The model's own block of this kind (its footprint is keyed by the whole block).
    const auto model_block = std::find_if(
        model_.blocks.begin(), model_.blocks.end(),
        [&](const TransformerBlock& m) { return m.cross_attention == cross && m.moe == moe; });
    // FSDP under PP without reshard syncs once per step, outside the tasks (finish_plan.cpp).
    const bool transfers =
        footprint && model_block != model_.blocks.end() && !strategy.fsdpSyncsOncePerStep();
    const int64_t params = transfers ? footprint->block(*model_block).weights : 0;
    // Prefetched (sharded_prefetch.h): in the steady state a block's transfers run beside its own
    // ops, one at a time on the DP stream, so a block costs at least the longer of the two. The
    // exposed first gather and last scatter of a task only add: still a lower bound.
    // FSDP2's copy-out after each gather and copy-in before the reduce-scatter run on the
    // compute stream, with the block's ops (ops/fsdp_copies.h, as plan_core.cpp places them).
    auto copy = [&](OpList& ops, const FsdpCopy& c) {
      ops.push_back(OpInstance{table.intern(c.event), Stream::kCompute, 0, c.name});
    };
    const bool copies = transfers && fsdp;
    // Under the root wrapping's default the last block keeps its gathered parameters: a block
    // counted without its second gather stays a lower bound for every block.
    const bool regather = transfers && strategy.reshardsLastBlockAfterForward();
    if (transfers) zero3Op(f, params, EventKind::kAllGather, "zero3_param_allgather");
    const size_t f_transfers = f.size();
    auto copyOut = [&](OpList& ops) {
      copy(ops, fsdpAllGatherCopyOut(table[ops.front().event].event.message_bytes, model_.dtype));
    };
    if (copies) copyOut(f);
    builder.blockForward(b, 0, f);
    if (regather) zero3Op(g, params, EventKind::kAllGather, "zero3_param_allgather");
    if (transfers) zero3Op(g, params, EventKind::kReduceScatter, "zero3_grad_reduce_scatter");
    const size_t g_transfers = g.size();
    if (copies && regather) copyOut(g);
    if (copies) copy(g, fsdpReduceScatterCopyIn(params, model_.dtype));
    builder.blockBackward(b, 0, g);
    auto beside = [](OpList& ops, size_t transfers) {
      for (size_t j = 0; j < transfers; ++j) {
        ops[j].overlap_ops = static_cast<int>(ops.size() - 1 - j);
      }
    };
    beside(f, f_transfers);
    beside(g, g_transfers);
    forward = sum(f);
    backward = sum(g);
    noteWindows(g);
  };
  block(false, false, out.self_forward, out.self_backward);
  if (model_.hasCrossAttention()) block(true, false, out.cross_forward, out.cross_backward);
  if (model_.moeLayers() > 0) block(false, true, out.moe_forward, out.moe_backward);
  const int streams = embeddingStreams(model_);
  OpList& ef = events.forward;
  OpList& eb = events.backward;
  ef.clear();
  eb.clear();
  builder.embeddingForward(streams, ef);
  builder.embeddingBackward(streams, eb);
  out.embedding_forward = sum(ef);
  out.embedding_backward = sum(eb);
  noteWindows(eb);
  OpList& hf = events.forward;
  OpList& hb = events.backward;
  hf.clear();
  hb.clear();
  builder.headForward(hf, /*owns_output_weight=*/true);  // weights do not change times
  builder.headBackward(hb);
  out.head_forward = sum(hf);
  out.head_backward = sum(hb);
  noteWindows(hb);
  return out;
}

ClosedFormTier::LayerTimes ClosedFormTier::layerTimes(const Strategy& strategy, bool zero3,
                                                      const StageGroups& groups,
                                                      const ModelFootprint& footprint,
                                                      Workspace::State& workspace) const {
  auto placement = [](const Placement& p) {
    return std::make_tuple(p.group_size, p.nodes, p.ranks_per_node);
  };
  const LayerKey key{
      strategy.micro_batch, strategy.tp, strategy.sequence_parallel,
      static_cast<int>(strategy.recompute), strategy.cp, strategy.ep, zero3 ? 1 : 0,
      zero3 ? static_cast<int>(strategy.framework) : 0,
      // What the transfers depend on (the reshard policy and, through it, P).
      zero3 ? (strategy.reshardsLastBlockAfterForward() ? 1 : 0) +
                  (strategy.fsdpSyncsOncePerStep() ? 2 : 0)
            : 0,
      placement(groups.tp), placement(groups.cp_ring), placement(groups.ep),
      placement(zero3 ? groups.dp : Placement{}), strategy.expertTp(), placement(groups.etp),
      strategy.tp_comm_overlap, static_cast<int>(strategy.moe_dispatcher),
      strategy.framework != Framework::kFsdp ? 0
      : strategy.eagerKernels()              ? 2
      : strategy.eagerLoss()                 ? 3
                                             : 1,
      placement(groups.cp_group), static_cast<int>(strategy.cp_comm), strategy.cp_a2a};
  auto it = workspace.layer_times.find(key);
  if (it != workspace.layer_times.end()) return it->second;  // no lock
  // The workspace's first look at the key: computed once for all workspaces (shared_memo.h).
  const LayerTimes times = shared_layer_times_->get(
      key, [&] { return computeLayerTimes(strategy, zero3, groups, footprint, workspace); });
  return workspace.layer_times.try_emplace(key, times).first->second;
}

}  // namespace evsim
