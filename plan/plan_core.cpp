#include "plan/plan_core.h"

#include <algorithm>
#include <memory>
#include <tuple>
#include <utility>

#include "common/checked.h"
#include "common/error.h"
#include "ops/fsdp_copies.h"
#include "ops/layer_ops.h"
#include "plan/core_bin.h"
#include "plan/layer_checkpoint.h"
#include "plan/layer_shape.h"
#include "plan/optimizer_step.h"
#include "plan/sharded_prefetch.h"
#include "plan/zero2_buckets.h"

namespace evsim {

namespace {

// `stage` as a new StagePlan, its lists emptied but keeping their storage.
void resetKeepingStorage(StagePlan& stage) {
  StagePlan fresh;
  auto keep = [](auto& from, auto& to) {
    to = std::move(from);
    to.clear();
  };
  keep(stage.forward, fresh.forward);
  keep(stage.backward, fresh.backward);
  keep(stage.optimizer, fresh.optimizer);
  keep(stage.dp_buckets, fresh.dp_buckets);
  keep(stage.micro_batch_buckets, fresh.micro_batch_buckets);
  keep(stage.param_buckets, fresh.param_buckets);
  stage = std::move(fresh);
}

}  // namespace

// ZeRO acts only over a DP x CP group of more than one rank.
int effectiveZero(const Strategy& strategy) {
  return strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
}

// The pipeline classes of (M, P, D, C, E): replicas grouped by their pairs' placements, for v = 1
// (pairs p -> p + 1) and v > 1 (the wrap P - 1 -> 0 too). A pair's placement is the worst over its
// TP x CP rank pairs (RankLayout::worstStagePair).
const PlanCache::PipelineClasses& pipelineClasses(const Strategy& strategy, int gpus_per_node,
                                                  PlanCache& cache) {
  const int P = strategy.pp, D = strategy.dp;
  return cache.pipelineClasses(
      {strategy.tp, strategy.pp, strategy.dp, strategy.cp, strategy.ep, strategy.expertTp(), 1,
       1},  // the classes do not depend on the CP exchange
      [&] {
        const RankLayout layout(strategy, gpus_per_node);
        PlanCache::PipelineClasses out;
        std::map<std::vector<int>, int> line_of, ring_of;
        auto group = [](PlanCache::PipelineGroups& groups, std::map<std::vector<int>, int>& of,
                        const std::vector<Placement>& pairs, int d) {
          std::vector<int> key;
          key.reserve(3 * pairs.size());
          for (const Placement& p : pairs) {
            key.insert(key.end(), {p.group_size, p.nodes, p.ranks_per_node});
          }
          auto [it, inserted] = of.try_emplace(std::move(key), static_cast<int>(of.size()));
          if (inserted) {
            groups.pairs.push_back(pairs);
            groups.replicas.emplace_back();
          }
          groups.replicas[it->second].push_back(d);
        };
        // With P = 1 there is no pair (the interleaved schedule needs P >= 2).
        std::vector<Placement> pairs(P > 1 ? P : 0);
        for (int d = 0; d < D; ++d) {
          for (int p = 0; p < static_cast<int>(pairs.size()); ++p) {
            pairs[p] = layout.worstStagePair(d, p, (p + 1) % P);
          }
          group(out.ring, ring_of, pairs, d);
          group(out.line, line_of,
                std::vector<Placement>(pairs.begin(), pairs.end() - (P > 1 ? 1 : 0)), d);
        }
        return out;
      });
}

int64_t stageOutputBytes(const ModelConfig& model, const LayerShape& shape, int next_layer) {
  // A decoder stage of an encoder-decoder model also forwards the encoder output. The next chunk
  // may hold no block (the loss alone: --account-for-loss-in-pipeline-split), next_layer then
  // being the number of blocks: not a block to look at (reading past the end had given a p2p of
  // 110x the activation when the byte there happened to be 109).
  const bool next_is_cross = next_layer < static_cast<int>(model.blocks.size()) &&
                             model.blocks[static_cast<size_t>(next_layer)].cross_attention;
  // With SP the tensor between stages is the sequence shard (s/t tokens), as in Megatron.
  return shape.regionTokens() * model.hidden_size * dtypeBytes(model.dtype) *
         (next_is_cross ? 2 : 1);
}

bool headOwnsOutputWeight(const ModelConfig& model, bool has_embedding) {
  return model.spec.untied_output || !has_embedding;
}

int64_t headParameters(const ModelConfig& model, const ModelFootprint& footprint,
                       bool has_embedding) {
  int64_t params = footprint.head.weights;
  if (headOwnsOutputWeight(model, has_embedding)) params += footprint.output_weights;
  if (!has_embedding) params += footprint.mtp_embedding_weights;
  return params;
}

PlanCache::CoreKey planCoreKey(const Strategy& strategy) {
  // Reset what only finishPlan reads; everything else (a field added later included) stays.
  Strategy key = strategy;
  // ZeRO-2 keeps its stage, overlap, bucket and wire type: its bucket reductions are in the op
  // lists (plan/zero2_buckets.h).
  const int zero = effectiveZero(strategy);
  key.zero_stage = zero >= 2 ? zero : 0;
  key.dp_overlap = zero == 2 && strategy.dp_overlap;
  // Under kStep ZeRO-2's reductions leave the backward's op list (plan/zero2_buckets.h); the
  // queue bound is the timing's only.
  if (zero != 2) key.grad_reduce_sync = GradReduceSync::kBackward;
  key.grad_reduce_queue = 0;
  key.overlap_param_gather = false;
  if (zero != 2) key.dp_bucket_bytes = Strategy{}.dp_bucket_bytes;
  key.global_batch = 0;
  // The optimizer step's kernels: finishPlan's only; the gradient reduction's wire type too, but
  // under ZeRO-2, whose bucket reductions (above) carry it.
  key.optimizer_impl = OptimizerImpl::kFused;
  if (zero != 2) key.grad_reduce_in_bf16 = false;
  // The plan depends on the schedule only through its layout: v = 1 alike, and a schedule file
  // keyed as the bundled schedule of its layout (a file replaced in one process cannot alias).
  const PipelineLayout layout = pipelineLayout(key);
  if (layout.chunks() == 1) {
    key.schedule = Schedule::kDapple;
  } else if (layout.kind() == LayoutKind::kV) {
    key.schedule = Schedule::kZbv;  // ZB-V, DualPipeV and a V file share their plan
    key.virtual_stages = 1;
  } else if (key.schedule == Schedule::kFile) {
    key.schedule = Schedule::kInterleaved;
    key.virtual_stages = layout.chunks();
  }
  // Optimizer offload changes only the optimizer step; activation offload the op lists.
  key.offload = offloadsActivations(strategy.offload) ? Offload::kActivations : Offload::kNone;
  return key;
}

Strategy timingKey(const ModelConfig& model, const Strategy& strategy) {
  Strategy key = strategy;
  if (model.spec.flash_attention && strategy.recompute == Recompute::kSelective) {
    key.recompute = Recompute::kNone;
  }
  return key;
}

std::shared_ptr<const PlanCore> buildPlanCore(const ModelConfig& model,
                                              const ClusterConfig& cluster,
                                              const Strategy& strategy, PlanCache& cache) {
  // Built into a core let go before (CoreBin, core_bin.h), whose lists keep their storage;
  // handed back to the bin when the last holder lets go.
  std::unique_ptr<PlanCore> built = CoreBin::instance().take();
  PlanCore* const core = built.get();
  const int P = strategy.pp;
  const PipelineLayout pipeline = pipelineLayout(strategy);
  const int K = pipeline.stages();
  core->stages.resize(static_cast<size_t>(K));
  core->layer_params.resize(static_cast<size_t>(K));
  core->dense_params.resize(static_cast<size_t>(K));
  core->events.clear();
  core->stage_events_end.clear();
  core->stage_events_end.reserve(static_cast<size_t>(K));
  const DType dtype = model.dtype;
  const int embedding_streams = embeddingStreams(model);
  const PlanCache::Placements& placements = stagePlacements(strategy, cluster.gpus_per_node, cache);

  LayerShape shape = layerShape(model, strategy, placements.tp[0]);
  const bool zero3 = effectiveZero(strategy) == 3;
  const bool expert_parallel = strategy.expertsSyncApart();

  std::vector<int> first_layer = stageFirstLayers(model, strategy, &cache);
  const ModelFootprint& footprint = cachedFootprint(model, strategy, cache);
  // Per-layer checkpointing (--recompute-every): the blocks it leaves are built without recompute.
  const std::vector<char> recomputed =
      checkpointedBlocks(strategy, first_layer, static_cast<int>(model.numLayers()));
  EventTable& table = core->events;

  // A block's ops depend on its kind and the shape's groups, not on its index: the first block of
  // each (kind, groups) is built, the others copy its ops with their own layer index. Built where
  // the first of them comes, they intern their events where a block-by-block pass would.
  struct BlockOps {
    TransformerBlock block;
    Placement tp, cp_ring, ep, etp, cp_group;
    bool forward = true;
    bool recomputed = true;  // under --recompute-every: built by the recomputing builder
    OpList ops;  // of the block built first; `layer` fields are overwritten on copy
  };
  std::vector<BlockOps> block_ops;
  auto emitBlock = [&](LayerOpBuilder& recomputing, LayerOpBuilder& plain, int layer, bool forward,
                       OpList& out) {
    const TransformerBlock& block = model.blocks[layer];
    const bool recomputes = recomputed[static_cast<size_t>(layer)] != 0;
    LayerOpBuilder& builder = recomputes || strategy.recompute_every <= 1 ? recomputing : plain;
    for (const BlockOps& b : block_ops) {
      if (b.forward != forward || b.recomputed != recomputes || !(b.block == block) ||
          !(b.tp == shape.tp_group) || !(b.cp_ring == shape.cp_ring) || !(b.ep == shape.ep_group) ||
          !(b.etp == shape.etp_group) || !(b.cp_group == shape.cp_group)) {
        continue;
      }
      const size_t first = out.size();
      out.insert(out.end(), b.ops.begin(), b.ops.end());
      for (size_t i = first; i < out.size(); ++i) out[i].layer = layer;
      return;
    }
    const size_t first = out.size();
    if (forward) {
      builder.blockForward(block, layer, out);
    } else {
      builder.blockBackward(block, layer, out);
    }
    block_ops.push_back(
        BlockOps{block, shape.tp_group, shape.cp_ring, shape.ep_group, shape.etp_group,
                 shape.cp_group, forward, recomputes,
                 OpList(out.begin() + static_cast<std::ptrdiff_t>(first), out.end())});
  };

  OpList transfer_scratch, copy_scratch;  // zero3_group_op's
  OpList zero2_scratch;                   // add_zero2_reductions'

  // The chunk before's list lengths: chunks of as many layers have as many ops, so each list is
  // allocated once at about its size instead of grown op by op (the first chunk's and the last's
  // differ by the embedding's and the head's few).
  size_t forward_ops = 0, backward_ops = 0;
  for (int k = 0; k < K; ++k) {
    StagePlan& stage = core->stages[static_cast<size_t>(k)];
    resetKeepingStorage(stage);
    stage.forward.reserve(forward_ops);
    stage.backward.reserve(backward_ops);
    stage.stage = k;
    stage.device_stage = pipeline.device(k);
    stage.chunk = pipeline.chunk(k);
    stage.first_layer = first_layer[k];
    int end_layer = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model.numLayers());
    stage.num_layers = end_layer - stage.first_layer;
    stage.has_embedding = k == 0;
    stage.has_head = k == K - 1;
    stage.tp_group = placements.tp[stage.device_stage];
    stage.dp_group = placements.dp[stage.device_stage];
    stage.expert_dp_group = placements.expert_dp[stage.device_stage];
    shape.tp_group = stage.tp_group;
    shape.cp_ring = placements.cp_ring[stage.device_stage];
    shape.cp_group = placements.cp_group[stage.device_stage];
    shape.ep_group = placements.ep[stage.device_stage];
    shape.etp_group = placements.etp[stage.device_stage];
    LayerOpBuilder builder(shape, table);
    LayerShape plain_shape = shape;
    plain_shape.recompute = Recompute::kNone;
    LayerOpBuilder plain_builder(plain_shape, table);

    // Each layer's parameters on one rank (its forward ops' weights), for ZeRO-3's gathers and the
    // DDP buckets; the stage's parameters are their sum.
    // Under expert parallelism the routed experts' share is synchronised apart (expert_params):
    // `layer_experts` has it per layer (none otherwise), for ZeRO-3, ZeRO-2 and the dense share.
    LayerParams& layer_params = core->layer_params[static_cast<size_t>(k)];
    LayerParams layer_experts;
    layer_params.clear();
    // The blocks, the embedding and the head: one allocation each.
    layer_params.reserve(static_cast<size_t>(stage.num_layers) + 2);
    if (expert_parallel) layer_experts.reserve(static_cast<size_t>(stage.num_layers) + 1);
    if (stage.has_embedding) layer_params.set(kEmbeddingLayer, footprint.embedding.weights);
    for (int layer = stage.first_layer; layer < end_layer; ++layer) {
      const LayerFootprint& block = footprint.block(model.blocks[layer]);
      layer_params.set(layer, block.weights);
      stage.expert_parameters += block.expert_weights;
      if (expert_parallel) layer_experts.set(layer, block.expert_weights);
    }
    const bool owns_output = headOwnsOutputWeight(model, stage.has_embedding);
    if (stage.has_head) {
      layer_params.set(kHeadLayer, headParameters(model, footprint, stage.has_embedding));
      stage.expert_parameters += footprint.head.expert_weights;  // an MTP depth's MoE block
      if (expert_parallel) layer_experts.set(kHeadLayer, footprint.head.expert_weights);
    }
    // ZeRO-3: gather a layer's parameters before its forward and again before its backward, and
    // reduce-scatter its gradients right after its backward, in the DP group.
    // When one chunk holds both ends (K = 1), the LM head uses the tied embedding matrix, which
    // ZeRO-3 released after the embedding: the head gathers it again (its gradient is reduced
    // with the embedding's).
    const int64_t tied_head_params = stage.has_head && !owns_output ? footprint.output_weights : 0;
    // FSDP2 (torchtitan's mixed precision) gathers in the model dtype, blocks' linear weights in
    // fp8 with Float8 all-gather, and reduce-scatters gradients in fp32.
    const bool fsdp = strategy.framework == Framework::kFsdp;
    // Under expert parallelism a block's routed experts are sharded over the expert-data-parallel
    // group (D x C / E ranks, as Megatron's and NeMo AutoModel's expert FSDP do), the rest over
    // the D x C data-parallel group: one collective each, the experts' right after the dense one.
    // FSDP under PP without reshard: once per step, in finishPlan, not per micro-batch here.
    const bool per_micro_batch = zero3 && !strategy.fsdpSyncsOncePerStep();
    auto experts_of = [&](int layer) -> int64_t { return layer_experts.valueOr(layer, 0); };
    // One FSDP group's (or ZeRO-3 layer's) transfer of `params`, `experts` of them routed experts,
    // tagged with `layer`.
    auto zero3_group_op = [&](OpList& ops, int layer, int64_t params, int64_t experts,
                              EventKind kind, std::string_view name) {
      if (!per_micro_batch) return;
      DType wire = dtype;
      if (fsdp && kind == EventKind::kReduceScatter) wire = DType::kFp32;
      if (fsdp && kind == EventKind::kAllGather && model.fp8WeightGather() && layer >= 0) {
        wire = DType::kFp8;
      }
      // FSDP2's copies around its collectives (fsdp_copies.h) run on the compute stream: the
      // gathers' copy-outs after all of them (the layer's ops start with them), the scatters'
      // copy-ins before all of them. In lists kept across the calls (two per layer and pass).
      OpList& transfers = transfer_scratch;
      OpList& copies = copy_scratch;
      transfers.clear();
      copies.clear();
      auto push = [&](int64_t count, const Placement& group, std::string_view op_name) {
        if (count == 0 || group.group_size < 2) return;
        Event e = makeCommunication(
            kind, checkedMul(count, dtypeBytes(wire), "ZeRO-3 gather bytes"), group, wire);
        // A gradient's reduce-scatter (and FSDP2's copy-in before it) needs the weight
        // gradients: zero-bubble schedules run it in the W task that computes them, not in B.
        const bool weight_grad = kind == EventKind::kReduceScatter;
        transfers.push_back(OpInstance{table.intern(e), Stream::kDpComm, layer, op_name});
        transfers.back().weight_grad = weight_grad;
        if (!fsdp) return;
        const FsdpCopy copy = kind == EventKind::kAllGather
                                  ? fsdpAllGatherCopyOut(e.message_bytes, dtype)
                                  : fsdpReduceScatterCopyIn(count, dtype);
        copies.push_back(OpInstance{table.intern(copy.event), Stream::kCompute, layer, copy.name});
        copies.back().weight_grad = weight_grad;
      };
      push(params - experts, stage.dp_group, name);
      push(experts, stage.expert_dp_group,
           kind == EventKind::kAllGather ? "zero3_expert_param_allgather"
                                         : "zero3_expert_grad_reduce_scatter");
      const bool gather = kind == EventKind::kAllGather;
      ops.insert(ops.end(), gather ? transfers.begin() : copies.begin(),
                 gather ? transfers.end() : copies.end());
      ops.insert(ops.end(), gather ? copies.begin() : transfers.begin(),
                 gather ? copies.end() : transfers.end());
    };
    auto zero3_op = [&](OpList& ops, int layer, EventKind kind, std::string_view name) {
      int64_t params = layer_params.at(layer);
      if (layer == kHeadLayer && kind == EventKind::kAllGather) params += tied_head_params;
      zero3_group_op(ops, layer, params, experts_of(layer), kind, name);
    };
    // FSDP without reshard-after-forward keeps the forward's gathered parameters for the
    // backward: no second gather.
    const bool regather = strategy.reshardsAfterForward();
    auto zero3_regather = [&](OpList& ops, int layer) {
      if (regather) zero3_op(ops, layer, EventKind::kAllGather, "zero3_param_allgather");
    };
    constexpr std::string_view kGather = "zero3_param_allgather";
    constexpr std::string_view kScatter = "zero3_grad_reduce_scatter";
    // FSDP2's edge group (Strategy::fsdp_wrap): the embedding and [final norm, output] as one
    // group, the part's root's own parameters (root), or one group because the output weight is
    // the embedding's (separate with tied embeddings on one chunk: torchtitan's
    // fully_shard([tok_embeddings, norm, lm_head])). Gathered once at the part's first forward
    // op (the root's pre-forward, or the embedding's), kept through the backward (the root group
    // is never resharded after the forward; the tied group only under "always", gathered again
    // before the head's backward), reduce-scattered once after the part's last backward op (the
    // root's final callback, or the tied group's post-backward after the embedding's backward).
    // Otherwise the embedding and [norm, output] are groups of their own, [norm, output] gathered
    // again for its backward only under "always" (Strategy::reshardsHeadAfterForward), and
    // under the root wrapping the last block is kept gathered (reshardsLastBlockAfterForward).
    const bool edge_group =
        fsdp && (stage.has_embedding || stage.has_head) &&
        (strategy.fsdp_wrap == FsdpWrap::kRoot ||
         (stage.has_embedding && stage.has_head && !owns_output));
    const int edge_layer = stage.has_embedding ? kEmbeddingLayer : kHeadLayer;
    int64_t edge_params = 0, edge_experts = 0;
    for (int layer : {kEmbeddingLayer, kHeadLayer}) {
      if (edge_group && layer_params.contains(layer)) {
        edge_params += layer_params.at(layer);
        edge_experts += experts_of(layer);
      }
    }
    auto edge_op = [&](OpList& ops, EventKind kind) {
      zero3_group_op(ops, edge_layer, edge_params, edge_experts, kind,
                     kind == EventKind::kAllGather ? kGather : kScatter);
    };
    const bool edge_regather = edge_group && strategy.fsdp_wrap == FsdpWrap::kSeparate &&
                               strategy.reshard == Reshard::kAlways;
    // ZeRO-2 (DeepSpeed): each bucket reduced in every micro-batch's backward when the gradient
    // that would overflow it arrives (plan/zero2_buckets.h), in the reduction's wire type, the
    // routed experts' share over the expert-data-parallel group.
    const bool zero2 = effectiveZero(strategy) == 2;
    auto add_zero2_reductions = [&] {
      const DType wire =
          dataParallelGradDtype(strategy.framework, dtype, strategy.grad_reduce_in_bf16);
      const std::vector<Zero2Bucket> buckets =
          zero2Buckets(zero2Arrivals(stage.backward, table, layer_params, layer_experts),
                       zero2BucketElements(strategy, dtypeBytes(wire)),
                       static_cast<int>(stage.backward.size()) - 1);
      // Into the list the chunk before left (its old backward list): swapped in below.
      OpList& out = zero2_scratch;
      out.clear();
      out.reserve(stage.backward.size() + 2 * buckets.size());
      size_t next = 0;
      for (size_t i = 0; i < stage.backward.size(); ++i) {
        out.push_back(stage.backward[i]);
        for (; next < buckets.size() && buckets[next].after_op == static_cast<int>(i); ++next) {
          const Zero2Bucket& b = buckets[next];
          for (const auto& [count, group, name] :
               {std::tuple{b.elements - b.experts, stage.dp_group, kZero2ReduceName},
                std::tuple{b.experts, stage.expert_dp_group, kZero2ExpertReduceName}}) {
            if (count == 0 || group.group_size < 2) continue;
            const int64_t bytes = checkedMul(count, dtypeBytes(wire), "ZeRO-2 bucket bytes");
            Event e = makeCommunication(EventKind::kReduceScatter, bytes, group, wire);
            out.push_back(
                OpInstance{table.intern(e), Stream::kDpComm, stage.backward[i].layer, name});
            out.back().weight_grad = true;  // zero-bubble schedules: in the W task
          }
        }
      }
      std::swap(stage.backward, out);
    };
    if (edge_group) edge_op(stage.forward, EventKind::kAllGather);
    if (stage.has_embedding) {
      if (!edge_group) zero3_op(stage.forward, kEmbeddingLayer, EventKind::kAllGather, kGather);
      builder.embeddingForward(embedding_streams, stage.forward);
    }
    for (int layer = stage.first_layer; layer < end_layer; ++layer) {
      zero3_op(stage.forward, layer, EventKind::kAllGather, kGather);
      emitBlock(builder, plain_builder, layer, /*forward=*/true, stage.forward);
    }
    if (stage.has_head) {
      if (!edge_group) zero3_op(stage.forward, kHeadLayer, EventKind::kAllGather, kGather);
      builder.headForward(stage.forward, owns_output, !stage.has_embedding);
      if (edge_regather) edge_op(stage.backward, EventKind::kAllGather);
      if (!edge_group && strategy.reshardsHeadAfterForward()) {
        zero3_regather(stage.backward, kHeadLayer);
      }
      builder.headBackward(stage.backward);
      if (!edge_group) zero3_op(stage.backward, kHeadLayer, EventKind::kReduceScatter, kScatter);
    }
    for (int layer = end_layer - 1; layer >= stage.first_layer; --layer) {
      const bool last_block = layer + 1 == static_cast<int>(model.numLayers());
      if (!last_block || strategy.reshardsLastBlockAfterForward()) {
        zero3_regather(stage.backward, layer);
      }
      emitBlock(builder, plain_builder, layer, /*forward=*/false, stage.backward);
      zero3_op(stage.backward, layer, EventKind::kReduceScatter, kScatter);
    }
    if (stage.has_embedding) {
      if (!edge_group) zero3_regather(stage.backward, kEmbeddingLayer);
      builder.embeddingBackward(embedding_streams, stage.backward);
      if (!edge_group) {
        zero3_op(stage.backward, kEmbeddingLayer, EventKind::kReduceScatter, kScatter);
      }
    }
    if (edge_group) edge_op(stage.backward, EventKind::kReduceScatter);
    if (zero2) add_zero2_reductions();

    // Checked, like the byte counts below: sized by hidden^2 x layers from the model file.
    for (const auto& [layer, params] : layer_params) {
      stage.parameters = checkedAdd(stage.parameters, params, "stage parameters");
    }
    LayerParams& dense_params = core->dense_params[static_cast<size_t>(k)];
    dense_params = layer_params;
    for (const auto& [layer, experts] : layer_experts) {
      int64_t* dense = dense_params.find(layer);  // set with the layer's parameters, above
      EVSIM_CHECK(dense != nullptr, "experts of layer {} without its parameters", layer);
      *dense -= experts;
    }
    if (offloadsActivations(strategy.offload)) addActivationOffload(stage, dtype, table);
    if (zero2 && strategy.dp_overlap && !strategy.reducesAtStep()) {
      overlapZero2Reductions(stage.backward);
    }
    // ZeRO-3 / FSDP prefetch: each layer's gathers beside the layer before, its scatters beside
    // the layer after (sharded_prefetch.h).
    if (per_micro_batch) {
      prefetchShardedTransfers(stage.forward, table);
      prefetchShardedTransfers(stage.backward, table);
    }
    // --grad-reduce-sync step: the reductions leave the backward for the DP stream's queue, after
    // every list edit above (their ops are indexed in the final list).
    if (zero2 && strategy.reducesAtStep()) {
      stage.micro_batch_buckets = deferZero2Reductions(stage.backward, table);
    }
    if (k + 1 < K) {
      stage.activation_bytes_out = stageOutputBytes(model, shape, end_layer);
    }
    forward_ops = stage.forward.size();
    backward_ops = stage.backward.size();
    core->stage_events_end.push_back(table.size());
  }
  // Prefetched gathers were interned after the ops they now precede.
  if (zero3 && !strategy.fsdpSyncsOncePerStep()) {
    renumberInFirstUseOrder(table, core->stages, core->stage_events_end);
  }

