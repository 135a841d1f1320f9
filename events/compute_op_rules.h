#pragma once
// The compute ops' rule table: each op's dims, layout and its flop / memory-traffic formulas
// (compute_op_rules.cpp). makeCompute (event.cpp) checks and costs an event by it; the queries
// on ops (computeOpNames, computeOpKind, isGemmOp, countsModelFlops) sit with the table.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "events/event.h"

namespace evsim {

// Cost rule of one compute op: flops and bytes moved per execution from its dims.
struct ComputeOpRule {
  ComputeOpKind kind;
  std::vector<std::string> dims;
  bool has_layout = false;
  // flops and memory traffic (in elements of the event's dtype, except adam) from dims (a span:
  // makeCompute passes its values from a fixed array, not a vector per event)
  double (*flops)(std::span<const int64_t>);
  double (*elements_moved)(std::span<const int64_t>);
  // elements_moved counts bytes, not elements of the event's dtype (memory_pass: its kernels
  // mix dtypes, e.g. a bf16 read and an fp32 write).
  bool counts_bytes = false;
  // Dims an event may add after `dims`, in this order; they change neither flops nor bytes.
  std::vector<std::string> optional_dims = {};
};

const std::map<std::string, ComputeOpRule, std::less<>>& computeRules();

// The most dims (required and optional) an op of the table takes: makeCompute keeps an event's
// values in an array of this size.
inline constexpr size_t kMaxComputeDims = 8;

}  // namespace evsim
