#include "events/iteration_plan.h"

#include <map>
#include <optional>

#include "common/checked.h"
#include "common/error.h"
#include "events/layer_ops.h"
#include "events/stage_partition.h"

namespace evsim {

namespace {

// The footprints of every layer kind under `strategy`'s shape.
ModelFootprint strategyFootprint(const ModelConfig& model, const Strategy& strategy) {
  // Placement does not change any sum: any valid group of M ranks will do.
  return modelFootprint(model, layerShape(model, strategy, Placement{strategy.tp, 1, strategy.tp}));
}

// The same from `cache` when given (the reference lives there), or computed into `own`.
const ModelFootprint& footprintFor(const ModelConfig& model, const Strategy& strategy,
                                   PlanCache* cache, std::optional<ModelFootprint>& own) {
  if (cache == nullptr) return own.emplace(strategyFootprint(model, strategy));
  return cachedFootprint(model, strategy, *cache);
}

// The LM head GEMM has its own weight unless it is tied to the embedding on the same chunk
// (Megatron keeps a copy of a tied weight on the last stage when P > 1).
bool headOwnsOutputWeight(const ModelConfig& model, bool has_embedding) {
  return model.spec.untied_output || !has_embedding;
}

// Splits the stage's gradients into DDP buckets in backward order; a bucket closes at the end of a
// layer once it holds at least `bucket_bytes` (PyTorch fills buckets by whole parameters).
void buildBuckets(StagePlan& stage, const std::map<int, int64_t>& layer_params, int64_t grad_bytes,
                  int64_t bucket_bytes, Placement dp_group, DType dtype, EventKind kind,
                  EventTable& table) {
  int64_t pending = 0;
  auto close = [&](int op_index) {
    if (pending == 0) return;
    int event = table.intern(makeCommunication(kind, pending, dp_group, dtype));
    stage.dp_buckets.push_back(GradBucket{event, op_index, pending});
    pending = 0;
  };
  for (size_t i = 0; i < stage.backward.size(); ++i) {
    int layer = stage.backward[i].layer;
    bool layer_ends = i + 1 == stage.backward.size() || stage.backward[i + 1].layer != layer;
    if (!layer_ends) continue;
    pending += layer_params.at(layer) * grad_bytes;
    if (pending >= bucket_bytes) close(static_cast<int>(i));
  }
  close(static_cast<int>(stage.backward.size()) - 1);
}

}  // namespace

const ModelFootprint& cachedFootprint(const ModelConfig& model, const Strategy& strategy,
                                      PlanCache& cache) {
  return cache.footprint({strategy.micro_batch, strategy.tp, strategy.sequence_parallel,
                          static_cast<int>(strategy.recompute), strategy.cp, strategy.ep},
                         [&] { return strategyFootprint(model, strategy); });
}

std::vector<int> stageFirstLayers(const ModelConfig& model, const Strategy& strategy,
                                  PlanCache* cache) {
  const int v = strategy.schedule == Schedule::kInterleaved ? strategy.virtual_stages : 1;
  const int K = strategy.pp * v;
  if (!strategy.stage_layers.empty()) {
    // The user's split (validated by strategyViolation): prefix sums.
    std::vector<int> first(strategy.stage_layers.size());
    for (size_t k = 1; k < first.size(); ++k)
      first[k] = first[k - 1] + strategy.stage_layers[k - 1];
    return first;
  }
  auto compute = [&] {
    // Blocks balanced by the FLOPs their forward and backward ops run (recomputation included).
    std::optional<ModelFootprint> own;
    const ModelFootprint& footprint = footprintFor(model, strategy, cache, own);
    std::vector<double> costs;
    for (const TransformerBlock& block : model.blocks) {
      costs.push_back(footprint.block(block).work_flops);
    }
    return partitionLayers(costs, footprint.embedding.work_flops, footprint.head.work_flops, K);
  };
  if (cache == nullptr) return compute();
  return cache->partition({strategy.micro_batch, strategy.tp, strategy.sequence_parallel,
                           static_cast<int>(strategy.recompute), strategy.cp, strategy.ep, K},
                          compute);
}

int64_t chunkParameters(const ModelConfig& model, const Strategy& strategy, int first_layer,
                        int end_layer, bool has_embedding, bool has_head, PlanCache* cache) {
  std::optional<ModelFootprint> own;
  const ModelFootprint& footprint = footprintFor(model, strategy, cache, own);
  int64_t params = has_embedding ? footprint.embedding.weights : 0;
  for (int layer = first_layer; layer < end_layer; ++layer) {
    params += footprint.block(model.blocks[layer]).weights;
  }
  if (has_head) {
    params += footprint.head.weights;
    if (headOwnsOutputWeight(model, has_embedding)) params += footprint.output_weights;
  }
  return params;
}

const PlanCache::Placements& stagePlacements(const Strategy& strategy, int gpus_per_node,
                                             PlanCache& cache) {
  return cache.placements({strategy.tp, strategy.pp, strategy.dp, strategy.cp, strategy.ep}, [&] {
    RankLayout layout(strategy, gpus_per_node);
    PlanCache::Placements out;
    for (int s = 0; s < strategy.pp; ++s) {
      out.tp.push_back(layout.worstTpGroup(s));
      out.dp.push_back(layout.worstDpGroup(s));
      // Without CP or EP those groups are trivial (a dense model pays nothing for them).
      out.cp_ring.push_back(strategy.cp > 1 ? layout.worstCpRingPair(s) : Placement{});
      out.ep.push_back(strategy.ep > 1 ? layout.worstEpGroup(s) : Placement{});
      out.expert_dp.push_back(strategy.ep > 1 ? layout.worstExpertDpGroup(s) : out.dp.back());
    }
    return out;
  });
}

std::vector<int> IterationPlan::deviceChunks(int device_stage) const {
  EVSIM_CHECK(device_stage >= 0 && device_stage < deviceStages(), "device stage {} of {}",
              device_stage, deviceStages());
  std::vector<int> out;
  for (int c = 0; c < chunksPerDevice(); ++c) out.push_back(virtualStageOf(device_stage, c));
  return out;
}

int IterationPlan::pipelineOf(int dp) const {
  for (size_t c = 0; c < pipelines.size(); ++c) {
    for (int r : pipelines[c].replicas) {
      if (r == dp) return static_cast<int>(c);
    }
  }
  EVSIM_THROW(Error, "DP replica {} is in no pipeline class", dp);
}

std::vector<StepOp> optimizerStepOps(int64_t params, DType model_dtype, Offload offload) {
  if (!offloadsOptimizer(offload)) {
    return {{makeCompute("adam", {{"params", params}}, "", DType::kFp32), Stream::kCompute,
             "adam_step"}};
  }
  return {{makeCompute("offload_d2h", {{"elems", params}}, "", DType::kFp32), Stream::kHost,
           "grad_to_host"},
          {makeCompute("cpu_adam", {{"params", params}}, "", DType::kFp32), Stream::kHost,
           "cpu_adam_step"},
          {makeCompute("offload_h2d", {{"elems", params}}, "", model_dtype), Stream::kHost,
           "param_to_device"}};
}

namespace {

// Consecutive ops of one layer in an op list: [begin, end).
struct LayerRun {
  size_t begin = 0, end = 0;
  int layer = kEmbeddingLayer;
};

std::vector<LayerRun> layerRuns(const OpList& ops) {
  std::vector<LayerRun> runs;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (runs.empty() || ops[i].layer != runs.back().layer) runs.push_back({i, i, ops[i].layer});
    runs.back().end = i + 1;
  }
  return runs;
}

}  // namespace

