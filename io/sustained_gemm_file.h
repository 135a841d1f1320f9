#pragma once
// The sustained-clock measurement (eventprof --sustained-gemm-s S), as `eventsim calibrate
// --sustained-gemm FILE` reads it. One GEMM is timed the way eventprof times every event (a short
// burst of repetitions, the GPU fresh), then back to back for S seconds; the last quarter of that
// stream is what a training step's GEMMs sustain at the board's power limit. The device model
// turns the ratio into the device file's clocks.sustained_mhz (config/device_config.h).
//
//   sustained_gemm:
//     backend: cuda                       # the platform that ran it (cpu in tests)
//     device: "NVIDIA H100 80GB HBM3"
//     date: "2026-11-26T01:00:00Z"
//     gemm: "gemm m=8192 n=8192 k=8192 layout=nn dtype=bf16"
//     seconds: 60                         # the stream asked for; elapsed_s what it ran
//     elapsed_s: 60.4
//     short_us: 1402.1                    # median of the first burst
//     sustained_us: 1517.3                # median of the chunks in the stream's last quarter
//     chunks: 43                          # timed chunks of the stream
//     max_clock_mhz: 1980                 # the device's maximum SM clock (0: not known, a CPU)
//
// Reading checks every key and that the times are positive; anything else is an InputError naming
// the file and the key.

#include <string>

namespace evsim {

struct SustainedGemmRecord {
  std::string backend, device, date, gemm;
  double seconds = 0, elapsed_s = 0;
  double short_us = 0, sustained_us = 0;
  int chunks = 0;
  double max_clock_mhz = 0;
  // The sustained throughput as a share of the short burst's (< 1 when the clock drops).
  double sustainedRatio() const { return short_us / sustained_us; }
};

std::string sustainedGemmYaml(const SustainedGemmRecord& record);
void saveSustainedGemm(const SustainedGemmRecord& record, const std::string& path);
SustainedGemmRecord loadSustainedGemm(const std::string& path);
SustainedGemmRecord parseSustainedGemm(const std::string& yaml_text, const std::string& origin);

}  // namespace evsim
