#include "plan/iteration_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/checked.h"
#include "common/error.h"
#include "ops/layer_ops.h"
#include "plan/layer_shape.h"
#include "plan/plan_core.h"
#include "plan/stage_partition.h"

namespace evsim {

namespace {

// The footprints of every layer kind under `strategy`'s shape.
ModelFootprint strategyFootprint(const ModelConfig& model, const Strategy& strategy) {
  // Placement does not change any sum: any valid group of M ranks will do.
  return modelFootprint(model, layerShape(model, strategy, Placement{strategy.tp, 1, strategy.tp}));
}

// The same from `cache` when given (the reference lives there), or computed into `own`.
// What decides a block's saved bytes and recomputed ops besides the shape: the recomputation
// (< 8 kinds) and xformers' SwiGLU (8), one key field of the footprint and partition caches.
int recomputeKey(const Strategy& strategy) {
  static_assert(static_cast<int>(Recompute::kSelectiveOp) < 8);
  return static_cast<int>(strategy.recompute) + (strategy.swiglu_recompute_product ? 8 : 0);
}

const ModelFootprint& footprintFor(const ModelConfig& model, const Strategy& strategy,
                                   PlanCache* cache, std::optional<ModelFootprint>& own) {
  if (cache == nullptr) return own.emplace(strategyFootprint(model, strategy));
  return cachedFootprint(model, strategy, *cache);
}

}  // namespace

const ModelFootprint& cachedFootprint(const ModelConfig& model, const Strategy& strategy,
                                      PlanCache& cache) {
  return cache.footprint({strategy.micro_batch, strategy.tp, strategy.sequence_parallel,
                          recomputeKey(strategy), strategy.cp, strategy.ep, strategy.expertTp()},
                         [&] { return strategyFootprint(model, strategy); });
}

std::vector<int> stageFirstLayers(const ModelConfig& model, const Strategy& strategy,
                                  PlanCache* cache) {
  std::vector<int> first;
  stageFirstLayers(model, strategy, cache, first);
  return first;
}

void stageFirstLayers(const ModelConfig& model, const Strategy& strategy, PlanCache* cache,
                      std::vector<int>& first) {
  const int K = pipelineLayout(strategy).stages();
  if (!strategy.stage_layers.empty()) {
    // The user's split (validated by strategyViolation): prefix sums.
    first.assign(strategy.stage_layers.size(), 0);
    for (size_t k = 1; k < first.size(); ++k)
      first[k] = first[k - 1] + strategy.stage_layers[k - 1];
    return;
  }
  auto compute = [&] {
    // Blocks balanced by the FLOPs their forward and backward ops run (recomputation included).
    std::optional<ModelFootprint> own, own_plain;
    const ModelFootprint& footprint = footprintFor(model, strategy, cache, own);
    std::vector<double> costs;
    costs.reserve(model.blocks.size());
    for (const TransformerBlock& block : model.blocks) {
      costs.push_back(footprint.block(block).work_flops);
    }
    if (strategy.recompute_every > 1) {
      // Which blocks recompute depends on the split (plan/layer_checkpoint.h): each block is
      // costed with 1/N of its recomputation, the share it has on average.
      Strategy plain = strategy;
      plain.recompute = Recompute::kNone;
      plain.recompute_every = 0;
      const ModelFootprint& without = footprintFor(model, plain, cache, own_plain);
      for (size_t i = 0; i < costs.size(); ++i) {
        const double kept = without.block(model.blocks[i]).work_flops;
        costs[i] = kept + (costs[i] - kept) / strategy.recompute_every;
      }
    }
    const double first_extra = footprint.embedding.work_flops;
    const double last_extra = footprint.head.work_flops;
    auto partition = [&] { return partitionLayers(costs, first_extra, last_extra, K); };
    if (cache == nullptr) return partition();
    // Scaled by a power of two (exact): the partition of the scaled costs is the same.
    double largest = std::max(first_extra, last_extra);
    for (double c : costs) largest = std::max(largest, c);
    const int exponent = largest > 0 && std::isfinite(largest) ? std::ilogb(largest) : 0;
    PlanCache::CostKey key{costs, std::ldexp(first_extra, -exponent),
                           std::ldexp(last_extra, -exponent), K};
    for (double& c : std::get<0>(key)) c = std::ldexp(c, -exponent);
    // Through a one-reference lambda, which std::function holds without allocating.
    return cache->partitionOfCosts(key, [&partition] { return partition(); });
  };
  if (cache == nullptr) {
    first = compute();
    return;
  }
  // The recomputation, the SwiGLU kernel and the step (--recompute-every) in one key field;
  // copied into `first`'s storage.
  first = cache->partition({strategy.micro_batch, strategy.tp, strategy.sequence_parallel,
                            recomputeKey(strategy) + 16 * std::max(strategy.recompute_every, 0),
                            strategy.cp, strategy.ep, strategy.expertTp(), K},
                           [&compute] { return compute(); });
}

int64_t chunkParameters(const ModelConfig& model, const Strategy& strategy, int first_layer,
                        int end_layer, bool has_embedding, bool has_head, PlanCache* cache) {
  std::optional<ModelFootprint> own;
  return chunkParameters(model, footprintFor(model, strategy, cache, own), first_layer, end_layer,
                         has_embedding, has_head);
}

int64_t chunkParameters(const ModelConfig& model, const ModelFootprint& footprint, int first_layer,
                        int end_layer, bool has_embedding, bool has_head) {
  int64_t params = has_embedding ? footprint.embedding.weights : 0;
  for (int layer = first_layer; layer < end_layer; ++layer) {
    params += footprint.block(model.blocks[layer]).weights;
  }
  if (has_head) params += headParameters(model, footprint, has_embedding);
  return params;
}

const PlanCache::Placements& stagePlacements(const Strategy& strategy, int gpus_per_node,
                                             PlanCache& cache) {
  return cache.placements(
      {strategy.tp, strategy.pp, strategy.dp, strategy.cp, strategy.ep, strategy.expertTp(),
       strategy.cpA2aSize(), strategy.cpRingSize()},
      [&] {
        RankLayout layout(strategy, gpus_per_node);
        PlanCache::Placements out;
        for (int s = 0; s < strategy.pp; ++s) {
          out.tp.push_back(layout.worstTpGroup(s));
          out.dp.push_back(layout.worstDpGroup(s));
          // Without CP or EP those groups are trivial (a dense model pays nothing for them).
          // The ring over C (p2p) or over the ranks C / A apart in CP index (a2a+p2p); the
          // collectives over the whole CP group (a2a, allgather) or its blocks of A (a2a+p2p).
          const int ring = strategy.cpRingSize(), a2a = strategy.cpA2aSize();
          out.cp_ring.push_back(ring > 1 ? layout.worstCpRingPair(s, strategy.cp / ring)
                                         : Placement{});
          out.cp_group.push_back(strategy.cp == 1 ? Placement{}
                                 : a2a > 1        ? layout.worstCpBlock(s, a2a)
                                 : ring == 1      ? layout.worstCpGroup(s)
                                                  : Placement{});
          out.ep.push_back(strategy.ep > 1 ? layout.worstEpGroup(s) : Placement{});
          // The TP group when ETP = M (the same ranks); its own placement otherwise.
          out.etp.push_back(strategy.expertTp() == strategy.tp ? out.tp.back()
                            : strategy.expertTp() > 1          ? layout.worstEtpGroup(s)
                                                               : Placement{});
          out.expert_dp.push_back(strategy.expertsSyncApart() ? layout.worstExpertDpGroup(s)
                                                              : out.dp.back());
        }
        return out;
      });
}

std::vector<int> IterationPlan::deviceChunks(int device_stage) const {
  EVSIM_CHECK(device_stage >= 0 && device_stage < deviceStages(), "device stage {} of {}",
              device_stage, deviceStages());
  const PipelineLayout layout = pipelineLayout();
  std::vector<int> out;
  for (int c = 0; c < layout.chunks(); ++c) out.push_back(layout.virtualStage(device_stage, c));
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
  for (const OpInstance& op : stage.forward) {
    saved[op.layer] = saturatingAdd(saved[op.layer], op.saved_bytes);  // as the memory model sums
  }
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
    backward.insert(backward.end(), stage.backward.begin() + b[r].begin,
                    stage.backward.begin() + b[r].end);
  }
  stage.forward = std::move(forward);
  stage.backward = std::move(backward);
}

