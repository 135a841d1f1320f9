#pragma once
// `eventsim calibrate --sustained-gemm FILE`: the sustained clock from eventprof's measurement
// (io/sustained_gemm_file.h) into the device file's clocks (config/device_config.h):
//   fit_mhz       = the device's clocks.fit_mhz when it has one (the clock its kernel fit saw),
//                   else the measured device's maximum SM clock (the short burst ran at it)
//   sustained_mhz = fit_mhz * short_us / sustained_us
// A device without a model, or with neither clock to scale (a CPU measurement: max clock 0, and
// no clocks.fit_mhz), is an InputError naming the file.

#include <string>

#include "config/device_config.h"
#include "io/sustained_gemm_file.h"

namespace evsim {

void applySustainedClock(const SustainedGemmRecord& record, const std::string& origin,
                         DeviceSpec& device);

}  // namespace evsim
