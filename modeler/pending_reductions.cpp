#include "modeler/pending_reductions.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/checked.h"
#include "common/error.h"
#include "events/dtype.h"

namespace evsim {

void stageHeldBytes(const TaskGraph& graph, const StageTimeline& stage,
                    const std::vector<ChunkHeldBytes>& chunks, std::vector<HeldBytes>& activations,
                    std::vector<HeldBytes>& pending) {
  const Phase gradient_phase = graph.split_backward ? Phase::kWeightGrad : Phase::kBackward;
  const size_t reductions = std::min(stage.reduction_ready_us.size(), stage.grad_sync.size());
  // Per (chunk, micro-batch), the end of its forward not yet matched by its backward's.
  std::map<std::pair<int, int64_t>, double> held_from;
  size_t r = 0;  // the next reduction in issue order
  for (size_t i = 0; i < stage.tasks.size(); ++i) {
    const TaskTiming& t = stage.tasks[i];
    const NodeTask& task = graph.nodes[stage.node(i)].task;
    EVSIM_CHECK(task.chunk >= 0 && static_cast<size_t>(task.chunk) < chunks.size(),
                "task of chunk {} on a device of {} chunks", task.chunk, chunks.size());
    const ChunkHeldBytes& chunk = chunks[static_cast<size_t>(task.chunk)];
    const std::pair<int, int64_t> key{task.chunk, task.micro_batch};
    if (task.phase == Phase::kForward) held_from[key] = t.run.end_us;
    if (task.phase == Phase::kBackward) {
      if (const auto from = held_from.find(key); from != held_from.end()) {
        activations.push_back({from->second, t.run.end_us, chunk.activation_bytes});
        held_from.erase(from);
      }
    }
    if (task.phase != gradient_phase) continue;
    // The task's buckets, in the order the timing engine queued them.
    double opened_us = t.run.start_us;
    for (size_t j = 0; j < chunk.buckets.size() && r < reductions; ++j, ++r) {
      EVSIM_CHECK(stage.grad_sync_chunk[r] == task.chunk &&
                      stage.grad_sync_bucket[r] == static_cast<int>(j),
                  "reduction {} is chunk {} bucket {}, expected chunk {} bucket {}", r,
                  stage.grad_sync_chunk[r], stage.grad_sync_bucket[r], task.chunk, j);
      // A bucket opens when the one before it closes, unless it is another part (experts') of
      // the same bucket, issued after the same op.
      if (j > 0 && chunk.buckets[j].ready_after_op != chunk.buckets[j - 1].ready_after_op) {
        opened_us = stage.reduction_ready_us[r - 1];
      }
      const QueuedBucketBytes& b = chunk.buckets[j];
      const double end_us = stage.grad_sync[r].end_us;
      if (b.filling_bytes < 0 || b.filling_bytes == b.bytes) {
        pending.push_back({opened_us, end_us, b.bytes});
        continue;
      }
      // Cast at the issue: the filled buffer outlives the allocation of its copy.
      const double issued_us = stage.reduction_ready_us[r];
      pending.push_back({opened_us, issued_us, b.filling_bytes, true});
      pending.push_back({issued_us, end_us, b.bytes});
    }
  }
  EVSIM_CHECK(r == reductions, "{} of the stage's {} reductions matched a backward's buckets", r,
              reductions);
}

std::vector<PendingReductionPeak> pendingReductionPeaks(const Simulation& sim) {
  const IterationPlan& plan = sim.plan;
  if (!plan.strategy.reducesAtStep()) return {};
  std::vector<PendingReductionPeak> out(static_cast<size_t>(plan.deviceStages()));
  // Per device stage, its chunks' bytes (the same in every pipeline class).
  std::vector<std::vector<ChunkHeldBytes>> device_chunks(out.size());
  for (size_t s = 0; s < out.size(); ++s) {
    for (int k : plan.deviceChunks(static_cast<int>(s))) {
      const StagePlan& chunk = plan.stages[static_cast<size_t>(k)];
      ChunkHeldBytes c;
      for (const OpInstance& op : chunk.forward) {
        c.activation_bytes = saturatingAdd(c.activation_bytes, op.saved_bytes);
      }
      for (const GradBucket& b : chunk.micro_batch_buckets) {
        const Event& e = plan.events[b.event].event;
        // The wire's elements, in the model dtype while the bucket fills.
        const int64_t elements = e.message_bytes / dtypeBytes(e.dtype);
        c.buckets.push_back({e.message_bytes, b.ready_after_op,
                             checkedMul(elements, dtypeBytes(plan.model.dtype), "bucket bytes")});
      }
      device_chunks[s].push_back(std::move(c));
    }
  }
  std::vector<HeldBytes> activations, pending;
  for (const PipelineTimeline& p : sim.timeline.pipelines) {
    for (size_t s = 0; s < p.stages.size() && s < out.size(); ++s) {
      activations.clear();
      pending.clear();
      stageHeldBytes(sim.timeline.graph, p.stages[s], device_chunks[s], activations, pending);
      const PendingReductionPeak peak = pendingReductionPeak(activations, pending);
      out[s].plateau_bytes = std::max(out[s].plateau_bytes, peak.plateau_bytes);
      out[s].cast_bytes = std::max(out[s].cast_bytes, peak.cast_bytes);
    }
  }
  return out;
}

}  // namespace evsim
