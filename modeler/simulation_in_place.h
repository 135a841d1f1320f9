#pragma once
// simulateWithin (simulation.h) on a Simulation the caller keeps from one simulation to the next,
// so that its plan (plan_core.h: rebuildIterationPlan), costs and op offsets keep their storage. A
// search's worker simulates hundreds of plans; built fresh, each allocated its op lists, a copy of
// the model and cluster and its timing scratch anew, most of it under the search heap's lock
// (bench/RESULTS.md, session 29, alloc29). In its own header: simulation.h is read by most of the
// tree, this by the search alone.

#include "modeler/simulation.h"

namespace evsim {

// simulateWithin(sim.plan, sim.costs, limit_us, unshared_us) into `sim`: `sim.plan` and
// `sim.costs` are set (one cost per plan event); the rest may be a previous simulation's and is
// replaced. Returns false when the timeline before link sharing ends after `limit_us` (its time in
// `unshared_us`; `sim.summary` is not set then), as simulateWithin's nullopt.
bool simulateWithinInPlace(Simulation& sim, double limit_us, double& unshared_us);

}  // namespace evsim
