#pragma once
// Communication arithmetic of measurements: algbw (nccl-tests: bytes / time); the bus-bandwidth and
// ring-scaling factors are in events/comm_factors.h, shared with the cost model.

#include <cstdint>

#include "events/comm_factors.h"

namespace evsim {

// GB/s (1e9 bytes per second) of `bytes` moved in `time_us` microseconds.
double algorithmBandwidthGBs(int64_t bytes, double time_us);

}  // namespace evsim
