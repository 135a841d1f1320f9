// useSearchHeap (modeler/search_heap.h): under glibc a block one thread frees serves the next
// thread's allocation of its size from the same heap, neither mapped for it nor given back (an
// arena whose thread has ended goes to the next thread that needs one).

#include "modeler/search_heap.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace evsim {
namespace {

TEST(SearchHeap, AThreadReusesTheBlocksAnEndedThreadFreed) {
#if defined(__GLIBC__)
  useSearchHeap();
  // 3 MiB: mapped by glibc's defaults (their first threshold is 128 KiB), under the 32 MiB
  // served from the arenas and the 8 MiB of free top each keeps.
  constexpr size_t kBlock = size_t{3} << 20;
  auto heapBytes = [] { return mallinfo2().arena; };  // the arenas' memory from the kernel
  auto mappedBytes = [] { return mallinfo2().hblkhd; };
  size_t mapped_while_held = 0, heap_after_first = 0, heap_while_second_held = 0;
  std::thread([&] {
    std::vector<char> block(kBlock, 1);
    mapped_while_held = mappedBytes();
  }).join();
  heap_after_first = heapBytes();
  std::thread([&] {
    std::vector<char> block(kBlock, 2);
    heap_while_second_held = heapBytes();
  }).join();
  EXPECT_LT(mapped_while_held, kBlock);  // not mapped: in the heap
  EXPECT_GE(heap_after_first, kBlock);   // freed but kept
  EXPECT_LT(heap_while_second_held, heap_after_first + kBlock);  // the first's block reused
#else
  GTEST_SKIP() << "heap settings apply to glibc only";
#endif
}

}  // namespace
}  // namespace evsim
