#pragma once
// Small pipeline shapes of every built-in schedule (split backwards and V layouts included), for
// tests that compare a reduced walk of each device's order with the walk itself.

#include <cstdint>
#include <vector>

#include "plan/strategy.h"

namespace evsim::test {

struct ScheduleShape {
  Schedule schedule;
  int P, v;
  int64_t m;
};

inline const std::vector<ScheduleShape>& everyScheduleShape() {
  static const std::vector<ScheduleShape> shapes{
      {Schedule::kGpipe, 3, 1, 5},       {Schedule::kDapple, 4, 1, 9},
      {Schedule::kInterleaved, 2, 3, 4}, {Schedule::kInterleaved, 4, 2, 8},
      {Schedule::kZbh1, 3, 1, 6},        {Schedule::kZbh2, 4, 1, 8},
      {Schedule::kZbv, 3, 2, 6},         {Schedule::kDualPipeV, 4, 2, 8}};
  return shapes;
}

}  // namespace evsim::test
