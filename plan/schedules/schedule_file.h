#pragma once
// Schedules as data, in torchtitan's CSV format (torch.distributed.pipelining's _dump_csv /
// _load_csv, "compute only"): one row per pipeline rank, one cell per action, an action written
// "{virtual stage}{type}{micro-batch}" with type F (forward), B (the whole backward), I (the input
// gradient of a split backward: eventsim's B task) or W (its weight gradient); an empty cell is an
// idle slot. Sends and receives are implied by the stages' devices. A fused task (DualPipeV's
// F&B) is PyTorch's OVERLAP_F_B cell, "({action};{action}[;{action}])OVERLAP_F_B": one F and the
// backward of another micro-batch (with its W when the backward is whole).
//
// Loading infers the layout from the stages each rank runs (looped: rank r runs r, r+P, ...;
// V: r and 2P-1-r; anything else is refused) and validates the file: every task exactly once,
// every micro-batch's stages in dependency order on each rank, and no deadlock (the ranks walked
// together, each waiting for its next action's inputs). A bad file is one InputError naming the
// rank and the action.

#include <memory>
#include <string>

#include "plan/pipeline_schedule.h"

namespace evsim {

struct ScheduleFile {
  std::string path;
  PipelineLayout layout;
  int64_t micro_batches = 1;
  bool split_backward = false;
  bool fused = false;   // some cell is an OVERLAP_F_B (StageTask::overlapped)
  DeviceOrders orders;  // index = rank (device stage)
};

// Parses and validates `text` (the contents of `path`, named in errors).
ScheduleFile parseScheduleCsv(const std::string& text, const std::string& path);
ScheduleFile loadScheduleCsv(const std::string& path);

// The CSV of `orders` on `layout` (split: B tasks are written I).
std::string scheduleCsv(const DeviceOrders& orders, const PipelineLayout& layout,
                        bool split_backward);

// The schedule object of Schedule::kFile: `file`'s orders for its own shape only. Installing
// replaces the previous file (one per process: the CLI's --schedule FILE.csv).
void installScheduleFile(ScheduleFile file);
std::shared_ptr<const ScheduleFile> installedScheduleFile();  // null when none
const PipelineSchedule& fileSchedule();

}  // namespace evsim