void addActivationOffload(StagePlan& stage, DType dtype, EventTable& table) {
  std::map<int, int64_t> saved;  // per layer, per micro-batch
  for (const OpInstance& op : stage.forward) saved[op.layer] += op.saved_bytes;
  const int64_t elem_bytes = dtypeBytes(dtype);
  auto copy = [&](int layer, std::string_view op, std::string_view name, size_t beside) {
    const int64_t elems = (saved[layer] + elem_bytes - 1) / elem_bytes;
    OpInstance out{table.intern(makeCompute(op, {{"elems", elems}}, "", dtype)), Stream::kHost,
                   layer, name};
    out.overlap_ops = static_cast<int>(beside);
    return out;
  };
  OpList forward;
  const std::vector<LayerRun> f = layerRuns(stage.forward);
  for (size_t r = 0; r < f.size(); ++r) {
    forward.insert(forward.end(), stage.forward.begin() + f[r].begin,
                   stage.forward.begin() + f[r].end);
    if (saved[f[r].layer] == 0) continue;
    const size_t beside = r + 1 < f.size() ? f[r + 1].end - f[r + 1].begin : 0;
    forward.push_back(copy(f[r].layer, "offload_d2h", "activation_offload", beside));
  }
  OpList backward;
  std::vector<int> moved(stage.backward.size());  // old backward index -> new
  const std::vector<LayerRun> b = layerRuns(stage.backward);
  for (size_t r = 0; r < b.size(); ++r) {
    // The prefetch of run r + 1's layer goes beside run r; the first run's own prefetch first.
    if (r == 0 && saved[b[r].layer] > 0) {
      backward.push_back(copy(b[r].layer, "offload_h2d", "activation_prefetch", 0));
    }
    if (r + 1 < b.size() && saved[b[r + 1].layer] > 0) {
      backward.push_back(
          copy(b[r + 1].layer, "offload_h2d", "activation_prefetch", b[r].end - b[r].begin));
    }
    for (size_t i = b[r].begin; i < b[r].end; ++i) {
      moved[i] = static_cast<int>(backward.size());
      backward.push_back(stage.backward[i]);
    }
  }
  for (GradBucket& bucket : stage.dp_buckets) {
    if (bucket.ready_after_op >= 0) bucket.ready_after_op = moved[bucket.ready_after_op];
  }
  stage.forward = std::move(forward);
  stage.backward = std::move(backward);
}

