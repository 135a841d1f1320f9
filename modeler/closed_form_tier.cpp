#include "modeler/closed_form_tier.h"
#include "plan/layer_shape.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "ops/layer_footprint.h"
#include "ops/layer_ops.h"
#include "modeler/memory_model.h"
#include "modeler/op_offsets.h"

namespace evsim {

ClosedFormTier::ClosedFormTier(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostModel& costs, double headroom, PlanCache& cache)
    : model_(model), cluster_(cluster), costs_(costs), headroom_(headroom), cache_(cache) {}

double ClosedFormTier::issuedUs(const Event& event) const {
  std::optional<EventCost> c = costs_.cost(event);
  return c ? c->host_us + c->time_us : -1;
}

ClosedFormTier::LayerTimes ClosedFormTier::computeLayerTimes(const Strategy& strategy,
                                                             const StageGroups& groups) const {
  LayerShape shape = layerShape(model_, strategy, groups.tp);
  if (strategy.cp > 1) shape.cp_ring = groups.cp_ring;
  if (strategy.ep > 1) shape.ep_group = groups.ep;
  EventTable table;
  LayerOpBuilder builder(shape, table);
  LayerTimes out;
  std::vector<double> op_us;  // by event index, filled as events appear
  // Op times as a task runs them (op_offsets.h), without host issue time (which only adds).
  auto sum = [&](const OpList& ops) {
    for (const OpInstance& op : ops) {
      while (static_cast<int>(op_us.size()) <= op.event) {
        std::optional<EventCost> c = costs_.cost(table[static_cast<int>(op_us.size())].event);
        if (!c) out.complete = false;
        op_us.push_back(c ? c->time_us : 0);
      }
    }
    return opOffsets(
        ops, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          return std::pair{0.0, op_us[op.event]};
        },
        [](size_t, double) {});
  };
  auto block = [&](bool cross, bool moe, double& forward, double& backward) {
    TransformerBlock b;
    b.cross_attention = cross;
    b.moe = moe;
    OpList f, g;
    builder.blockForward(b, 0, f);
    builder.blockBackward(b, 0, g);
    forward = sum(f);
    backward = sum(g);
  };
  block(false, false, out.self_forward, out.self_backward);
  if (model_.hasCrossAttention()) block(true, false, out.cross_forward, out.cross_backward);
  if (model_.moeLayers() > 0) block(false, true, out.moe_forward, out.moe_backward);
  const int streams = embeddingStreams(model_);
  OpList ef, eb, hf, hb;
  builder.embeddingForward(streams, ef);
  builder.embeddingBackward(streams, eb);
  builder.headForward(hf, /*owns_output_weight=*/true);  // weights do not change times
  builder.headBackward(hb);
  out.embedding_forward = sum(ef);
  out.embedding_backward = sum(eb);
  out.head_forward = sum(hf);
  out.head_backward = sum(hb);
  return out;
}

ClosedFormTier::LayerTimes ClosedFormTier::layerTimes(const Strategy& strategy,
                                                      const StageGroups& groups) const {
  auto placement = [](const Placement& p) {
    return std::make_tuple(p.group_size, p.nodes, p.ranks_per_node);
  };
  const LayerKey key{strategy.micro_batch,
                     strategy.tp,
                     strategy.sequence_parallel,
                     static_cast<int>(strategy.recompute),
                     strategy.cp,
                     strategy.ep,
                     placement(groups.tp),
                     placement(groups.cp_ring),
                     placement(groups.ep)};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = layer_times_.find(key);
    if (it != layer_times_.end()) return it->second;
  }
  LayerTimes times = computeLayerTimes(strategy, groups);
  std::lock_guard<std::mutex> lock(mutex_);
  return layer_times_.try_emplace(key, times).first->second;
}

