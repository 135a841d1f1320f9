#pragma once
// The memory_pass stand-in's bounded buffers, shared by both backends (host-only arithmetic, so
// it is tested without a GPU). A memory_pass event is known by its bytes alone (read_bytes,
// write_bytes); its stand-in moves those bytes through buffers of at most kMemoryPassBufferBytes
// each, going round them again, so a 4 GiB event does not hold 4 GiB.

#include <cstdint>
#include <vector>

namespace evsim {

// 256 MiB: beyond one CPU core's last-level cache (the CPU pass is single-threaded) and beyond the
// L2 of the GPUs we profile (A100 40 MB, H100/H200 50 MB), so a pass that goes round its buffers
// still streams from memory, as one over the event's whole tensors would.
inline constexpr int64_t kMemoryPassBufferBytes = int64_t{256} << 20;

// Buffer words that stand for `words` fp32 words moved: all of them, up to the bound above.
int64_t memoryPassBufferWords(int64_t words);

// One launch of the CUDA stand-in: it reads in[0, read_words) once and writes out[0, write_words)
// once (read_words <= the input buffer, 1 <= write_words <= the output buffer).
struct MemoryPassLaunch {
  int64_t read_words = 0;
  int64_t write_words = 0;
  bool operator==(const MemoryPassLaunch&) const = default;
};

// The launches that move `read_words` reads and `write_words` writes (>= 1) through buffers of
// memoryPassBufferWords() words: as few as both bounds allow, L = max(ceil(R / in), ceil(W / out)),
// each taking an even share of the reads and of the writes (the first R mod L one word more).
// Every launch writes at least one word (its sums must land somewhere), so when the reads need
// more launches than there are words written, the writes come to L instead of W: one extra 4-byte
// word per 256 MiB read at most.
std::vector<MemoryPassLaunch> memoryPassLaunches(int64_t read_words, int64_t write_words);

}  // namespace evsim
