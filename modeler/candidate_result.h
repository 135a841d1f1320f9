#pragma once
// One candidate of a search as the search reports it (search.h): its strategy, status, memory and
// timing. ranked_rows.h stores these, spilling them to a file as records (a new field must be
// added to its encoder too: a static_assert there on the size says so).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "modeler/cost_source.h"
#include "plan/strategy.h"

namespace evsim {

enum class CandidateStatus { kOk, kOom, kInvalid };
std::string_view candidateStatusName(CandidateStatus status);  // "ok", "OOM", "invalid"

struct CandidateResult {
  Strategy strategy;
  CandidateStatus status = CandidateStatus::kInvalid;
  std::string violation;  // the rule an invalid candidate breaks
  int rank = 0;           // 1-based among the ok candidates by throughput; 0 otherwise
  int64_t micro_batches = 0;
  // Memory (valid candidates): the peak over stages on one device, and the stage it is on.
  int64_t peak_memory_bytes = 0;
  int peak_memory_stage = 0;
  // Timing (ok candidates only).
  double iteration_us = 0;
  double samples_per_s = 0;
  double bubble_fraction = 0;
  double model_tflops_per_gpu = 0;  // model FLOPs per iteration / (iteration time x GPUs)
  double mfu = 0;                   // against the GEMM dtype's peak (mfuFigures().front())
  std::array<double, kProvenanceCount> provenance_share{};
  // Ok candidates: the flags of the plans merged into this one because they simulate to the same
  // timeline (equivalent_plans.h), e.g. {"gpipe", "dapple rc=sel"}.
  std::vector<std::string> equivalents;

  bool operator==(const CandidateResult&) const = default;
};

}  // namespace evsim