void ClosedFormTier::addActivationCopyBounds(const Strategy& strategy,
                                             const std::vector<int>& first_layer,
                                             std::vector<double>& forward,
                                             std::vector<double>& backward) const {
  // A task's copies run one at a time on the host stream and the task ends after the last
  // (op_offsets.h): it lasts at least their sum, whatever the ops beside them.
  const ModelFootprint& footprint = cachedFootprint(model_, strategy, cache_);
  const int64_t elem_bytes = dtypeBytes(model_.dtype);
  std::map<std::pair<bool, int64_t>, double> memo;  // (out, bytes): the layers of a kind repeat
  auto copyUs = [&](bool out, int64_t bytes) {
    if (bytes == 0) return 0.0;  // no copy (addActivationOffload)
    auto [it, inserted] = memo.try_emplace({out, bytes}, 0.0);
    if (inserted) {
      const Event copy =
          makeCompute(out ? "offload_d2h" : "offload_h2d",
                      {{"elems", (bytes + elem_bytes - 1) / elem_bytes}}, "", model_.dtype);
      std::optional<EventCost> c = costs_.cost(copy);
      it->second = c ? c->time_us : 0.0;  // uncosted: no bound from it (the full path reports it)
    }
    return it->second;
  };
  const int K = static_cast<int>(first_layer.size());
  for (int k = 0; k < K; ++k) {
    double out = 0, in = 0;
    auto layer = [&](int64_t saved_bytes) {
      out += copyUs(true, saved_bytes);
      in += copyUs(false, saved_bytes);
    };
    if (k == 0) layer(footprint.embedding.saved_bytes);
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    for (int l = first_layer[k]; l < end; ++l) layer(footprint.block(model_.blocks[l]).saved_bytes);
    if (k == K - 1) layer(footprint.head.saved_bytes);
    forward[k] = std::max(forward[k], out);
    backward[k] = std::max(backward[k], in);
  }
}

double ClosedFormTier::lowerBoundUs(const Strategy& strategy, int64_t micro_batches,
                                    const std::vector<int>& first_layer,
                                    const std::vector<int64_t>& parameters,
                                    const std::vector<int64_t>& dense_parameters) const {
  const int P = strategy.pp, G = strategy.gradGroupSize();
  const int K = static_cast<int>(first_layer.size());
  const int v = K / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  const int zero = G > 1 ? strategy.zero_stage : 0;
  const int64_t elem_bytes = dtypeBytes(model_.dtype);
  const PlanCache::Placements& placements =
      stagePlacements(strategy, cluster_.gpus_per_node, cache_);

  // Per virtual stage: one micro-batch's forward and backward op-time sums.
  std::vector<double> forward(K), backward(K);
  for (int k = 0; k < K; ++k) {
    const int s = pipeline.device(k);
    const LayerTimes t = layerTimes(
        strategy, StageGroups{placements.tp[s], placements.cp_ring[s], placements.ep[s]});
    if (!t.complete) return 0;
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    for (int layer = first_layer[k]; layer < end; ++layer) {
      const TransformerBlock& block = model_.blocks[layer];
      forward[k] += block.cross_attention ? t.cross_forward
                    : block.moe           ? t.moe_forward
                                          : t.self_forward;
      backward[k] += block.cross_attention ? t.cross_backward
                     : block.moe           ? t.moe_backward
                                           : t.self_backward;
    }
    if (k == 0) {
      forward[k] += t.embedding_forward;
      backward[k] += t.embedding_backward;
    }
    if (k == K - 1) {
      forward[k] += t.head_forward;
      backward[k] += t.head_backward;
    }
  }
  if (offloadsActivations(strategy.offload)) {
    addActivationCopyBounds(strategy, first_layer, forward, backward);
  }
  // After the pipeline: gradient sync (not overlapped), optimizer, ZeRO 1/2 parameter gathers.
  std::vector<double> post(P, 0.0);
  for (int k = 0; k < K; ++k) {
    const int s = pipeline.device(k);
    // Under EP the experts' shard is over fewer ranks: dividing all by G stays below the plan's.
    const int64_t optimizer_params = zero > 0 ? (parameters[k] + G - 1) / G : parameters[k];
    for (const StepOp& op : optimizerStepOps(optimizer_params, model_.dtype, strategy.offload)) {
      const double t = issuedUs(op.event);
      if (t < 0) return 0;
      post[s] += t;
    }
    if (G > 1 && zero < 3) {
      const int64_t bytes = dense_parameters[k] * elem_bytes;
      if (!strategy.dp_overlap) {
        const EventKind kind = zero > 0 ? EventKind::kReduceScatter : EventKind::kAllReduce;
        const double sync =
            issuedUs(makeCommunication(kind, bytes, placements.dp[s], model_.dtype));
        if (sync < 0) return 0;
        post[s] += sync;
      }
      if (zero > 0) {
        const double gather = issuedUs(
            makeCommunication(EventKind::kAllGather, bytes, placements.dp[s], model_.dtype));
        if (gather < 0) return 0;
        post[s] += gather;
      }
    }
  }
  const double m = static_cast<double>(micro_batches);
  // A fused task (DualPipeV) lasts max(compute, all-to-all) >= half its members' sum: with expert
  // all-to-alls to hide, only half the work is a bound (timing_engine.h).
  const double work_share =
      pipelineSchedule(strategy.schedule).fusesTasks() && strategy.ep > 1 ? 0.5 : 1.0;
  double bound = 0, fill = 0, drain = 0;
  for (int s = 0; s < P; ++s) {
    double per_micro_batch = 0;
    for (int c = 0; c < v; ++c) {
      const int k = pipeline.virtualStage(s, c);
      per_micro_batch += forward[k] + backward[k];
    }
    const double work = m * per_micro_batch * work_share;
    bound = std::max(bound, fill + work + post[s]);
    bound = std::max(bound, fill + work + drain + post[0]);
    fill += forward[s];
    drain += backward[s];
  }
  return bound;
}

