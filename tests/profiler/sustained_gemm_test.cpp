// The sustained-clock measurement's GPU-free parts (profiler/sustained_gemm.h,
// io/sustained_gemm_file.h): the summary of a synthetic stream worked by hand, the record's file
// read back, and a bad file named.
#include "profiler/sustained_gemm.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "io/sustained_gemm_file.h"

namespace evsim {
namespace {

TEST(SustainedGemm, TheLastQuarterOfTheStreamIsWhatIsSustained) {
  // A 60 s stream of 1 s chunks: 1400 us while cool, the clock dropping from 20 s on, 1520 us
  // for good from 40 s. The last quarter starts at 45 s: chunks at 45..59 s, all 1520 us except
  // one 1600 us outlier, so the median is 1520. Burst 1400 us: ratio 1400 / 1520 = 0.921.
  std::vector<StreamChunk> chunks;
  for (int s = 0; s < 60; ++s) {
    const double us = s < 20 ? 1400 : s < 40 ? 1400 + 6 * (s - 20) : (s == 50 ? 1600 : 1520);
    chunks.push_back({double(s), us});
  }
  const SustainedGemmRecord r = summarizeSustainedStream(1400, chunks, 60, 60.2);
  EXPECT_EQ(r.chunks, 60);
  EXPECT_EQ(r.short_us, 1400);
  EXPECT_EQ(r.sustained_us, 1520);
  EXPECT_NEAR(r.sustainedRatio(), 1400.0 / 1520.0, 1e-12);
}

TEST(SustainedGemm, AShortStreamKeepsItsLastChunkAndAnEmptyOneIsAnError) {
  // One chunk that began at 0 s of a 0.5 s stream: it is the last quarter's only candidate.
  const SustainedGemmRecord r = summarizeSustainedStream(100, {{0.0, 125.0}}, 0.5, 0.6);
  EXPECT_EQ(r.sustained_us, 125);
  EXPECT_NEAR(r.sustainedRatio(), 0.8, 1e-12);
  try {
    summarizeSustainedStream(100, {}, 1, 1);
    ADD_FAILURE() << "summarized an empty stream";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the stream timed no chunk"), std::string::npos);
  }
}

TEST(SustainedGemm, TheRecordReadsBackAndABadOneIsNamed) {
  SustainedGemmRecord r;
  r.backend = "cuda";
  r.device = "NVIDIA H100 80GB HBM3";
  r.date = "2026-11-26T01:00:00Z";
  r.gemm = sustainedGemmEvent("cuda").signature();
  r.seconds = 60;
  r.elapsed_s = 60.4;
  r.short_us = 1402.5;
  r.sustained_us = 1517.25;
  r.chunks = 43;
  r.max_clock_mhz = 1980;
  const SustainedGemmRecord again = parseSustainedGemm(sustainedGemmYaml(r), "again.yaml");
  EXPECT_EQ(again.gemm, "gemm m=8192 n=8192 k=8192 layout=nn dtype=bf16");
  EXPECT_EQ(again.device, r.device);
  EXPECT_EQ(again.sustained_us, 1517.25);
  EXPECT_EQ(again.max_clock_mhz, 1980);
  std::string bad = sustainedGemmYaml(r);
  bad.replace(bad.find("sustained_us: 1517.25"), 21, "sustained_us: 0");
  try {
    parseSustainedGemm(bad, "bad.yaml");
    ADD_FAILURE() << "accepted a zero time";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sustained_us"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace evsim
