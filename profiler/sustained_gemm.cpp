#include "profiler/sustained_gemm.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "common/strings.h"
#include "profiler/stats.h"

namespace evsim {

namespace {

double median(std::vector<double> xs) { return computeStats(std::move(xs)).median_us; }

// Repetitions per chunk of the stream: ~1 s of GEMMs between two kernel constructions (which
// leave the device idle for a moment) on a GPU; a few on a CPU.
int chunkRepeats(const std::string& platform) { return platform == "cuda" ? 700 : 4; }

}  // namespace

SustainedGemmRecord summarizeSustainedStream(double short_median_us,
                                             const std::vector<StreamChunk>& chunks, double seconds,
                                             double elapsed_s) {
  if (chunks.empty()) {
    EVSIM_THROW(InputError, "--sustained-gemm-s {}: the stream timed no chunk", seconds);
  }
  std::vector<double> tail;
  for (const StreamChunk& c : chunks) {
    if (c.at_s >= 0.75 * elapsed_s) tail.push_back(c.median_us);
  }
  if (tail.empty()) tail.push_back(chunks.back().median_us);
  SustainedGemmRecord r;
  r.seconds = seconds;
  r.elapsed_s = elapsed_s;
  r.short_us = short_median_us;
  r.sustained_us = median(tail);
  r.chunks = static_cast<int>(chunks.size());
  return r;
}

Event sustainedGemmEvent(const std::string& platform) {
  return platform == "cuda" ? makeGemm(8192, 8192, 8192, "nn", DType::kBf16)
                            : makeGemm(256, 256, 256, "nn", DType::kFp32);
}

SustainedGemmRecord measureSustainedGemm(Device& device, double seconds, int short_repeats,
                                         std::FILE* log) {
  if (!(seconds > 0)) {
    EVSIM_THROW(InputError, "--sustained-gemm-s {}: must be > 0 seconds", seconds);
  }
  const Event gemm = sustainedGemmEvent(device.platform());
  if (std::string why = device.cannotMeasure(gemm); !why.empty()) {
    EVSIM_THROW(InputError, "--sustained-gemm-s: {}", why);
  }
  // The burst first, on the device as eventprof finds it (a couple of warm-up runs).
  const double short_us = median(device.timeCompute(gemm, 2, std::max(1, short_repeats)));
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<StreamChunk> chunks;
  const int repeats = chunkRepeats(device.platform());
  for (double at = 0; at < seconds; at = since()) {
    const double chunk_us = median(device.timeCompute(gemm, 0, repeats));
    chunks.push_back({at, chunk_us});
    if (log != nullptr) {
      std::fprintf(log, "[eventprof] sustained gemm: %.1f s, %.1f us (burst %.1f us)\n", since(),
                   chunk_us, short_us);
    }
  }
  SustainedGemmRecord r = summarizeSustainedStream(short_us, chunks, seconds, since());
  r.backend = device.platform();
  r.device = device.deviceName();
  r.date = utcNow();
  r.gemm = gemm.signature();
  r.max_clock_mhz = device.maxClockMhz();
  return r;
}

}  // namespace evsim
