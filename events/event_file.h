#pragma once
// The events file `eventsim events -o FILE` writes and `eventprof --events FILE` reads (YAML):
//
//   eventsim_events: 1                 # format version
//   source: {model: gpt2-345m, cluster: a40-4x4, strategy: 2M2P4D}
//   op_executions: 123456
//   unique_events: 42
//   events:
//     - signature: "gemm m=2048 n=1536 k=1024 layout=nt dtype=fp16"
//       kind: compute
//       op: gemm
//       count: 1536
//       flops: 6442450944
//       bytes: 12582912
//     - signature: "allreduce bytes=4194304 group=2 nodes=1 rpn=2 dtype=fp16"
//       kind: allreduce
//       op: allreduce
//       count: 3072
//       bytes: 4194304
//       group_size: 2
//       scope: intra
//
// Only `signature` is needed to rebuild an event; the rest is for people and for checking.

#include <map>
#include <string>
#include <vector>

#include "events/event_table.h"

namespace evsim {

inline constexpr int kEventsFileVersion = 1;

// `source` entries are written in order under `source:`.
std::string eventsFileYaml(const EventTable& table, int64_t op_executions,
                           const std::vector<std::pair<std::string, std::string>>& source);

// Reads an events file; throws InputError naming the file and entry on any problem (unknown
// version, missing signature, a signature that does not parse, a kind that contradicts it).
std::vector<UniqueEvent> loadEventsFile(const std::string& path);
// The same from text; `origin` names it in errors (tests, fuzzing).
std::vector<UniqueEvent> parseEventsFile(const std::string& text, const std::string& origin);

// "intra" or "inter" for communication events.
std::string_view scopeName(const Placement& placement);

}  // namespace evsim
