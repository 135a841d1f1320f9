// The memory_pass stand-in: bytes read folded onto bytes written, over bounded buffers.
#include <algorithm>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void memoryPass(const float* in, int64_t in_words, int64_t read_words, float* out,
                int64_t out_words, int64_t write_words) {
  EVSIM_CHECK(out_words > 0 && (in_words > 0 || read_words == 0),
              "memory pass: {} words read from a buffer of {}, written to one of {}", read_words,
              in_words, out_words);
  for (int64_t left = write_words; left > 0; left -= out_words) {
    std::fill(out, out + std::min(left, out_words), 0.0f);
  }
  // Run by run up to the next wrap of either buffer (no division per word).
  int64_t at_in = 0, at_out = 0;
  for (int64_t left = read_words; left > 0;) {
    const int64_t n = std::min({left, in_words - at_in, out_words - at_out});
    for (int64_t j = 0; j < n; ++j) out[at_out + j] += in[at_in + j];
    at_in = at_in + n == in_words ? 0 : at_in + n;
    at_out = at_out + n == out_words ? 0 : at_out + n;
    left -= n;
  }
}

}  // namespace evsim::cpu
