#pragma once
// What a command is about to write or compute, estimated before it starts (issue 33, item 3):
// `simulate --ranks all --csv` at 131,072 GPUs wrote ~100 MB/s until the disk was full (about
// 130 GB), and `--jitter 0.05 --iterations 100000` would have taken ~40 min. The estimates are
// counts (rows, op samples) times fixed per-unit figures, so the verdict on a command is the same
// under any machine load.

#include <cstdint>
#include <string>
#include <vector>

#include "modeler/simulation.h"
#include "modeler/trace_writer.h"

namespace evsim {

// Default bound on one timeline output (simulate --csv / --trace, uncompressed bytes);
// --max-output-gib raises or lowers it.
inline constexpr double kDefaultMaxOutputGiB = 4;

struct OutputEstimate {
  int64_t rows = 0;        // device events over the selected ranks
  double csv_bytes = 0;    // the CSV
  double trace_bytes = 0;  // the Chrome trace, uncompressed
};

// Rows counted exactly (per pipeline class and stage, once each); bytes from the formatted size of
// the first selected rank's rows.
OutputEstimate estimateTimelineOutput(const Simulation& sim, const TimelineSource& source,
                                      const std::vector<int64_t>& ranks);

// Throws InputError when a requested output (`trace_path`, `csv_path`; "" for none) is estimated
// above `max_gib`, naming the estimate and the flags that bound it; EnvironmentError when it
// exceeds the free space of the file system it goes to.
void checkTimelineOutput(const OutputEstimate& estimate, const std::string& trace_path,
                         const std::string& csv_path, int64_t rank_count, double max_gib);

// Op executions of one sampled iteration (every op of every simulated stage timeline).
int64_t opsPerIteration(const Simulation& sim);

// Nominal sampling rate, op executions per CPU-second: 3.45e7 measured on this project's 2-core
// machine (gpt2-345m 1M8P16D B=512, 100,000 iterations: 2.85e9 op samples in 82.6 s of CPU;
// bench/RESULTS.md), rounded down. Only the printed time estimate uses it.
inline constexpr double kNominalOpSamplesPerS = 3.0e7;
// Above this many op samples (about 10 minutes at the nominal rate) --iterations is refused.
inline constexpr double kMaxOpSamples = 1.8e10;

// Throws InputError when `iterations` x opsPerIteration exceeds kMaxOpSamples (naming the
// estimate and --iterations); returns a one-line note with the estimate when it exceeds a minute
// ("" otherwise).
std::string checkSamplingWork(const Simulation& sim, int iterations);

}  // namespace evsim
