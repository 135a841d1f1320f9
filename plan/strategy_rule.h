#pragma once
// The rules a strategy can break (strategy_validation.cpp and the files it calls), as codes: a
// search checks every candidate and most of a space's invalid ones are only counted, so the check
// it runs formats no message (issue 34: formatting them was 8% of the 70B search's instructions).
// The message, which names the flag, the value and the rule, is formatted from the same check
// where a user sees it (strategyViolation, violationMessage: plan/strategy.h).

#include <cstddef>
#include <cstdint>
#include <functional>

namespace evsim {

// One per message: a rule whose message has two wordings has two codes.
enum class StrategyRule : uint8_t {
  // M/C/P/D against the model and the cluster.
  kSizesNotPositive,
  kTooManyGpus,
  kHeads,
  kHidden,
  kQueryGroups,
  kFfn,
  kStagesOverLayers,
  kClusterGpus,
  kCrossNodeTp,  // checkCrossNodeTp: not part of checkStrategy
  // Context parallelism and its exchange.
  kCpBelowOne,
  kCpNeedsFlashAttention,
  kCpSplitsSequence,
  kCpSpSplitsSequence,
  kCpHierarchicalOnlyA2aP2p,
  kCpA2aP2pSizes,
  kCpMlaOnlyP2p,
  kCpA2aHeads,
  // Expert parallelism.
  kEpBelowOne,
  kExpertsNeedSp,
  kEtpBelowOne,
  kEtpNoExperts,
  kEtpExpertFfn,
  kEpNoExperts,
  kEpExperts,
  kEpDividesD,
  kEtpEpDividesMD,
  // Per-op checkpointing and xformers' SwiGLU.
  kRecomputeEveryBelowOne,
  kRecomputeEveryOverLayers,
  kRecomputeEveryNeedsFull,
  kXformersNeedsDenseSwiGlu,
  kXformersTpOverlap,
  kXformersSelectiveOp,
  kSelectiveOpBlocks,
  // Batch and simulation bounds.
  kMicroBatchNotPositive,
  kGlobalBatchNotPositive,
  kMicroBatchOverMax,
  kGlobalBatchOverMax,
  kGlobalBatchIndivisible,
  kMicroBatchesOverMax,
  kBlockExecutionsOverMax,
  kDpBucketBytes,
  // The schedules' rules.
  kInterleavedNeedsV,
  kInterleavedNeedsP,
  kInterleavedVOverMax,
  kInterleavedChunksOverLayers,
  kInterleavedMicroBatches,
  kGroupOverMicroBatches,
  kGroupBelowP,
  kGroupRemainder,
  kVScheduleNeedsP,
  kVScheduleChunksOverLayers,
  kDualPipeVMicroBatches,
  kScheduleFileMissing,
  kScheduleFileShape,
  kScheduleFileChunksOverLayers,
  kGroupOnlyInterleaved,
  kVirtualStagesOnlyInterleaved,
  kZeroBubbleMicroBatches,
  // int64 bounds of one layer's sizes.
  kAttentionScoresOverMax,
  kWidestActivationOverMax,
  // --stage-layers.
  kStageLayersCount,
  kStageLayersEmptyChunk,
  kStageLayersTotal,
  // Sequence parallelism, ZeRO, FSDP.
  kSpNeedsM,
  kSpSequence,
  kZeroStage,
  kFsdpZeroStage,
  kFsdpOffload,
  // One framework's flags with another (plan/optimizer_step.h).
  kReshardNeedsFsdp,
  kFsdpWrapNeedsFsdp,
  kTorchCompileNeedsFsdp,
  kOptimizerImplNeedsFsdp,
  kOptimizerForLoop,
  // The overlap flags.
  kTpOverlapNeedsSp,
  kTpOverlapFramework,
  kTpOverlapAcrossNodes,
  kTpOverlapTokens,
  kBf16ReduceFramework,
  kParamGatherNeedsDistributedOptimizer,
  kParamGatherNeedsGradOverlap,
  kGradReduceSyncNeedsZero2,
  kGradReduceQueue,
  kGradReduceSyncOffload,
  // MoE communication.
  kDeepEpNeedsEp,
  kDeepEpExpertTp,
  kDeepEpNodes,
  kMoeA2aOverlapNeedsEp,
  kMoeA2aOverlapSchedule,
  kMoeA2aOverlapFullRecompute,
  // ZeRO with DP overlap and group size; offload.
  kZero3DpOverlap,
  kZeroNeedsGroup,
  kOffloadNoHost,
  kOffloadSplitBackward,
};

// A broken rule and a key of its message: the hash of every value the message prints but the
// strategy's label ("--strategy 2M4P2D", which comes before the message's first ": "). Two
// violations that compare equal have the same rule text (violationRule, modeler/pruned_search.h:
// the message after its first ": " with the numbers written N), so a search counts its invalid
// candidates by violation and formats one message per distinct one.
struct StrategyViolation {
  StrategyRule rule{};
  uint64_t key = 0;
  bool operator==(const StrategyViolation&) const = default;
};

struct StrategyViolationHash {
  size_t operator()(const StrategyViolation& v) const {
    return std::hash<uint64_t>{}(v.key * 131u + static_cast<uint64_t>(v.rule));
  }
};

}  // namespace evsim
