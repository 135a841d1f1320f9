// Per-op jitter of one task (lone_tasks.h).
#include "modeler/lone_tasks.h"

#include <cmath>

namespace evsim::lone {

double jitterUs(const TaskJitter& jitter, int virtual_stage, Phase phase, std::mt19937_64& rng) {
  if (jitter.sigma <= 0) return 0;
  std::normal_distribution<double> normal(0.0, 1.0);
  double extra = 0;
  for (double op_us : jitter.op_us[virtual_stage][taskPhaseIndex(phase)]) {
    extra += op_us * jitter.sigma * std::abs(normal(rng));
  }
  return extra;
}

}  // namespace evsim::lone
