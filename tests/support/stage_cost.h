#pragma once
// A StageCost with only the terms the hand-traced timing tests set: the rest of the struct keeps
// its defaults (no buckets, gathers or expert overlap), named here rather than in brace order.

#include "modeler/timing_engine.h"

namespace evsim::test {

inline StageCost stageCost(double forward_us, double backward_us, double grad_allreduce_us = 0,
                           double optimizer_us = 0) {
  StageCost stage;
  stage.forward_us = forward_us;
  stage.backward_us = backward_us;
  stage.grad_allreduce_us = grad_allreduce_us;
  stage.optimizer_us = optimizer_us;
  return stage;
}

}  // namespace evsim::test
