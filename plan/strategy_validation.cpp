// Whether a strategy can run a model on a cluster: M/P/D against the model's shapes and the
// cluster's GPUs, batch and simulation bounds, the schedules' rules, stage layers, ZeRO, FSDP and
// offload, then the per-technique checks (strategy_technique_checks.cpp). Apart from strategy.cpp,
// which names and parses strategies and needs none of this.
#include <algorithm>

#include "common/error.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"
#include "plan/schedules/schedule_file.h"
#include "plan/strategy.h"
#include "plan/strategy_check_report.h"
#include "plan/strategy_technique_checks.h"

namespace evsim {

namespace {

template <typename Report>
std::optional<typename Report::Value> crossNodeTpCheck(const ClusterConfig& cluster,
                                                       const Strategy& s, const Report& report) {
  if (cluster.gpus_per_node % s.tp == 0) return std::nullopt;
  return report(StrategyRule::kCrossNodeTp,
                "{}: M={} does not divide the {} GPUs of a node (TP would cross nodes; "
                "--allow-cross-node-tp lifts this)",
                StrategyLabel{s}, s.tp, cluster.gpus_per_node);
}

// Every rule but the cross-node one, in order: the first broken is reported.
template <typename Report>
std::optional<typename Report::Value> strategyCheck(const ModelConfig& model,
                                                    const ClusterConfig& cluster, const Strategy& s,
                                                    const Report& report) {
  const StrategyLabel label{s};
  if (s.tp <= 0 || s.pp <= 0 || s.dp <= 0)
    return report(StrategyRule::kSizesNotPositive, "{}: M, P and D must be > 0", label);
  // Before any int64 product of M, C, P and D (four ints may overflow one; exact in double here):
  // per-replica lists and op counts grow with the world, so it is bounded like the batch.
  const double world = static_cast<double>(s.tp) * s.cp * s.pp * s.dp;
  if (world > static_cast<double>(kMaxStrategyGpus)) {
    return report(StrategyRule::kTooManyGpus,
                  "{}: {} = {:.3g} GPUs, more than the {} eventsim simulates", label,
                  s.cp > 1 ? "M x C x P x D" : "M x P x D", world, kMaxStrategyGpus);
  }
  if (auto why = contextParallelCheck(model, s, report)) return why;
  if (auto why = expertParallelCheck(model, s, report)) return why;
  if (auto why = opCheckpointCheck(model, s, report)) return why;
  if (model.num_heads % s.tp != 0) {
    return report(StrategyRule::kHeads, "{}: M={} does not divide num_heads={} of {}", label, s.tp,
                  model.num_heads, model.name);
  }
  if (model.hidden_size % s.tp != 0) {
    return report(StrategyRule::kHidden, "{}: M={} does not divide hidden_size={} of {}", label,
                  s.tp, model.hidden_size, model.name);
  }
  if (model.queryGroups() % s.tp != 0) {
    return report(StrategyRule::kQueryGroups, "{}: M={} does not divide num_query_groups={} of {}",
                  label, s.tp, model.queryGroups(), model.name);
  }
  if (model.ffn_hidden_size % s.tp != 0) {
    return report(StrategyRule::kFfn, "{}: M={} does not divide ffn_hidden_size={} of {}", label,
                  s.tp, model.ffn_hidden_size, model.name);
  }
  if (s.pp > model.numLayers()) {
    return report(StrategyRule::kStagesOverLayers, "{}: P={} is more than the {} layers of {}",
                  label, s.pp, model.numLayers(), model.name);
  }
  if (auto total = cluster.totalGpus(); total && s.gpus() > *total) {
    return report(StrategyRule::kClusterGpus,
                  "{}: needs {} GPUs, cluster {} has {} ({} nodes x {})", label, s.gpus(),
                  cluster.name, *total, *cluster.nodes, cluster.gpus_per_node);
  }
  if (s.micro_batch <= 0)
    return report(StrategyRule::kMicroBatchNotPositive, "--micro-batch {}: must be > 0",
                  s.micro_batch);
  if (s.global_batch <= 0)
    return report(StrategyRule::kGlobalBatchNotPositive, "--global-batch {}: must be > 0",
                  s.global_batch);
  // The work an iteration implies is bounded before any plan is built: 10^8 micro-batches were
  // killed by the kernel at 21.6 GB (issue 17). The bounds are far beyond any training run.
  if (s.micro_batch > kMaxMicroBatch) {
    return report(StrategyRule::kMicroBatchOverMax, "--micro-batch {}: must be <= {}",
                  s.micro_batch, kMaxMicroBatch);
  }
  if (s.global_batch > kMaxGlobalBatch) {
    return report(StrategyRule::kGlobalBatchOverMax, "--global-batch {}: must be <= {}",
                  s.global_batch, kMaxGlobalBatch);
  }
  if (s.global_batch % (s.micro_batch * s.dp) != 0) {
    return report(StrategyRule::kGlobalBatchIndivisible,
                  "--global-batch {}: not divisible by micro-batch x D = {} x {} = {}",
                  s.global_batch, s.micro_batch, s.dp, s.micro_batch * s.dp);
  }
  if (s.microBatches() > kMaxMicroBatches) {
    return report(
        StrategyRule::kMicroBatchesOverMax,
        "--global-batch {}: m = B/(b*D) = {} micro-batches per iteration, more than the {} "
        "eventsim simulates (raise --micro-batch or D)",
        s.global_batch, s.microBatches(), kMaxMicroBatches);
  }
  // The simulation steps every block of every micro-batch: 4096 blocks x 512 micro-batches took a
  // minute on one core, the largest files and flags allowed hours. Bounded 16x beyond the largest
  // runs (126 blocks x 2048 micro-batches).
  constexpr int64_t kMaxBlockExecutions = int64_t{1} << 22;
  if (model.numLayers() * s.microBatches() > kMaxBlockExecutions) {
    return report(
        StrategyRule::kBlockExecutionsOverMax,
        "--global-batch {}: {} blocks x m = {} micro-batches = {} block executions per iteration, "
        "more than the {} eventsim simulates (raise --micro-batch or D)",
        s.global_batch, model.numLayers(), s.microBatches(), model.numLayers() * s.microBatches(),
        kMaxBlockExecutions);
  }
  if (s.dp_overlap && s.dp_bucket_bytes < 0) {
    return report(StrategyRule::kDpBucketBytes,
                  "--dp-bucket-mb: bucket of {} bytes must be > 0 (0: the framework's default)",
                  s.dp_bucket_bytes);
  }
  if (s.schedule == Schedule::kInterleaved) {
    if (s.virtual_stages < 2) {
      return report(StrategyRule::kInterleavedNeedsV,
                    "--virtual-stages {}: the interleaved schedule needs v >= 2", s.virtual_stages);
    }
    if (s.pp < 2)
      return report(StrategyRule::kInterleavedNeedsP, "{}: the interleaved schedule needs P >= 2",
                    label);
    if (s.virtual_stages > kMaxChunksPerDevice) {
      return report(StrategyRule::kInterleavedVOverMax,
                    "--virtual-stages {}: at most {} model chunks per device", s.virtual_stages,
                    kMaxChunksPerDevice);
    }
    // Given stage layers are checked below (the first and last chunk may hold no block).
    if (s.stage_layers.empty() && int64_t{s.pp} * s.virtual_stages > model.numLayers()) {
      return report(StrategyRule::kInterleavedChunksOverLayers,
                    "{} --virtual-stages {}: P x v = {} model chunks but {} has {} layers", label,
                    s.virtual_stages, int64_t{s.pp} * s.virtual_stages, model.name,
                    model.numLayers());
    }
    // Megatron's table (schedules.py, get_schedule_table): groups of N micro-batches, the last
    // one the remainder, which must be 0 or >= P (a shorter last group is refused there).
    const int64_t m = s.microBatches();
    const int64_t group = s.microbatchGroup();
    if (s.microbatch_group == 0 && m % s.pp != 0) {
      return report(StrategyRule::kInterleavedMicroBatches,
                    "{} --schedule interleaved: m = B/(b*D) = {} micro-batches is not a "
                    "multiple of P={} (or give --microbatch-group-size N)",
                    label, m, s.pp);
    }
    if (group > m) {
      return report(StrategyRule::kGroupOverMicroBatches,
                    "--microbatch-group-size {}: more than the m = B/(b*D) = {} micro-batches",
                    group, m);
    }
    // Megatron refuses N < P: with its warm-up count the orders then wait on each other (the
    // timing engine finds the deadlock); the Llama 3 paper's N < P needs a warm-up it does not
    // state.
    if (group < s.pp) {
      return report(
          StrategyRule::kGroupBelowP,
          "--microbatch-group-size {}: fewer than P={} (Megatron's range is [P, m]; a smaller "
          "group deadlocks its warm-up count)",
          group, s.pp);
    }
    if (m % group != 0 && m % group < s.pp) {
      return report(
          StrategyRule::kGroupRemainder,
          "--microbatch-group-size {}: m = {} micro-batches leave a last group of {}, which must "
          "be 0 or >= P={} (Megatron's rule)",
          group, m, m % group, s.pp);
    }
  } else if (s.schedule == Schedule::kZbv || s.schedule == Schedule::kDualPipeV) {
    const std::string_view name = scheduleName(s.schedule);
    if (s.pp < 2)
      return report(StrategyRule::kVScheduleNeedsP, "{}: the {} schedule needs P >= 2", label,
                    name);
    if (int64_t{2} * s.pp > model.numLayers()) {
      return report(StrategyRule::kVScheduleChunksOverLayers,
                    "{} --schedule {}: 2 x P = {} model chunks but {} has {} layers", label, name,
                    2 * s.pp, model.name, model.numLayers());
    }
    // DualPipeV's order (deepseek-ai/DualPipe, dualpipev.py) asserts m >= 2P: its warm-up
    // forwards 2P micro-batches through chunk 0 of device 0 before the first fused pair.
    if (s.schedule == Schedule::kDualPipeV && s.microBatches() < int64_t{2} * s.pp) {
      return report(
          StrategyRule::kDualPipeVMicroBatches,
          "{} --schedule dualpipev: m = B/(b*D) = {} micro-batches, the schedule needs m >= 2P "
          "= {}",
          label, s.microBatches(), 2 * s.pp);
    }
  }
  if (s.schedule == Schedule::kFile) {
    const std::shared_ptr<const ScheduleFile> file = installedScheduleFile();
    if (!file)
      return report(StrategyRule::kScheduleFileMissing, "--schedule file: no schedule file loaded");
    if (file->layout.devices() != s.pp || file->micro_batches != s.microBatches()) {
      return report(StrategyRule::kScheduleFileShape,
                    "{} --schedule {}: written for P={} and m={} micro-batches, the strategy "
                    "has P={} and m = B/(b*D) = {}",
                    label, file->path, file->layout.devices(), file->micro_batches, s.pp,
                    s.microBatches());
    }
    if (int64_t{file->layout.stages()} > model.numLayers()) {
      return report(StrategyRule::kScheduleFileChunksOverLayers,
                    "{} --schedule {}: {} model chunks but {} has {} layers", label, file->path,
                    file->layout.stages(), model.name, model.numLayers());
    }
  }
  if (s.schedule != Schedule::kInterleaved && s.microbatch_group != 0) {
    return report(StrategyRule::kGroupOnlyInterleaved,
                  "--microbatch-group-size {}: only with --schedule interleaved",
                  s.microbatch_group);
  }
  if (s.schedule != Schedule::kInterleaved && s.virtual_stages != 1) {
    return report(StrategyRule::kVirtualStagesOnlyInterleaved,
                  "--virtual-stages {}: only with --schedule interleaved", s.virtual_stages);
  }
  // Zero-bubble orders fill the warm-up with at least P forwards (plan/schedules/zb_h*.cpp).
  if ((s.schedule == Schedule::kZbh1 || s.schedule == Schedule::kZbh2) && s.microBatches() < s.pp) {
    return report(StrategyRule::kZeroBubbleMicroBatches,
                  "{} --schedule {}: m = B/(b*D) = {} micro-batches, the schedule needs m >= P={}",
                  label, scheduleName(s.schedule), s.microBatches(), s.pp);
  }
  // The attention scores of one layer, b x a x s^2 elements, size the op list's saved bytes and
  // memory traffic in int64 (bytes: times up to 4): bounded here, before any product is formed.
  constexpr double kMaxScoreElements = 36028797018963968.0;  // 2^55
  const double score_elements =
      static_cast<double>(s.micro_batch) * static_cast<double>(model.num_heads) *
      static_cast<double>(model.seq_length) * static_cast<double>(model.seq_length);
  if (score_elements > kMaxScoreElements) {
    return report(
        StrategyRule::kAttentionScoresOverMax,
        "{} b={}: the attention scores of one layer, b x a x s^2 = {:.3g} elements, are more "
        "than eventsim models (2^55)",
        label, s.micro_batch, score_elements);
  }
  // Likewise the widest activation of a layer, b x s x max(h, 2 x ffn (SwiGLU), V/M) elements (the
  // logits in fp32 times 4 bytes overflowed int64 within the other bounds).
  const double widest = std::max({static_cast<double>(model.hidden_size),
                                  2.0 * static_cast<double>(model.ffn_hidden_size),
                                  static_cast<double>(model.vocab_size) / s.tp});
  const double activation_elements =
      static_cast<double>(s.micro_batch) * static_cast<double>(model.seq_length) * widest;
  if (activation_elements > kMaxScoreElements) {
    return report(
        StrategyRule::kWidestActivationOverMax,
        "{} b={}: the widest activation of one layer, b x s x max(h, 2 x ffn, V/M) = {:.3g} "
        "elements, is more than eventsim models (2^55)",
        label, s.micro_batch, activation_elements);
  }
  if (!s.stage_layers.empty()) {
    const int chunks = pipelineLayout(s).stages();
    if (static_cast<int>(s.stage_layers.size()) != chunks) {
      return report(StrategyRule::kStageLayersCount,
                    "--stage-layers: {} entries for {} model chunks (P x v)", s.stage_layers.size(),
                    chunks);
    }
    int64_t total = 0;
    for (size_t k = 0; k < s.stage_layers.size(); ++k) {
      const int n = s.stage_layers[k];
      // The first chunk (the embedding) and the last (the loss) may hold no block, as Megatron's
      // --account-for-embedding/loss-in-pipeline-split makes them with one layer per chunk.
      const bool end_chunk = chunks > 1 && (k == 0 || k + 1 == s.stage_layers.size());
      if (n < (end_chunk ? 0 : 1)) {
        return report(StrategyRule::kStageLayersEmptyChunk,
                      "--stage-layers: {}: every chunk needs >= 1 layer (the first and last >= 0)",
                      n);
      }
      total += n;
    }
    if (total != model.numLayers()) {
      return report(StrategyRule::kStageLayersTotal,
                    "--stage-layers: {} layers in all, but {} has {}", total, model.name,
                    model.numLayers());
    }
  }
  if (s.sequence_parallel) {
    if (s.tp < 2)
      return report(StrategyRule::kSpNeedsM, "{} --sequence-parallel: needs M >= 2", label);
    if (model.seq_length % s.tp != 0) {
      return report(StrategyRule::kSpSequence,
                    "{} --sequence-parallel: M={} does not divide seq_length={} of {}", label, s.tp,
                    model.seq_length, model.name);
    }
  }
  if (s.zero_stage < 0 || s.zero_stage > 3) {
    return report(StrategyRule::kZeroStage, "--zero {}: must be 0, 1, 2 or 3", s.zero_stage);
  }
  if (s.framework == Framework::kFsdp) {
    // FSDP's full shard is ZeRO-3's layout and events; without a group to shard over it runs as
    // plain replicas (torchtitan with dp_shard = 1).
    const int expected = s.gradGroupSize() > 1 ? 3 : 0;
    if (s.zero_stage != expected) {
      return report(
          StrategyRule::kFsdpZeroStage,
          "{} --framework fsdp --zero {}: FSDP shards parameters, gradients and optimizer state "
          "over D x C = {} (ZeRO stage {}); no other stage applies",
          label, s.zero_stage, s.gradGroupSize(), expected);
    }
    if (s.offload != Offload::kNone) {
      return report(StrategyRule::kFsdpOffload,
                    "{} --framework fsdp --offload {}: FSDP's CPU offload is not modelled", label,
                    offloadName(s.offload));
    }
  }
  if (auto why = frameworkFlagCheck(s, report)) return why;
  if (auto why = overlapCheck(model, cluster, s, report)) return why;
  if (auto why = moeCommCheck(cluster, s, report)) return why;
  if (s.zero_stage == 3 && s.dp_overlap) {
    return report(StrategyRule::kZero3DpOverlap,
                  "{} --zero 3 --dp-overlap: ZeRO-3 reduce-scatters each layer's gradients "
                  "inside the backward; there are no DDP buckets to overlap",
                  label);
  }
  if (s.zero_stage > 0 && s.gradGroupSize() < 2) {
    return report(StrategyRule::kZeroNeedsGroup,
                  "{} --zero {}: sharding over the DP group needs D x C >= 2", label, s.zero_stage);
  }
  if (s.offload != Offload::kNone) {
    if (!cluster.host_link || !cluster.host_memory) {
      return report(StrategyRule::kOffloadNoHost,
                    "--offload {}: cluster {} has no host side to offload to (node: host_link and "
                    "host_memory in {})",
                    offloadName(s.offload), cluster.name, cluster.source);
    }
    if (offloadsActivations(s.offload) && pipelineSchedule(s.schedule).splitsBackward()) {
      return report(
          StrategyRule::kOffloadSplitBackward,
          "{} --offload {} --schedule {}: not modelled (a split backward keeps its W inputs on "
          "the device between B and W)",
          label, offloadName(s.offload), scheduleName(s.schedule));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<StrategyViolation> checkStrategy(const ModelConfig& model,
                                               const ClusterConfig& cluster, const Strategy& s) {
  return strategyCheck(model, cluster, s, ViolationReport{});
}

std::optional<std::string> strategyViolation(const ModelConfig& model, const ClusterConfig& cluster,
                                             const Strategy& s) {
  return strategyCheck(model, cluster, s, MessageReport{});
}

std::optional<StrategyViolation> checkCrossNodeTp(const ClusterConfig& cluster, const Strategy& s) {
  return crossNodeTpCheck(cluster, s, ViolationReport{});
}

std::optional<std::string> crossNodeTpViolation(const ClusterConfig& cluster, const Strategy& s) {
  return crossNodeTpCheck(cluster, s, MessageReport{});
}

std::string violationMessage(const ModelConfig& model, const ClusterConfig& cluster,
                             const Strategy& s, const StrategyViolation& violation) {
  const bool cross_node = violation.rule == StrategyRule::kCrossNodeTp;
  // The message is derived again from `s`: it must be the violation the caller counted (a search
  // checks a variant's techniques-free strategy once for all its variants), or the count would be
  // filed under another rule's text.
  const std::optional<StrategyViolation> again =
      cross_node ? checkCrossNodeTp(cluster, s) : checkStrategy(model, cluster, s);
  EVSIM_CHECK(again == violation, "{}: rule {} counted, but the strategy breaks rule {}", s.name(),
              static_cast<int>(violation.rule), again ? static_cast<int>(again->rule) : -1);
  std::optional<std::string> message =
      cross_node ? crossNodeTpViolation(cluster, s) : strategyViolation(model, cluster, s);
  EVSIM_CHECK(message.has_value(), "{}: no rule broken (rule {})", s.name(),
              static_cast<int>(violation.rule));
  return std::move(*message);
}

void validateStrategy(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& s) {
  if (auto why = strategyViolation(model, cluster, s)) EVSIM_THROW(InputError, "{}", *why);
}

}  // namespace evsim
