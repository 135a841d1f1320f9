#pragma once
// Every xMxPxD strategy for N GPUs (x micro-batch x schedule), each valid or with the rule it
// breaks. Shared by `eventsim search` and by the union of events one profiling run must cover.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "events/event_table.h"
#include "plan/strategy.h"

namespace evsim {

struct Candidate {
  Strategy strategy;
  // The rule it breaks, nullopt when valid; violationMessage (plan/strategy.h) says it.
  std::optional<StrategyViolation> violation;
};

struct StrategySpace {
  int64_t gpus = 0;
  std::vector<int64_t> micro_batches;
  std::vector<Schedule> schedules;
  bool allow_cross_node_tp = false;  // by default M divides the GPUs of a node
  // Techniques (issue 6). The defaults reproduce the plain search.
  std::vector<int> virtual_stages = {2};  // v values tried with Schedule::kInterleaved
  std::vector<Recompute> recomputes = {Recompute::kNone};
  std::vector<bool> sequence_parallel = {false};  // `true` is only tried where M >= 2
  std::vector<int> zero_stages = {0};             // stages > 0 only where D >= 2
  // DDP-style gradient buckets overlapped with the backward; `true` only where D >= 2 and not
  // with ZeRO-3 (which has no buckets).
  std::vector<bool> dp_overlaps = {false};
  // Offload to host memory (Strategy::offload); clusters without a host side list them invalid.
  std::vector<Offload> offloads = {Offload::kNone};
  // Context-parallel sizes C (tried only on models with flash attention) and expert-parallel sizes
  // E (tried only on MoE models, where E divides D and the experts).
  std::vector<int> context_parallel = {1};
  std::vector<int> expert_parallel = {1};
  // Expert tensor-parallel sizes (Strategy::etp; 0 is M, Megatron's default), tried with E > 1
  // where they differ from M and pass Megatron's rules (ETP divides the expert FFN, ETP x E
  // divides M x D).
  std::vector<int> expert_tensor_parallel = {0};
  // Uneven stage splits (P >= 2, one chunk per device): besides the balanced split, its first
  // stage, its last stage and (P >= 3) both shortened by 1..uneven_stage_shift layers
  // (unevenSplits). 0: the balanced split only.
  int uneven_stage_shift = 0;
};

// Whether `space` holds candidates of `schedule` that uneven_stage_shift splits: one model chunk
// per device (not ZB-V's or DualPipe-V's 2, nor the interleaved schedule's v >= 2), as
// forEachVariant decides per candidate.
bool takesUnevenStages(Schedule schedule, const StrategySpace& space);

// The variants of the per-stage layer counts `balanced` tried by the search: for j = 1..max_shift
// the first stage j layers shorter, the last j shorter, and (P >= 3) both; the layers taken off go
// one at a time, in turn, to the middle stages (to the other stage when P = 2), since the first
// and last stages also carry the embedding and the loss. Variants that would leave a stage empty
// are skipped; each split appears once, the balanced one not at all.
std::vector<std::vector<int>> unevenSplits(const std::vector<int>& balanced, int max_shift);

// All (M, C, P, D) with M*C*P*D == gpus, in order of M, then C, then P, then E, micro-batch,
// schedule (and v), recomputation, sequence parallelism, ZeRO stage, DP overlap, offload; `base`
// gives the
// global batch and the other options. Combinations that cannot apply are not enumerated: SP at
// M = 1, ZeRO at D*C = 1, C > 1 without flash attention, E > 1 on a dense model or not dividing
// D or the experts, and interleaved v values that break its rules (P >= 2, P*v <= layers, m a
// multiple of P). Other invalid candidates are listed with their violation. With
// uneven_stage_shift > 0, each candidate with P >= 2 and one chunk per device is followed by its
// unevenSplits variants (stage_layers).
std::vector<Candidate> enumerateCandidates(const ModelConfig& model, const ClusterConfig& cluster,
                                           const Strategy& base, const StrategySpace& space);
// The same candidates in the same order, handed to `visit` one at a time (nothing is kept, so a
// search can stream a space of any size).
void forEachCandidate(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                      const StrategySpace& space, const std::function<void(Candidate&&)>& visit);
// forEachCandidate in two parts, so that threads can share the enumeration (a search's workers each
// take whole units): forEachUnit hands over, in order, each strategy of the outer dimensions (M,
// C, P, E, ETP, micro-batch, schedule, v) before its techniques; forEachVariant enumerates one
// unit's candidates (recomputation, SP, ZeRO, DP overlap, offload, uneven splits) with their
// violations, each valid only during its visit. forEachUnit(u -> forEachVariant(u)) is
// forEachCandidate.
void forEachUnit(const ModelConfig& model, const Strategy& base, const StrategySpace& space,
                 const std::function<void(const Strategy&)>& visit);
void forEachVariant(const ModelConfig& model, const ClusterConfig& cluster,
                    const StrategySpace& space, const Strategy& unit,
                    const std::function<void(const Candidate&)>& visit);

// The union of the unique events of every valid candidate; `count` sums over candidates that
// differ in events (schedules share events and count once).
EventTable unionOfEvents(const ModelConfig& model, const ClusterConfig& cluster,
                         const Strategy& base, const StrategySpace& space);

}  // namespace evsim
