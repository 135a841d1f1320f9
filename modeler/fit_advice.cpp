#include "modeler/fit_advice.h"

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "common/error.h"
#include "plan/iteration_plan.h"
#include "modeler/memory_model.h"

namespace evsim {

namespace {

// Changes of one category (the ZeRO stages, the micro-batch sizes) are never combined.
enum class Category { kSequenceParallel, kRecompute, kZero, kMicroBatch, kOffload };

struct Change {
  Category category;
  std::string flags;
  // Applies the change; false when it does not apply to this strategy (already on, or no group).
  std::function<bool(Strategy&)> apply;
};

std::vector<Change> changes(const Strategy& base) {
  std::vector<Change> out;
  out.push_back({Category::kSequenceParallel, "--sequence-parallel on", [](Strategy& s) {
                   if (s.sequence_parallel || s.tp < 2) return false;
                   s.sequence_parallel = true;
                   return true;
                 }});
  out.push_back({Category::kRecompute, "--recompute selective", [](Strategy& s) {
                   if (s.recompute != Recompute::kNone) return false;
                   s.recompute = Recompute::kSelective;
                   return true;
                 }});
  out.push_back({Category::kZero, "--zero 1", [](Strategy& s) {
                   if (s.zero_stage >= 1 || s.gradGroupSize() < 2) return false;
                   s.zero_stage = 1;
                   return true;
                 }});
  for (int64_t b = base.micro_batch / 2; b >= 1; b /= 2) {
    out.push_back({Category::kMicroBatch, fmt::format("--micro-batch {}", b), [b](Strategy& s) {
                     if (s.micro_batch <= b) return false;
                     s.micro_batch = b;
                     return true;
                   }});
  }
  out.push_back({Category::kZero, "--zero 2", [](Strategy& s) {
                   if (s.zero_stage >= 2 || s.gradGroupSize() < 2) return false;
                   s.zero_stage = 2;
                   return true;
                 }});
  out.push_back({Category::kRecompute, "--recompute full", [](Strategy& s) {
                   if (s.recompute == Recompute::kFull) return false;
                   s.recompute = Recompute::kFull;
                   return true;
                 }});
  out.push_back({Category::kZero, "--zero 3", [](Strategy& s) {
                   if (s.zero_stage >= 3 || s.gradGroupSize() < 2) return false;
                   s.zero_stage = 3;
                   return true;
                 }});
  // Last: offload trades host-link time for memory (clusters without a host side refuse it).
  for (Offload o : {Offload::kOptimizer, Offload::kActivations, Offload::kBoth}) {
    out.push_back(
        {Category::kOffload, fmt::format("--offload {}", offloadName(o)), [o](Strategy& s) {
           if (s.offload != Offload::kNone) return false;
           s.offload = o;
           return true;
         }});
  }
  return out;
}

// The memory estimate of `strategy` (the search's own rule for what fits), or nullopt when it is
// not a valid strategy.
std::optional<MemoryEstimate> memoryOf(const ModelConfig& model, const ClusterConfig& cluster,
                                       const Strategy& strategy, double headroom) {
  if (strategyViolation(model, cluster, strategy)) return std::nullopt;
  return estimateMemory(buildIterationPlan(model, cluster, strategy), headroom);
}

}  // namespace

std::optional<FitAdvice> adviseFit(const ModelConfig& model, const ClusterConfig& cluster,
                                   const Strategy& strategy, double headroom) {
  const std::vector<Change> all = changes(strategy);
  auto attempt = [&](const std::vector<const Change*>& picked) -> std::optional<FitAdvice> {
    Strategy s = strategy;
    std::string flags;
    for (const Change* c : picked) {
      if (!c->apply(s)) return std::nullopt;
      flags += (flags.empty() ? "" : " ") + c->flags;
    }
    const std::optional<MemoryEstimate> memory = memoryOf(model, cluster, s, headroom);
    if (!memory || !memory->fits()) return std::nullopt;
    return FitAdvice{flags, s, memory->peak_bytes};
  };
  for (const Change& c : all) {
    if (std::optional<FitAdvice> a = attempt({&c})) return a;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].category == all[j].category) continue;
      if (std::optional<FitAdvice> a = attempt({&all[i], &all[j]})) return a;
    }
  }
  return std::nullopt;
}

}  // namespace evsim