  // Pipeline classes: DP replicas with identical transfer placements are simulated once. Link k
  // (chunk k -> k+1) crosses the device pair the layout names (linkPair): with v looped chunks
  // per device the P pairs repeat, wrapping from the last device to the first. A link inside one
  // device (the V layout's turn) has no event (-1). A class's events are interned when its first
  // replica comes, in boundary order, as a pass over the replicas would.
  const PlanCache::PipelineClasses& classes =
      pipelineClasses(strategy, cluster.gpus_per_node, cache);
  EVSIM_CHECK(K == P || P > 1, "{} chunks on one pipeline stage", K);
  const PlanCache::PipelineGroups& groups = pipeline.wraps() ? classes.ring : classes.line;
  core->pipelines.resize(groups.pairs.size());
  for (size_t c = 0; c < groups.pairs.size(); ++c) {
    PipelineClass& links = core->pipelines[c];
    links.replicas = groups.replicas[c];
    links.forward_p2p.clear();
    links.backward_p2p.clear();
    for (int k = 0; k + 1 < K; ++k) {
      const int pair = pipeline.linkPair(k);
      const int event = pair < 0 ? -1
                                 : table.intern(makeCommunication(
                                       EventKind::kP2P, core->stages[k].activation_bytes_out,
                                       groups.pairs[c][static_cast<size_t>(pair)], dtype));
      links.forward_p2p.push_back(event);
      links.backward_p2p.push_back(event);  // the gradient has the activation's shape
    }
  }

  // Uses per event, multiplied into counts by finishPlan.
  core->op_uses.assign(table.size(), 0);
  core->p2p_uses.assign(table.size(), 0);
  for (const StagePlan& stage : core->stages) {
    for (const OpInstance& op : stage.forward) ++core->op_uses[op.event];
    for (const OpInstance& op : stage.backward) ++core->op_uses[op.event];
    for (const GradBucket& b : stage.micro_batch_buckets) ++core->op_uses[b.event];
  }
  for (const PipelineClass& pipeline : core->pipelines) {
    const int64_t replicas = static_cast<int64_t>(pipeline.replicas.size());
    for (int k = 0; k + 1 < K; ++k) {
      if (pipeline.forward_p2p[k] < 0) continue;                // a hand-over inside one device
      core->p2p_uses[pipeline.forward_p2p[k]] += 2 * replicas;  // send + receive
      core->p2p_uses[pipeline.backward_p2p[k]] += 2 * replicas;
    }
  }
  return std::shared_ptr<const PlanCore>(built.release(), [](const PlanCore* done) {
    CoreBin::instance().put(const_cast<PlanCore*>(done));
  });
}

}  // namespace evsim
