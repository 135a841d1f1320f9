#include "modeler/equivalent_plans.h"

#include <algorithm>
#include <utility>

namespace evsim {

bool sameOutcome(const CandidateResult& a, const CandidateResult& b) {
  if (a.status != CandidateStatus::kOk || b.status != CandidateStatus::kOk) return false;
  const Strategy& x = a.strategy;
  const Strategy& y = b.strategy;
  return x.tp == y.tp && x.pp == y.pp && x.dp == y.dp && x.cp == y.cp && x.ep == y.ep &&
         x.expertTp() == y.expertTp() && x.micro_batch == y.micro_batch &&
         a.iteration_us == b.iteration_us && a.bubble_fraction == b.bubble_fraction &&
         a.model_tflops_per_gpu == b.model_tflops_per_gpu;
}

std::string equivalentFlags(const Strategy& s) {
  return std::string(scheduleName(s.schedule)) + s.techniques(Strategy::TechniqueStyle::kShort);
}

void mergeEquivalent(CandidateResult& into, size_t& into_order, CandidateResult&& other,
                     size_t other_order) {
  if (other.peak_memory_bytes < into.peak_memory_bytes ||
      (other.peak_memory_bytes == into.peak_memory_bytes && other_order < into_order)) {
    std::swap(into, other);
    into_order = other_order;
  }
  into.equivalents.push_back(equivalentFlags(other.strategy));
  for (std::string& e : other.equivalents) into.equivalents.push_back(std::move(e));
  std::sort(into.equivalents.begin(), into.equivalents.end());
}

int64_t collapseEquivalents(std::vector<CandidateResult>& ranked) {
  // Equal times sit next to each other in a ranking by time: compare within each run of them.
  // A stable ranking keeps enumeration order within equal times: positions order the ties.
  std::vector<bool> absorbed(ranked.size(), false);
  int64_t count = 0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (absorbed[i] || ranked[i].status != CandidateStatus::kOk) continue;
    size_t row_order = i;
    for (size_t j = i + 1; j < ranked.size() && ranked[j].status == CandidateStatus::kOk &&
                           ranked[j].iteration_us == ranked[i].iteration_us;
         ++j) {
      if (absorbed[j] || !sameOutcome(ranked[i], ranked[j])) continue;
      mergeEquivalent(ranked[i], row_order, std::move(ranked[j]), j);
      absorbed[j] = true;
      ++count;
    }
  }
  size_t kept = 0;
  int rank = 0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (absorbed[i]) continue;
    if (ranked[i].status == CandidateStatus::kOk) ranked[i].rank = ++rank;
    if (kept != i) ranked[kept] = std::move(ranked[i]);
    ++kept;
  }
  ranked.resize(kept);
  return count;
}

}  // namespace evsim