namespace {

// `plan` (model and cluster set, no events) for the validated `strategy`: its core (cached or
// built), then what the ZeRO stage, DP overlap and batch size add.
void fillPlan(const Strategy& strategy, PlanCache& cache, IterationPlan& plan) {
  plan.strategy = strategy;
  plan.micro_batches = strategy.microBatches();
  plan.padded_vocab = plan.model.paddedVocab(strategy.tp);
  std::shared_ptr<const PlanCore> core = cache.core(planCoreKey(strategy), [&] {
    return buildPlanCore(plan.model, plan.cluster, strategy, cache);
  });
  finishPlan(*core, plan);
}

}  // namespace

IterationPlan buildIterationPlan(const ModelConfig& model, const ClusterConfig& cluster,
                                 const Strategy& strategy, PlanCache* cache) {
  // Validated before anything is copied (an invalid candidate is the common case in a search).
  validateStrategy(model, cluster, strategy);
  IterationPlan plan;
  plan.model = model;
  plan.cluster = cluster;
  // One path with or without a cache.
  std::optional<PlanCache> scratch;
  fillPlan(strategy, cache != nullptr ? *cache : scratch.emplace(0), plan);
  return plan;
}

void rebuildIterationPlan(const Strategy& strategy, PlanCache& cache, IterationPlan& plan) {
  validateStrategy(plan.model, plan.cluster, strategy);
  plan.events.clear();  // keeps its events' storage
  plan.op_executions = 0;
  fillPlan(strategy, cache, plan);
}

}  // namespace evsim
