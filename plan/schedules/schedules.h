#pragma once
// The schedule objects, one per file of this folder; registry.cpp maps Schedule to them.

#include "plan/pipeline_schedule.h"

namespace evsim {

const PipelineSchedule& gpipeSchedule();        // gpipe.cpp
const PipelineSchedule& oneFOneBSchedule();     // one_f_one_b.cpp
const PipelineSchedule& interleavedSchedule();  // interleaved.cpp
const PipelineSchedule& zbH1Schedule();         // zb_h1.cpp
const PipelineSchedule& zbH2Schedule();         // zb_h2.cpp
const PipelineSchedule& zbVSchedule();          // zb_v.cpp
const PipelineSchedule& dualPipeVSchedule();    // dualpipe_v.cpp
const PipelineSchedule& fileSchedule();         // schedule_file.cpp (--schedule FILE.csv)

}  // namespace evsim
