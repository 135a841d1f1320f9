#pragma once
// Writers of per-device timelines, streamed rank by rank (never the whole trace in memory):
//
// Chrome Trace Event JSON (Perfetto, chrome://tracing): {"traceEvents":[...]}, one process per
// rank (pid = global rank) named "rank 17 (node 2, gpu 1) tp1 pp0 dp3" and sorted by rank, one
// thread per stream (compute, tp-comm, pp-comm, dp-comm), complete "X" events with ts/dur in
// microseconds and args: micro_batch, phase, layer, event signature, provenance (+ bytes, group
// for communication).
//
// CSV: one row per device event:
//   rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance

#include <cstdint>
#include <ostream>
#include <vector>

#include "modeler/simulation.h"

namespace evsim {

void writeChromeTrace(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out);
void writeTimelineCsv(const Simulation& sim, const std::vector<int64_t>& ranks, std::ostream& out);

// All ranks of the strategy, or `selection` checked against the world size (InputError naming
// --ranks otherwise).
std::vector<int64_t> selectRanks(const Simulation& sim, const std::vector<int64_t>& selection);

}  // namespace evsim
