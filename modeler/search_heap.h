#pragma once
// The heap settings a search runs best under (issue 34 item 2: a two-thread search's speed and
// peak memory). Process-wide and permanent (glibc cannot read its settings back), so only a
// process that owns its heap sets them: the eventsim executable's main and the benches, first
// thing. The library never does: the Python module runs searches inside the user's interpreter.

namespace evsim {

// Under glibc: two malloc arenas (the caller's thread and a search team's other thread, each its
// own; more threads share them), allocations up to 32 MiB served from them rather than mapped,
// and at most 8 MiB of each one's free top kept (search_heap.cpp says why). Elsewhere nothing.
// Call it before any other thread starts (an arena made earlier stays in use).
void useSearchHeap();

}  // namespace evsim