ClosedFormResult ClosedFormTier::evaluate(const Strategy& strategy) const {
  ClosedFormResult out;
  out.micro_batches = strategy.microBatches();
  const std::vector<int> first_layer = stageFirstLayers(model_, strategy, &cache_);
  const ModelFootprint& footprint = cachedFootprint(model_, strategy, cache_);
  const int K = static_cast<int>(first_layer.size());
  std::vector<ChunkMemoryInput> chunks(K);
  const ModelFootprint* unrecomputed = nullptr;
  if (strategy.recompute != Recompute::kNone) {
    Strategy plain = strategy;
    plain.recompute = Recompute::kNone;
    unrecomputed = &cachedFootprint(model_, plain, cache_);
  }
  std::vector<int64_t> parameters(K), dense_parameters(K);
  for (int k = 0; k < K; ++k) {
    ChunkMemoryInput& c = chunks[k];
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    const bool has_embedding = k == 0, has_head = k == K - 1;
    c.parameters =
        chunkParameters(model_, strategy, first_layer[k], end, has_embedding, has_head, &cache_);
    // The same sums the plan's forward op lists give (estimateMemory(plan)).
    for (int layer = first_layer[k]; layer < end; ++layer) {
      const LayerFootprint& block = footprint.block(model_.blocks[layer]);
      c.activation_bytes += block.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, block.saved_bytes);
      c.expert_parameters += block.expert_weights;
      c.weight_grad_input_bytes += block.weight_grad_input_bytes;
    }
    if (has_embedding) {
      c.activation_bytes += footprint.embedding.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, footprint.embedding.saved_bytes);
      c.weight_grad_input_bytes += footprint.embedding.weight_grad_input_bytes;
    }
    if (has_head) {
      c.activation_bytes += footprint.head.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, footprint.head.saved_bytes);
      c.weight_grad_input_bytes += footprint.head.weight_grad_input_bytes;
      c.expert_parameters += footprint.head.expert_weights;  // an MTP depth's MoE block
    }
    addLayerFacts(model_, footprint, unrecomputed, first_layer[k], end, has_embedding, has_head, c);
    parameters[k] = c.parameters;
    // The parameters the DP group (x CP) synchronises: all, or without the experts under EP.
    dense_parameters[k] = c.parameters - (strategy.ep > 1 ? c.expert_parameters : 0);
  }
  const MemoryEstimate mem =
      estimateMemory(model_, strategy, out.micro_batches, cluster_.device.memoryBytes(), chunks,
                     headroom_, hostCapacity(cluster_), cluster_.device.memory);
  out.peak_memory_bytes = mem.peak_bytes;
  out.peak_memory_stage = mem.peak_stage;
  out.fits = mem.fits();
  if (out.fits)
    out.lower_bound_us =
        lowerBoundUs(strategy, out.micro_batches, first_layer, parameters, dense_parameters);
  return out;
}

}  // namespace evsim
