// The memory_pass stand-in's buffer bound and the CUDA pass's launches; memory_pass_bounds.h.
#include "kernels/memory_pass_bounds.h"

#include <algorithm>

#include "common/error.h"

namespace evsim {

int64_t memoryPassBufferWords(int64_t words) {
  return std::min(words, kMemoryPassBufferBytes / int64_t{sizeof(float)});
}

std::vector<MemoryPassLaunch> memoryPassLaunches(int64_t read_words, int64_t write_words) {
  EVSIM_CHECK(read_words >= 0 && write_words >= 1, "memory pass: {} words read, {} written",
              read_words, write_words);
  const auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t in_words = memoryPassBufferWords(read_words);
  const int64_t out_words = memoryPassBufferWords(write_words);
  const int64_t launches = std::max(read_words == 0 ? 1 : ceilDiv(read_words, in_words),
                                    ceilDiv(write_words, out_words));
  std::vector<MemoryPassLaunch> out(static_cast<size_t>(launches));
  for (int64_t i = 0; i < launches; ++i) {
    MemoryPassLaunch& l = out[static_cast<size_t>(i)];
    l.read_words = read_words / launches + (i < read_words % launches ? 1 : 0);
    l.write_words = std::max<int64_t>(1, write_words / launches + (i < write_words % launches));
  }
  return out;
}

}  // namespace evsim