IterationPlan buildIterationPlan(const ModelConfig& model, const ClusterConfig& cluster,
                                 const Strategy& strategy, PlanCache* cache) {
  validateStrategy(model, cluster, strategy);
  IterationPlan plan;
  plan.model = model;
  plan.cluster = cluster;
  plan.strategy = strategy;
  plan.micro_batches = strategy.microBatches();
  plan.padded_vocab = model.paddedVocab(strategy.tp);

  const int M = strategy.tp, P = strategy.pp, D = strategy.dp;
  // Model chunks: P*v virtual stages, chunk k on device stage k % P (v = 1: the P stages).
  const int v = strategy.schedule == Schedule::kInterleaved ? strategy.virtual_stages : 1;
  const int K = P * v;
  const int64_t m = plan.micro_batches;
  const RankLayout layout = plan.layout();
  const DType dtype = model.dtype;
  const int64_t elem_bytes = dtypeBytes(dtype);
  const int embedding_streams = embeddingStreams(model);
  std::optional<PlanCache::Placements> own_placements;
  if (cache == nullptr) {
    PlanCache scratch;
    own_placements = stagePlacements(strategy, cluster.gpus_per_node, scratch);
  }
  const PlanCache::Placements& placements =
      cache ? stagePlacements(strategy, cluster.gpus_per_node, *cache) : *own_placements;

  LayerShape shape = layerShape(model, strategy, placements.tp[0]);
  const int C = strategy.cp;
  const int zero = strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
  const bool expert_parallel = strategy.ep > 1;

  std::vector<int> first_layer = stageFirstLayers(model, strategy, cache);
  std::optional<ModelFootprint> own_footprint;
  const ModelFootprint& footprint = footprintFor(model, strategy, cache, own_footprint);
  EventTable& table = plan.events;

  for (int k = 0; k < K; ++k) {
    StagePlan stage;
    stage.stage = k;
    stage.device_stage = k % P;
    stage.chunk = k / P;
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
    shape.ep_group = placements.ep[stage.device_stage];
    LayerOpBuilder builder(shape, table);

    // Each layer's parameters on one rank (its forward ops' weights), for ZeRO-3's gathers and the
    // DDP buckets; the stage's parameters are their sum.
    // Under expert parallelism the routed experts' share is synchronised apart (expert_params).
    std::map<int, int64_t> layer_params, dense_params;
    if (stage.has_embedding) layer_params[kEmbeddingLayer] = footprint.embedding.weights;
    for (int layer = stage.first_layer; layer < end_layer; ++layer) {
      const LayerFootprint& block = footprint.block(model.blocks[layer]);
      layer_params[layer] = block.weights;
      stage.expert_parameters += block.expert_weights;
    }
    const bool owns_output = headOwnsOutputWeight(model, stage.has_embedding);
    if (stage.has_head) {
      layer_params[kHeadLayer] =
          footprint.head.weights + (owns_output ? footprint.output_weights : 0);
    }
    // ZeRO-3: gather a layer's parameters before its forward and again before its backward, and
    // reduce-scatter its gradients right after its backward, in the DP group.
    // When one chunk holds both ends (K = 1), the LM head uses the tied embedding matrix, which
    // ZeRO-3 released after the embedding: the head gathers it again (its gradient is reduced
    // with the embedding's).
    const int64_t tied_head_params = stage.has_head && !owns_output ? footprint.output_weights : 0;
    auto zero3 = [&](OpList& ops, int layer, EventKind kind, std::string_view name) {
      if (zero != 3) return;
      int64_t params = layer_params.at(layer);
      if (layer == kHeadLayer && kind == EventKind::kAllGather) params += tied_head_params;
      Event e = makeCommunication(kind, checkedMul(params, elem_bytes, "ZeRO-3 gather bytes"),
                                  stage.dp_group, dtype);
      ops.push_back(OpInstance{table.intern(e), Stream::kDpComm, layer, name});
    };
    constexpr std::string_view kGather = "zero3_param_allgather";
    constexpr std::string_view kScatter = "zero3_grad_reduce_scatter";
    if (stage.has_embedding) {
      zero3(stage.forward, kEmbeddingLayer, EventKind::kAllGather, kGather);
      builder.embeddingForward(embedding_streams, stage.forward);
    }
    for (int layer = stage.first_layer; layer < end_layer; ++layer) {
      zero3(stage.forward, layer, EventKind::kAllGather, kGather);
      builder.blockForward(model.blocks[layer], layer, stage.forward);
    }
    if (stage.has_head) {
      zero3(stage.forward, kHeadLayer, EventKind::kAllGather, kGather);
      builder.headForward(stage.forward, owns_output);
      zero3(stage.backward, kHeadLayer, EventKind::kAllGather, kGather);
      builder.headBackward(stage.backward);
      zero3(stage.backward, kHeadLayer, EventKind::kReduceScatter, kScatter);
    }
    for (int layer = end_layer - 1; layer >= stage.first_layer; --layer) {
      zero3(stage.backward, layer, EventKind::kAllGather, kGather);
      builder.blockBackward(model.blocks[layer], layer, stage.backward);
      zero3(stage.backward, layer, EventKind::kReduceScatter, kScatter);
    }
    if (stage.has_embedding) {
      zero3(stage.backward, kEmbeddingLayer, EventKind::kAllGather, kGather);
      builder.embeddingBackward(embedding_streams, stage.backward);
      zero3(stage.backward, kEmbeddingLayer, EventKind::kReduceScatter, kScatter);
    }

    // Checked, like the byte counts below: sized by hidden^2 x layers from the model file.
    for (const auto& [layer, params] : layer_params) {
      stage.parameters = checkedAdd(stage.parameters, params, "stage parameters");
    }
    dense_params = layer_params;
    if (expert_parallel) {
      for (int layer = stage.first_layer; layer < end_layer; ++layer) {
        dense_params[layer] -= footprint.block(model.blocks[layer]).expert_weights;
      }
    }
    const int64_t synced_apart = expert_parallel ? stage.expert_parameters : 0;
    // Under ZeRO each DP rank steps only its shard (the last shard may be smaller; we take the
    // larger, rounded-up one, which is what the slowest rank runs).
    // Dense parameters shard over D x C ranks, routed experts' (with E > 1) over D x C / E.
    const int G = strategy.gradGroupSize(), Ge = strategy.expertGradGroupSize();
    const int64_t optimizer_params =
        zero > 0 ? (stage.parameters - synced_apart + G - 1) / G + (synced_apart + Ge - 1) / Ge
                 : stage.parameters;
    for (const StepOp& op : optimizerStepOps(optimizer_params, dtype, strategy.offload)) {
      stage.optimizer.push_back(
          OpInstance{table.intern(op.event), op.stream, kEmbeddingLayer, op.name});
    }

    const EventKind grad_kind = zero > 0 ? EventKind::kReduceScatter : EventKind::kAllReduce;
    if (strategy.gradGroupSize() > 1 && zero < 3) {
      const int64_t dense_bytes =
          checkedMul(stage.parameters - synced_apart, elem_bytes, "gradient bytes");
      if (strategy.dp_overlap) {
        buildBuckets(stage, dense_params, elem_bytes, strategy.dp_bucket_bytes, stage.dp_group,
                     dtype, grad_kind, table);
      } else {
        int event = table.intern(makeCommunication(grad_kind, dense_bytes, stage.dp_group, dtype));
        (zero > 0 ? stage.dp_reduce_scatter : stage.dp_allreduce) = event;
      }
      if (zero > 0) {
        stage.dp_allgather = table.intern(
            makeCommunication(EventKind::kAllGather, dense_bytes, stage.dp_group, dtype));
      }
    }
    if (synced_apart > 0 && strategy.expertGradGroupSize() > 1) {
      const int64_t bytes = checkedMul(synced_apart, elem_bytes, "expert gradient bytes");
      const int event =
          table.intern(makeCommunication(grad_kind, bytes, stage.expert_dp_group, dtype));
      if (strategy.dp_overlap) {
        stage.dp_buckets.push_back(
            GradBucket{event, static_cast<int>(stage.backward.size()) - 1, bytes, true});
      } else {
        stage.expert_grad_sync = event;
      }
      if (zero > 0) {
        stage.expert_allgather = table.intern(
            makeCommunication(EventKind::kAllGather, bytes, stage.expert_dp_group, dtype));
      }
    }
    if (offloadsActivations(strategy.offload)) addActivationOffload(stage, dtype, table);
    if (k + 1 < K) {
      // A decoder stage of an encoder-decoder model also forwards the encoder output.
      bool next_is_cross = model.blocks[end_layer].cross_attention;
      // With SP the tensor between stages is the sequence shard (s/t tokens), as in Megatron.
      stage.activation_bytes_out =
          shape.regionTokens() * model.hidden_size * elem_bytes * (next_is_cross ? 2 : 1);
    }
    plan.stages.push_back(std::move(stage));
  }

  // Pipeline classes: DP replicas with identical transfer placements are simulated once.
  std::map<std::vector<int>, int> class_of;
  // Chunk k sends from device stage k % P to (k + 1) % P: with v chunks per device the P pairs
  // repeat, so each is placed once per replica.
  std::vector<Placement> pair_of_stage(P);
  for (int d = 0; d < D; ++d) {
    PipelineClass pipeline;
    for (int p = 0; p < P && p + 1 < K; ++p) {
      pair_of_stage[p] = layout.worstStagePair(d, p, (p + 1) % P);
    }
    for (int k = 0; k + 1 < K; ++k) {
      const Placement& pair = pair_of_stage[k % P];
      int event = table.intern(
          makeCommunication(EventKind::kP2P, plan.stages[k].activation_bytes_out, pair, dtype));
      pipeline.forward_p2p.push_back(event);
      pipeline.backward_p2p.push_back(event);  // the gradient has the activation's shape
    }
    auto [it, inserted] =
        class_of.try_emplace(pipeline.forward_p2p, static_cast<int>(plan.pipelines.size()));
    if (inserted) plan.pipelines.push_back(std::move(pipeline));
    plan.pipelines[it->second].replicas.push_back(d);
  }

  // Counts over all devices.
  const int64_t devices_per_stage = int64_t{M} * C * D;
  for (const StagePlan& stage : plan.stages) {
    for (const OpInstance& op : stage.forward) table.addCount(op.event, m * devices_per_stage);
    for (const OpInstance& op : stage.backward) table.addCount(op.event, m * devices_per_stage);
    for (const OpInstance& op : stage.optimizer) table.addCount(op.event, devices_per_stage);
    if (stage.dp_allreduce >= 0) table.addCount(stage.dp_allreduce, devices_per_stage);
    if (stage.dp_reduce_scatter >= 0) table.addCount(stage.dp_reduce_scatter, devices_per_stage);
    if (stage.dp_allgather >= 0) table.addCount(stage.dp_allgather, devices_per_stage);
    if (stage.expert_grad_sync >= 0) table.addCount(stage.expert_grad_sync, devices_per_stage);
    if (stage.expert_allgather >= 0) table.addCount(stage.expert_allgather, devices_per_stage);
    for (const GradBucket& b : stage.dp_buckets) table.addCount(b.event, devices_per_stage);
  }
  for (const PipelineClass& pipeline : plan.pipelines) {
    const int64_t transfers = m * M * C * static_cast<int64_t>(pipeline.replicas.size());
    for (int k = 0; k + 1 < K; ++k) {
      table.addCount(pipeline.forward_p2p[k], 2 * transfers);  // send + receive
      table.addCount(pipeline.backward_p2p[k], 2 * transfers);
    }
  }
  for (const UniqueEvent& e : table.events()) {
    plan.op_executions = checkedAdd(plan.op_executions, e.count, "op executions");
  }
  return plan;
}

}  // namespace evsim
