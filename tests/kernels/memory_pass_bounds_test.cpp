// kernels/memory_pass_bounds.h: the launches the CUDA memory_pass stand-in splits an event into
// (host arithmetic, no GPU needed), worked by hand against the 2^26-word (256 MiB) buffer bound.
#include "kernels/memory_pass_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace evsim {
namespace {

constexpr int64_t kBound = int64_t{1} << 26;  // 256 MiB / 4 bytes

TEST(MemoryPassLaunches, ASmallEventIsOneLaunchOfItsOwnSize) {
  EXPECT_EQ(kMemoryPassBufferBytes / 4, kBound);
  EXPECT_EQ(memoryPassLaunches(5000, 1234), (std::vector<MemoryPassLaunch>{{5000, 1234}}));
  EXPECT_EQ(memoryPassLaunches(0, 4), (std::vector<MemoryPassLaunch>{{0, 4}}));  // a fill
  EXPECT_EQ(memoryPassLaunches(kBound, kBound), (std::vector<MemoryPassLaunch>{{kBound, kBound}}));
}

TEST(MemoryPassLaunches, ALargeReadSplitsEvenlyOverItsBuffer) {
  // 3 buffers and 2 words read, 2 buffers written: max(ceil(3.00..), ceil(2)) = 4 launches.
  // Reads (3 * 2^26 + 2) / 4 = 50,331,648 rem 2: the first two launches read one word more.
  // Writes 2^27 / 4 = 33,554,432 each.
  const std::vector<MemoryPassLaunch> want{
      {50331649, 33554432}, {50331649, 33554432}, {50331648, 33554432}, {50331648, 33554432}};
  EXPECT_EQ(memoryPassLaunches(3 * kBound + 2, 2 * kBound), want);
}

TEST(MemoryPassLaunches, ALargeWriteSplitsOverItsBufferToo) {
  // 10 words read into 5 buffers' worth: 5 launches of 2 reads and one buffer each.
  EXPECT_EQ(memoryPassLaunches(10, 5 * kBound),
            std::vector<MemoryPassLaunch>(5, MemoryPassLaunch{2, kBound}));
}

TEST(MemoryPassLaunches, AReductionWritesOneWordPerLaunch) {
  // A 2 GiB read into one word (a loss): 8 launches of one buffer each, each writing its sum:
  // 8 words written instead of 1 (one per 256 MiB read, the documented excess).
  EXPECT_EQ(memoryPassLaunches(8 * kBound, 1),
            std::vector<MemoryPassLaunch>(8, MemoryPassLaunch{kBound, 1}));
}

TEST(MemoryPassLaunches, EveryLaunchFitsItsBuffersAndTheTotalsAreTheEvents) {
  for (const int64_t read : {int64_t{0}, int64_t{7}, kBound - 1, kBound + 1, 5 * kBound + 3}) {
    for (const int64_t write : {int64_t{1}, int64_t{9}, kBound, 2 * kBound + 5, 7 * kBound}) {
      const std::vector<MemoryPassLaunch> launches = memoryPassLaunches(read, write);
      int64_t reads = 0, writes = 0;
      for (const MemoryPassLaunch& l : launches) {
        EXPECT_LE(l.read_words, memoryPassBufferWords(read));
        EXPECT_GE(l.write_words, 1);
        EXPECT_LE(l.write_words, memoryPassBufferWords(write));
        reads += l.read_words;
        writes += l.write_words;
      }
      const auto count = static_cast<int64_t>(launches.size());
      EXPECT_EQ(reads, read) << read << " " << write;
      EXPECT_EQ(writes, std::max(write, count)) << read << " " << write;
      // As few launches as the two buffers allow.
      EXPECT_EQ(count, std::max({int64_t{1}, (read + kBound - 1) / kBound,
                                 (write + kBound - 1) / kBound}));
    }
  }
}

TEST(MemoryPassLaunches, RefusesNothingWritten) {
  EXPECT_THROW(memoryPassLaunches(4, 0), Error);
  EXPECT_THROW(memoryPassLaunches(-1, 4), Error);
}

}  // namespace
}  // namespace evsim
