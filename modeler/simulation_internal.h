#pragma once
// What simulation.cpp (timing input, simulate) and simulation_summary.cpp (metrics from the
// timeline) share: the stream exposure rule and the issued time of an op outside a task, both
// defined in simulation.cpp, and summarize(), defined in simulation_summary.cpp.

#include <array>
#include <vector>

#include "modeler/simulation.h"

namespace evsim {

// The time the device waits on each stream's ops in one pass over a task's list (simulation.cpp).
std::array<double, kStreamCount> exposedByStream(const OpList& ops,
                                                 const std::vector<EventCost>& costs);
// An op's host issue time plus its time, for an op outside a task (simulation.cpp).
double issued(const EventCost& c);
// simulate()'s metrics from its timeline (simulation_summary.cpp).
void summarize(Simulation& sim);

}  // namespace evsim
