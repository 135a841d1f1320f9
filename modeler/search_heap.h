#pragma once
// The heap settings the pruned search runs under (issue 34 item 2: a two-thread search's peak
// memory). Process-wide and kept after the search: glibc has no way to read its settings back.

namespace evsim {

// Under glibc: one malloc arena for every thread, allocations up to 32 MiB served from it rather
// than mapped, and at most 32 MiB of its free top kept (search_heap.cpp says why). Elsewhere
// nothing. Call it before the threads that should share the arena first allocate.
void useOneReusedHeap();

}  // namespace evsim
