// The memory_pass stand-in (kernels/cpu/memory_pass.cpp): its fold traced by hand, the unbounded
// case (buffers as large as the event) as before the bound, and a large event's buffers bounded.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <vector>

#include "events/event.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/kernel.h"
#include "kernels/memory_pass_bounds.h"

namespace evsim {
namespace {

TEST(CpuMemoryPass, FoldsTheCyclicReadOntoTheCyclicWrite) {
  // 10 words read from a buffer of 4 {1, 2, 4, 8}: 1 2 4 8 1 2 4 8 1 2; onto 3 words (5 written,
  // so all 3 are zeroed first): word 0 gets reads 0, 3, 6, 9 = 1 + 8 + 4 + 2 = 15, word 1 reads
  // 1, 4, 7 = 2 + 1 + 8 = 11, word 2 reads 2, 5, 8 = 4 + 2 + 1 = 7.
  const std::vector<float> in = {1, 2, 4, 8};
  std::vector<float> out = {99, 99, 99};
  cpu::memoryPass(in.data(), 4, 10, out.data(), 3, 5);
  EXPECT_EQ(out, (std::vector<float>{15, 11, 7}));
}

TEST(CpuMemoryPass, BuffersAsLargeAsTheEventFoldWordIOntoWordIModOut) {
  // 6 words read onto 4 written: out[j] = in[j] + in[j + 4] for j < 2, in[j] for j = 2, 3.
  const std::vector<float> in = {1, 2, 4, 8, 16, 32};
  std::vector<float> out(4, 99);
  cpu::memoryPass(in.data(), 6, 6, out.data(), 4, 4);
  EXPECT_EQ(out, (std::vector<float>{17, 34, 4, 8}));
  // Nothing read: a fill of the words written only.
  std::vector<float> fill(4, 99);
  cpu::memoryPass(nullptr, 0, 0, fill.data(), 4, 4);
  EXPECT_EQ(fill, (std::vector<float>(4, 0)));
}

TEST(CpuMemoryPass, BufferWordsAreTheWordsMovedUpToTheBound) {
  const int64_t bound = kMemoryPassBufferBytes / 4;  // 256 MiB of floats
  EXPECT_EQ(bound, int64_t{64} << 20);
  EXPECT_EQ(memoryPassBufferWords(0), 0);
  EXPECT_EQ(memoryPassBufferWords(1000), 1000);
  EXPECT_EQ(memoryPassBufferWords(bound), bound);
  EXPECT_EQ(memoryPassBufferWords(16 * bound), bound);  // a 4 GiB read
}

long peakRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

TEST(CpuMemoryPass, ALargeEventHoldsBoundedBuffers) {
  // A 2 GiB read (a cross-entropy's logits, say) into 4 bytes: the kernel holds one 256 MiB input
  // buffer, not 2 GiB. ctest runs each test in a process of its own, so the peak starts low.
  const long before = peakRssKb();
  const Event e = makeCompute(
      "memory_pass", {{"read_bytes", int64_t{2} << 30}, {"write_bytes", 4}}, "", DType::kBf16);
  const std::unique_ptr<ComputeKernel> kernel = makeCpuKernel(e, 1);
  ASSERT_NE(kernel, nullptr);
  EXPECT_LT(peakRssKb() - before, 512L << 10) << "KiB more than before the kernel";
}

}  // namespace
}  // namespace evsim
