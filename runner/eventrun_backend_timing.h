#pragma once
// From CUDA event elapsed times to action times on the host's steady_clock, for the CUDA executor
// (runner/cuda/eventrun_cuda_executor.h). Pure: no CUDA, so it is tested without a GPU.
//
// Per iteration the executor, with both of its streams idle, reads steady_clock (before_us),
// records one reference CUDA event on the compute stream, polls cudaEventQuery until it reports
// completion and reads steady_clock again (after_us). The reference completed on the GPU at a
// host time within [before_us, after_us]; its midpoint is taken, wrong by at most half the window.
// Every recorded action has a pair of CUDA events on its stream; cudaEventElapsedTime against the
// reference gives their offsets in ms (resolution about 0.5 us, CUDA runtime documentation), so
//   start_us = (before_us + after_us) / 2 + 1000 * start_ms     (likewise end_us)
// with an error bound of (after_us - before_us) / 2 + 0.5 us. GPU and host clocks drift by parts
// per million: under 1 us over a 100 ms iteration, left out of the bound.

#include <vector>

#include "runner/eventrun_executor.h"

namespace evsim {

// cudaEventElapsedTime's resolution (CUDA runtime API documentation: "around 0.5 microseconds").
constexpr double kCudaEventResolutionUs = 0.5;

struct ReferenceWindow {
  double before_us = 0;  // steady_clock before recording the reference event
  double after_us = 0;   // steady_clock once the reference was seen complete
};

struct GpuElapsed {
  double start_ms = 0;  // cudaEventElapsedTime(reference, start event)
  double end_ms = 0;    // cudaEventElapsedTime(reference, end event)
};

struct ResolvedTimes {
  std::vector<ActionTime> times;  // one per action; 0 where not recorded
  double error_us = 0;            // bound on each time's error against the host clock
};

// `elapsed[a]` is read only where `recorded[a]`. Throws Error when the window is reversed or a
// recorded action starts before the reference or ends before it starts (beyond the resolution).
ResolvedTimes resolveGpuTimes(const ReferenceWindow& window, const std::vector<GpuElapsed>& elapsed,
                              const std::vector<bool>& recorded);

}  // namespace evsim
