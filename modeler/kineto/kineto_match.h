#pragma once
// Matches the ops of a PyTorch profiler trace (kineto_trace.h) to the unique events of an
// eventsim plan by op and shape, and turns the matched ops' times into measured events of a
// profile database (docs/PROFILER.md, "Importing a PyTorch profiler trace").
//
// An op maps to an event signature by its name and "Input Dims" (aten::mm/addmm -> gemm m n k,
// aten::bmm/baddbmm -> bgemm, layer_norm, softmax, gelu, dropout, embedding, cross_entropy_loss,
// add, and "Optimizer.step#Adam.step" -> the plan's adam). A GEMM's layout comes from the operands'
// "Input Strides" (a transposed view has unit stride on its rows); when the plan has no event of
// that layout but one of another layout, or of the transposed product (C^T = B^T A^T, as autograd
// computes a weight gradient), with the same m, n, k, that one is taken. The walk goes from the
// outermost op in: the first op that maps to an event of the plan is matched and its subtree not
// entered; a leaf that maps to nothing, or to no event of the plan, is listed as unmatched.
// Communication: an op with collective args (PyTorch's record_param_comms, kineto_trace.h) is
// matched to communication events by kind, bytes and group (kineto_comm.h) with its NCCL kernels'
// device time; so is an NCCL kernel with those args whose launch is not in the trace.

#include <string>
#include <vector>

#include "events/event_table.h"
#include "io/profile_db.h"
#include "modeler/kineto/kineto_trace.h"

namespace evsim {

struct KinetoUnmatched {
  std::string what;    // "aten::masked_fill [[2, 4, 32, 32], [32, 32], []]", or a signature
  std::string reason;  // "no eventsim op", "not an event of the plan"
  int count = 0;
  double total_us = 0;
};

struct KinetoImport {
  ProfileDb db;  // the matched events, measured
  int matched_ops = 0;
  // Of those, the ops matched by their full shape (not by name alone, as the optimizer step is,
  // whose parameter count a trace does not give, or the embedding backward, whose vocabulary):
  // none means the trace is of another model.
  int shape_matched_ops = 0;
  double matched_us = 0;  // their time
  // Of the matched ops, the collectives (record_param_comms ops or NCCL kernels with their args,
  // kineto_comm.h) and their device time.
  int matched_collectives = 0;
  double collective_us = 0;
  double total_us = 0;                     // the time of the outermost ops (the step, as traced)
  std::vector<KinetoUnmatched> unmatched;  // by time, longest first
  std::vector<std::string> not_measured;   // the plan's events no op matched
};

// `gpus_per_node`: the cluster's, to place a collective's "Process Group Ranks" on nodes (0: not
// placed; a collective then matches only where the plan has one placement of its size).
KinetoImport matchKinetoTrace(const KinetoTrace& trace, const EventTable& plan_events,
                              int gpus_per_node = 0);

}  // namespace evsim
