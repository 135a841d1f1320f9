#pragma once
// eventprof --sustained-gemm-s S: the sustained-clock measurement (io/sustained_gemm_file.h).
// One large GEMM is timed first as eventprof times any event (`short_repeats` repetitions on a
// fresh device: the clock the kernel fits saw), then back to back in chunks for S seconds, the way
// a training step streams GEMMs at the board's power limit. The short burst's median against the
// median of the chunks in the last quarter of the stream is the sustained/short ratio that
// `eventsim calibrate --sustained-gemm` turns into clocks.sustained_mhz. Rank-local.

#include <cstdio>
#include <vector>

#include "io/sustained_gemm_file.h"
#include "platform/device.h"

namespace evsim {

// One timed chunk of the stream: when it started (seconds since the stream began) and the median
// of its repetitions.
struct StreamChunk {
  double at_s = 0;
  double median_us = 0;
};

// The record's times from the burst and the stream (GPU-free, so tested with synthetic chunks):
// short_us = short_median_us; sustained_us = the median of the chunks' medians that started in
// the last quarter of elapsed_s (at least the last chunk). InputError when the stream is empty.
SustainedGemmRecord summarizeSustainedStream(double short_median_us,
                                             const std::vector<StreamChunk>& chunks, double seconds,
                                             double elapsed_s);

// The GEMM per platform: 8192^3 bf16 on a GPU (~1.4 ms on an H100), 256^3 fp32 on a CPU.
Event sustainedGemmEvent(const std::string& platform);

// Runs the measurement on `device` (seconds > 0); prints progress to `log` when not null.
SustainedGemmRecord measureSustainedGemm(Device& device, double seconds, int short_repeats,
                                         std::FILE* log);

}  // namespace evsim
