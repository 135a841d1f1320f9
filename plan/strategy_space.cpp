#include "plan/strategy_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <span>
#include <tuple>

#include "plan/iteration_plan.h"

namespace evsim {

namespace {

// Whether the interleaved schedule with v chunks per device can apply to (P, b, D) at all; the
// search skips the v values that cannot rather than listing them as invalid.
bool interleavedApplies(const ModelConfig& model, const Strategy& s, int v) {
  if (s.pp < 2 || int64_t{s.pp} * v > model.numLayers()) return false;
  const int64_t per_step = s.micro_batch * s.dp;
  if (per_step <= 0 || s.global_batch % per_step != 0) return true;  // invalid for another rule
  return s.microBatches() % s.pp == 0;
}

// Moves `count` layers off each stage of `from` to the `receivers`, one at a time in turn.
std::vector<int> shorten(std::vector<int> split, const std::vector<int>& from, int count,
                         const std::vector<int>& receivers) {
  for (int s : from) split[s] -= count;
  const int moved = count * static_cast<int>(from.size());
  for (int i = 0; i < moved; ++i) ++split[receivers[i % receivers.size()]];
  return split;
}

// The candidates an uneven split applies to (besides P >= 2): one model chunk per device, by the
// schedule's own chunk rule (ZB-V, DualPipe-V: always 2; interleaved: v).
bool oneChunkPerDevice(const Strategy& s) { return pipelineLayout(s).chunks() == 1; }

}  // namespace

bool takesUnevenStages(Schedule schedule, const StrategySpace& space) {
  Strategy s;
  s.schedule = schedule;
  s.pp = 2;
  // forEachUnit's v: each of --virtual-stages for the interleaved schedule, 1 for the others.
  const std::vector<int> one = {1};
  for (int v : schedule == Schedule::kInterleaved ? space.virtual_stages : one) {
    s.virtual_stages = v;
    if (oneChunkPerDevice(s)) return true;
  }
  return false;
}

std::vector<std::vector<int>> unevenSplits(const std::vector<int>& balanced, int max_shift) {
  const int P = static_cast<int>(balanced.size());
  std::vector<std::vector<int>> out;
  if (P < 2) return out;
  std::vector<int> middle;
  for (int s = 1; s + 1 < P; ++s) middle.push_back(s);
  auto keep = [&](const std::vector<int>& split) {
    for (int n : split) {
      if (n < 1) return;
    }
    if (split == balanced || std::find(out.begin(), out.end(), split) != out.end()) return;
    out.push_back(split);
  };
  for (int j = 1; j <= max_shift; ++j) {
    keep(shorten(balanced, {0}, j, P == 2 ? std::vector<int>{1} : middle));
    keep(shorten(balanced, {P - 1}, j, P == 2 ? std::vector<int>{0} : middle));
    if (P >= 3) keep(shorten(balanced, {0, P - 1}, j, middle));
  }
  return out;
}

std::vector<Candidate> enumerateCandidates(const ModelConfig& model, const ClusterConfig& cluster,
                                           const Strategy& base, const StrategySpace& space) {
  std::vector<Candidate> out;
  forEachCandidate(model, cluster, base, space,
                   [&](Candidate&& c) { out.push_back(std::move(c)); });
  return out;
}

void forEachCandidate(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                      const StrategySpace& space, const std::function<void(Candidate&&)>& visit) {
  forEachUnit(model, base, space, [&](const Strategy& unit) {
    forEachVariant(model, cluster, space, unit, [&](const Candidate& c) { visit(Candidate(c)); });
  });
}

void forEachVariant(const ModelConfig& model, const ClusterConfig& cluster,
                    const StrategySpace& space, const Strategy& strategy,
                    const std::function<void(const Candidate&)>& visit) {
  // The variants of a valid balanced candidate, right after it (unevenSplits).
  auto visitUneven = [&](const Strategy& balanced) {
    const std::vector<int> first = stageFirstLayers(model, balanced);
    std::vector<int> layers(first.size());
    for (size_t k = 0; k < first.size(); ++k) {
      const int end = k + 1 < first.size() ? first[k + 1] : static_cast<int>(model.numLayers());
      layers[k] = end - first[k];
    }
    for (std::vector<int>& split : unevenSplits(layers, space.uneven_stage_shift)) {
      Candidate c;
      c.strategy = balanced;
      c.strategy.stage_layers = std::move(split);
      c.violation = checkStrategy(model, cluster, c.strategy);
      visit(c);
    }
  };
  for (Recompute rc : space.recomputes) {
    for (bool sp : space.sequence_parallel) {
      if (sp && strategy.tp < 2) continue;
      // FSDP shards fully wherever there is a group to shard over (strategyViolation).
      // (A span, not a vector: no allocation per recomputation and SP of every unit.)
      const int fsdp_zero = strategy.gradGroupSize() > 1 ? 3 : 0;
      const bool fsdp = strategy.framework == Framework::kFsdp;
      for (int zero : fsdp ? std::span<const int>(&fsdp_zero, 1)
                           : std::span<const int>(space.zero_stages)) {
        if (zero > 0 && strategy.gradGroupSize() < 2) continue;
        // strategyViolation's rules read no technique but the recomputation, SP and the ZeRO
        // stage before the techniques' own: when the strategy with this recomputation, SP and
        // ZeRO stage and nothing else breaks one, every overlap and offload variant breaks the
        // same (a bucket size >= 0 keeps overlap's own rule from coming first). It is then
        // checked once, not per variant. (The recomputation was left out before issue 34's
        // InvalidTallyTest: --recompute-every 2 made the full variants invalid with "needs
        // --recompute full, not none".)
        // The overlap flags of `base` (search --tp-comm-overlap, --overlap-param-gather) apply
        // where they can: TP overlap with SP, the parameter gather's with ZeRO 1/2 and DP
        // overlap (Megatron's requirements).
        Strategy plain = strategy;
        plain.recompute = rc;
        plain.sequence_parallel = sp;
        plain.zero_stage = zero;
        plain.tp_comm_overlap = strategy.tp_comm_overlap && sp;
        plain.overlap_param_gather = false;
        // --grad-reduce-sync step (and its queue bound): ZeRO-2's reductions only.
        const bool at_step = strategy.reducesAtStep() && zero == 2 && !fsdp;
        plain.grad_reduce_sync = at_step ? GradReduceSync::kStep : GradReduceSync::kBackward;
        plain.grad_reduce_queue = at_step ? strategy.grad_reduce_queue : 0;
        // One candidate for the variants, handed over by reference (no copy of the strategy
        // per variant).
        Candidate c;
        c.violation = strategy.dp_bucket_bytes >= 0 && !strategy.dp_overlap &&
                              strategy.offload == Offload::kNone
                          ? checkStrategy(model, cluster, plain)
                          : std::nullopt;
        const bool shared_violation = c.violation.has_value();
        for (bool overlap : space.dp_overlaps) {
          if (overlap && (strategy.gradGroupSize() < 2 || zero == 3)) continue;
          for (Offload offload : space.offloads) {
            c.strategy = strategy;
            c.strategy.recompute = rc;
            c.strategy.sequence_parallel = sp;
            c.strategy.zero_stage = zero;
            c.strategy.dp_overlap = overlap;
            c.strategy.tp_comm_overlap = plain.tp_comm_overlap;
            c.strategy.overlap_param_gather = strategy.overlap_param_gather && overlap &&
                                              (zero == 1 || zero == 2) && !fsdp;
            c.strategy.offload = offload;
            c.strategy.grad_reduce_sync = plain.grad_reduce_sync;
            c.strategy.grad_reduce_queue = plain.grad_reduce_queue;
            if (!shared_violation) {
              c.violation = checkStrategy(model, cluster, c.strategy);
              if (!c.violation && !space.allow_cross_node_tp) {
                c.violation = checkCrossNodeTp(cluster, c.strategy);
              }
            }
            visit(c);
            if (space.uneven_stage_shift > 0 && !c.violation && c.strategy.pp >= 2 &&
                oneChunkPerDevice(c.strategy)) {
              visitUneven(c.strategy);
            }
          }
        }
      }
    }
  }
}

void forEachUnit(const ModelConfig& model, const Strategy& base, const StrategySpace& space,
                 const std::function<void(const Strategy&)>& visit) {
  const int64_t experts = model.moe.num_experts;
  for (int64_t m = 1; m <= space.gpus; ++m) {
    if (space.gpus % m != 0) continue;
    for (int c : space.context_parallel) {
      if (c < 1 || (space.gpus / m) % c != 0) continue;
      if (c > 1 && !model.spec.flash_attention) continue;
      const int64_t pd = space.gpus / m / c;
      for (int64_t p = 1; p <= pd; ++p) {
        if (pd % p != 0) continue;
        const int64_t d = pd / p;
        for (int e : space.expert_parallel) {
          if (e < 1 || (e > 1 && (experts == 0 || experts % e != 0))) continue;
          for (int etp : space.expert_tensor_parallel) {
            const int64_t etp_size = etp > 0 ? etp : m;
            // ETP = M is the default (0) once; another ETP only with experts sharded.
            if (etp > 0 && (etp == m || e == 1)) continue;
            if (etp > 0 && model.moe.expert_ffn % etp != 0) continue;
            if (e > 1 && (m * d) % (etp_size * e) != 0) continue;
            for (int64_t b : space.micro_batches) {
              for (Schedule schedule : space.schedules) {
                Strategy s = base;
                s.tp = static_cast<int>(m);
                s.cp = c;
                // The --cp-comm-type of `base` where there is a CP group (plain p2p at C = 1).
                s.cp_comm = c > 1 ? base.cp_comm : CpComm::kP2p;
                s.cp_a2a = c > 1 ? base.cp_a2a : 0;
                s.pp = static_cast<int>(p);
                s.dp = static_cast<int>(d);
                s.ep = e;
                s.etp = etp;
                s.micro_batch = b;
                s.schedule = schedule;
                s.virtual_stages = 1;
                if (schedule != Schedule::kInterleaved) {
                  visit(s);
                  continue;
                }
                for (int v : space.virtual_stages) {
                  if (!interleavedApplies(model, s, v)) continue;
                  s.virtual_stages = v;
                  visit(s);
                }
              }
            }
          }
        }
      }
    }
  }
}

EventTable unionOfEvents(const ModelConfig& model, const ClusterConfig& cluster,
                         const Strategy& base, const StrategySpace& space) {
  EventTable all;
  // GPipe and DAPPLE share their events; the techniques change them (recomputation through the
  // stage partition, hence the gradient bytes), and so does the interleaved schedule (P*v chunks,
  // the wrap-around transfer): v is in the key, 1 for the other schedules. An uneven split changes
  // a stage's parameters (its optimizer and gradient events): the split is in the key too. DP
  // overlap (bucketed gradient collectives) and offload (host-link copies, the host's Adam) add
  // events of their own.
  // The overlap flags change events too (chunked GEMMs and transfers; per-bucket gathers).
  std::set<std::tuple<int, int, int, int, int, int64_t, int, bool, int, int, std::vector<int>, bool,
                      int, int, bool, bool, int, int>>
      seen;
  for (const Candidate& c : enumerateCandidates(model, cluster, base, space)) {
    if (c.violation) continue;
    const Strategy& s = c.strategy;
    if (!seen.insert({s.tp, s.cp, s.pp, s.dp, s.ep, s.micro_batch, static_cast<int>(s.recompute),
                      s.sequence_parallel, s.zero_stage, s.virtual_stages, s.stage_layers,
                      s.dp_overlap, static_cast<int>(s.offload), s.etp, s.tp_comm_overlap,
                      s.overlap_param_gather, static_cast<int>(s.cp_comm), s.cp_a2a})
             .second) {
      continue;
    }
    IterationPlan plan = buildIterationPlan(model, cluster, s);
    for (const UniqueEvent& e : plan.events.events()) all.addCount(all.intern(e.event), e.count);
  }
  return all;
}

}  // namespace evsim
