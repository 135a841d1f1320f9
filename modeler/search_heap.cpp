#include "modeler/search_heap.h"

#include <cstddef>  // first: defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace evsim {

// glibc's defaults give each thread its own arena, map each allocation above a threshold that
// grows with the largest one freed, and give an arena's free top back to the kernel past another
// such threshold. A search simulates one large candidate after another on two threads (Llama
// 3.1 405B on 1,024 GPUs: ~20-30 MB each, built and freed about 40 times). What each setting
// below answers:
// - Mapping: memory mapped or trimmed for each simulation was faulted in again by the next:
//   131,381 page faults and 0.43 s of system time beside 3.35 s of user time in that search on
//   one thread; 11,844 and 0.09 s with freed memory kept for reuse (bench/RESULTS.md, session 24,
//   rss34c). So allocations up to 32 MiB, glibc's largest mmap threshold, come from the arenas
//   (which also stops the threshold from moving).
// - Arenas: each thread's arena kept what the largest simulation it ever ran had freed, and the
//   arenas added up: a two-thread search peaked at 75 MB where its live data never passed ~58
//   (session 24). Sessions 24-29 shared one arena among the threads, keeping 32 MiB of its free
//   top; but one arena's lock, taken by every allocation its thread's cache cannot serve and by
//   every block over 1 KiB, left two threads' simulations no faster than one's once each had a
//   core of its own (worker_team.h): Llama 3 70B's 51 rounds 0.33 s on one thread, 0.33-0.35 s
//   on two; 0.21-0.23 s with an arena for each thread (bench/RESULTS.md, session 30, sim30). So
//   two arenas, the caller's thread's and the team's other thread's.
// - Trimming: two arenas add up again, so each keeps at most 8 MiB of free top: that 405B search
//   at two threads then peaked at 54.4-58.0 MB over 13 runs (keeping 4 MiB: 52.0-58.3 over 38,
//   for ~20,000 more page faults; one arena: 47.8-55.7), and at one thread took ~21,000 more page
//   faults than with 32 MiB kept (~0.03 s of system time).
void useSearchHeap() {
#if defined(__GLIBC__)
  constexpr int kServedBytes = 32 << 20;  // glibc's largest mmap threshold (HEAP_MAX_SIZE / 2)
  constexpr int kKeptBytes = 8 << 20;
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, kServedBytes);  // also stops the thresholds from moving
  mallopt(M_TRIM_THRESHOLD, kKeptBytes);
#endif
}

}  // namespace evsim
