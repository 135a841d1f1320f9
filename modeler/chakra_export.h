#pragma once
// Chakra execution traces of a simulated iteration, one per rank, for ASTRA-sim
// (`eventsim simulate --chakra DIR`). ASTRA-sim's workload layer reads `<prefix>.<rank>.et` for
// each NPU with Chakra's ET feeder and the communicator groups from a JSON file
// (--comm-group-configuration): {"1": [0, 1], "2": [0, 2], ...}.
//
// Per rank, every device event of its timeline (its pipeline class's, with its own rank ids)
// becomes a node, in the order the timeline starts them:
//   compute op         COMP_NODE, duration_micros (rounded), num_ops = FLOPs (int64),
//                      tensor_size = bytes read + written (uint64), is_cpu_op = false
//   host-stream op     COMP_NODE with is_cpu_op = true (--offload's copies and host optimizer:
//                      ASTRA-sim replays them on its CPU resource)
//   collective         COMM_COLL_NODE: comm_type (int64, CollectiveCommType), comm_size (int64:
//                      the event's bytes, nccl-tests' "size"), pg_name (string: the id of the
//                      group in the comm-group file; ids start at 1, as ASTRA-sim reads "0" as
//                      every rank)
//   pipeline send      COMM_SEND_NODE on the sender and COMM_RECV_NODE on the receiver (same
//                      interval): comm_src, comm_dst, comm_tag (int32), comm_size (int64)
//   CP ring exchange   a COMM_SEND_NODE to the next CP rank and a COMM_RECV_NODE from the
//                      previous one
// The attribute names and value types are those Chakra's feeder reads (et_feeder_node.cpp).
// A pipeline send between two chunks of one device (a V schedule's turn) moves no data and is left
// out.
//
// Dependencies (data_deps, which the feeder resolves): ASTRA-sim runs one GPU compute node and one
// communication node (collective or send) at a time per NPU, receives aside; so each compute node
// follows the previous compute node, each collective or send the previous one, each host op the
// previous host op; and every node also waits for the latest node of each other kind (compute,
// host, communication, receive) that ended before it started in the simulated timeline: the
// timeline's order, which holds the real dependencies (a layer's input from its receive, a
// tensor-parallel all-reduce between two GEMMs, the gradient all-reduce after the backward).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/chakra/et_def.pb.h"
#include "modeler/simulation.h"

namespace evsim {

// The communicator groups the traces name: each distinct rank set gets the next id, from 1, in
// the order first met.
class ChakraCommGroups {
 public:
  int id(const std::vector<int64_t>& ranks);
  // Group id - 1 -> its ranks (ascending).
  const std::vector<std::vector<int64_t>>& groups() const { return groups_; }
  // ASTRA-sim's comm-group file: {"1": [0, 1], ...}.
  std::string json() const;

 private:
  std::map<std::vector<int64_t>, int> ids_;
  std::vector<std::vector<int64_t>> groups_;
};

// The nodes of `rank`'s trace (ids 0.. in file order), adding the groups it names to `groups`.
std::vector<ChakraProtoMsg::Node> chakraNodes(const Simulation& sim, int64_t rank,
                                              ChakraCommGroups& groups);

struct ChakraOutput {
  int64_t files = 0;  // trace files (one per rank)
  int64_t nodes = 0;  // over all of them
  double bytes = 0;   // traces and comm-group file
  int groups = 0;     // communicator groups
  int64_t stale_removed = 0;  // <prefix>.<rank>.et of ranks >= this world, left by an earlier run
  std::string comm_group_path;
};

// Bytes of every rank's trace: each (pipeline class, stage) serialized once, times its ranks.
double estimateChakraBytes(const Simulation& sim);

// Writes `dir`/<prefix>.<rank>.et for every rank and `dir`/<prefix>.comm_group.json, and removes
// `dir`/<prefix>.<N>.et for N >= the world size (an earlier, larger run's ranks that would
// otherwise sit beside this run's as if they belonged to it; nothing else is touched). Throws
// InputError when `dir` is a file or cannot be created, or when the estimate exceeds `max_gib`.
ChakraOutput writeChakraTraces(const Simulation& sim, const std::string& dir,
                               const std::string& prefix, double max_gib);

}  // namespace evsim
