#include "modeler/search_heap.h"

#include <cstddef>  // first: defines __GLIBC__ under glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace evsim {

// glibc's defaults give each thread its own arena, map each allocation above a threshold that
// grows with the largest one freed, and give an arena's free top back to the kernel past another
// such threshold. A search simulates one large candidate after another on two threads (Llama
// 3.1 405B on 1,024 GPUs: ~20-30 MB each, built and freed about 40 times), so:
// - each thread's arena kept what the largest simulation it ever ran had freed, and the two
//   arenas added up: a two-thread search peaked at 75 MB where its live data never passed ~58
//   and one thread's at 54 (the simulation budget, pruned_search_state.h, bounds the live data
//   only). One arena shared by the threads peaks at what is live at once plus its fragments;
// - memory mapped or trimmed for each simulation was faulted in again by the next: 131,381 page
//   faults and 0.43 s of system time beside 3.35 s of user time in that search on one thread;
//   11,844 and 0.09 s with freed memory kept for reuse (bench/RESULTS.md, session 24, rss34c).
// The two threads' allocations did not contend more on one arena (the same futex calls).
void useOneReusedHeap() {
#if defined(__GLIBC__)
  constexpr int kKeptBytes = 32 << 20;  // glibc's largest mmap threshold (HEAP_MAX_SIZE / 2)
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, kKeptBytes);  // also stops the thresholds from moving
  mallopt(M_TRIM_THRESHOLD, kKeptBytes);
#endif
}

}  // namespace evsim
