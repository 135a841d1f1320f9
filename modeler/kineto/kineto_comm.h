#pragma once
// Matches a collective of a PyTorch profiler trace (kineto_trace.h: a record_param_comms op or an
// NCCL kernel with its args) to the communication events of an eventsim plan
// (docs/PROFILER.md, "Importing a PyTorch profiler trace"):
//   kind   from the collective name: allreduce[_coalesced] -> all-reduce; allgather,
//          _allgather_base, all_gather_into_tensor[_coalesced] -> all-gather; reduce_scatter,
//          _reduce_scatter_base, reduce_scatter_tensor[_coalesced] -> reduce-scatter; alltoall,
//          alltoall_base, all_to_all -> all-to-all; send, recv -> p2p; broadcast -> broadcast
//   bytes  in eventsim's convention (events/event.h): the full buffer for all-gather and
//          reduce-scatter (the larger of In and Out msg nelems), the input otherwise, times the
//          dtype's size
//   group  "Group size" (p2p events are pairs: any group size); with "Process Group Ranks" and
//          the cluster's GPUs per node, the nodes it spans and its most ranks on one node
// Every plan event of that kind, bytes and placement is matched (one of the trace's dtype when
// there is one); without ranks, only when the plan's candidates share one placement.

#include <string>
#include <vector>

#include "events/event_table.h"
#include "modeler/kineto/kineto_trace.h"

namespace evsim {

struct KinetoCollectiveMatch {
  std::vector<int> events;  // plan event indices; empty when unmatched
  std::string what;         // "allreduce 4096 x Float group 2 [0, 1]": how the miss is listed
  std::string reason;       // why it is unmatched ("" when matched)
};

// `gpus_per_node` 0: the placement is not worked out from the ranks.
KinetoCollectiveMatch matchKinetoCollective(const KinetoCollective& c, const EventTable& table,
                                            int gpus_per_node);

}  // namespace evsim
