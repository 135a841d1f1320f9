#pragma once
// What eventsim knows of one collective, in one place, shared by the cost model, the profiler and
// eventrun: its signature name, the nccl-tests binary that measures it, its bus-bandwidth factor
// (nccl-tests, doc/PERFORMANCE.md), its latency-bound ring steps, whether a time measured over n
// ranks scales to N by the ring volume factor, and the elements each rank sends and receives.
// One file per collective in events/collectives/ (all_reduce.cpp, ...), listed in
// collectives/registry.cpp. The devices run them from the same buffers (mpi/mpi_collectives,
// mpi/cuda/nccl_collectives).
//
// `elements` is always an event's message_bytes in elements: all-reduce, broadcast, p2p: the buffer
// each rank contributes or sends; reduce-scatter, all-gather, all-to-all: the FULL buffer
// (nccl-tests' "size"), of which each rank holds or sends one n-th per peer.

#include <cstdint>
#include <string_view>
#include <vector>

#include "events/event.h"

namespace evsim {

struct CollectiveBuffers {
  int64_t send_elements = 0;
  int64_t recv_elements = 0;
};

struct Collective {
  EventKind kind = EventKind::kAllReduce;
  std::string_view name;        // in signatures: "allreduce"
  std::string_view nccl_tests;  // the nccl-tests binary: "all_reduce_perf"
  // busbw = algbw * bus_factor(n): the share of the buffer each rank's link carries.
  double (*bus_factor)(int n) = nullptr;
  // Latency-bound steps of the ring (or pairwise) algorithm over n ranks.
  double (*latency_steps)(int n) = nullptr;
  // Whether time(N) = time(n) * bus_factor(N) / bus_factor(n) (bandwidth-bound ring algorithms).
  bool ring_scalable = false;
  // What each of n ranks sends and receives for a message of `elements` (see above); a remainder
  // of fewer elements than ranks is dropped (it would not change the time measurably).
  CollectiveBuffers (*buffers)(int64_t elements, int n) = nullptr;
};

// The collective of a communication kind; an internal error for kCompute.
const Collective& collectiveOf(EventKind kind);
// By signature name ("allreduce"), or nullptr.
const Collective* findCollective(std::string_view name);
// Every collective, in EventKind order.
const std::vector<const Collective*>& allCollectives();

}  // namespace evsim
