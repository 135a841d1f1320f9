#include "common/error.h"
#include "modeler/schedules/schedules.h"

namespace evsim {

std::vector<std::vector<StageTask>> PipelineSchedule::orders(const PipelineShape& shape) const {
  std::vector<std::vector<StageTask>> out;
  out.reserve(static_cast<size_t>(shape.stages));
  for (int s = 0; s < shape.stages; ++s) out.push_back(deviceOrder(s, shape));
  return out;
}

const PipelineSchedule& pipelineSchedule(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe:
      return gpipeSchedule();
    case Schedule::kDapple:
      return oneFOneBSchedule();
    case Schedule::kInterleaved:
      return interleavedSchedule();
    case Schedule::kZbh1:
      return zbH1Schedule();
    case Schedule::kZbh2:
      return zbH2Schedule();
  }
  EVSIM_THROW(Error, "schedule {} has no order", static_cast<int>(schedule));
}

std::vector<StageTask> stageTaskOrder(Schedule schedule, int stage, int stages,
                                      int64_t micro_batches, int virtual_stages) {
  EVSIM_CHECK(stage >= 0 && stage < stages && micro_batches > 0, "stage {} of {}, m={}", stage,
              stages, micro_batches);
  const PipelineSchedule& s = pipelineSchedule(schedule);
  EVSIM_CHECK(virtual_stages == 1 || (virtual_stages > 1 && s.allowsChunks()),
              "{} schedule with v={}", scheduleName(schedule), virtual_stages);
  return s.deviceOrder(stage, PipelineShape{stages, virtual_stages, micro_batches});
}

}  // namespace evsim
