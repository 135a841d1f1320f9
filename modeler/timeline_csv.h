#pragma once
// Reader of per-device timeline CSVs, the format `eventsim simulate --csv` and `eventrun --csv`
// write (modeler/trace_writer.cpp):
//   rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance,cp,ep
// (cp: the rank's context-parallel index, ep: its expert-parallel index, dp mod E; both 0 without
// them. They came last so that files of the 13-column header, before them, read as cp = ep = 0.)
//
// Files can be hundreds of MB, so the reader streams line by line and keeps only what `eventsim
// compare` needs per row: numbers, enums and an interned id for the op name (a few dozen distinct
// names). The event signature and provenance are validated for presence and then dropped.
// Anything malformed (header, column count, a field that is not a number or not a known name)
// throws InputError naming file:line and the column.

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ops/op_list.h"

namespace evsim {

// Interns op names so rows hold a 32-bit id; one table is shared by the files being compared, so
// equal ids mean equal names across files.
class NameTable {
 public:
  uint32_t intern(std::string_view name);
  const std::string& name(uint32_t id) const { return names_.at(id); }

 private:
  // Transparent hash: lookups by string_view, no allocation per row.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
};

// One device event; times in microseconds, as in the file (not yet relative to anything).
struct TimelineRow {
  int32_t rank = 0;
  int32_t pp = 0;           // pipeline stage of the rank
  int32_t micro_batch = 0;  // -1 outside micro-batch tasks
  int32_t layer = 0;        // block index, or kEmbeddingLayer / kHeadLayer
  uint32_t op = 0;          // NameTable id
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kForward;
  double start_us = 0;
  double end_us = 0;
};

struct Timeline {
  std::string path;  // for messages
  std::vector<TimelineRow> rows;
  double begin_us = 0;  // min start over all rows
  double end_us = 0;    // max end over all rows

  // Iteration time as both tools define it: last end minus first start.
  double iterationUs() const { return end_us - begin_us; }
};

// The first line of a per-timeline CSV (`simulate --ranks all`, modeler/trace_writer.h), which
// compare does not read: its rows stand for many ranks each.
inline constexpr std::string_view kTimelineMapComment =
    "# eventsim timeline CSV, one row set per simulated timeline; the ranks of each:";

inline constexpr std::string_view kTimelineCsvHeader =
    "rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance,cp,ep";
inline constexpr std::string_view kTimelineCsvHeaderWithoutCpEp =
    "rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance";

// Reads `path`. Throws InputError when the file cannot be opened, is malformed, holds no event, or
// gives one rank two different (tp, cp, pp, dp) coordinates.
Timeline loadTimelineCsv(const std::string& path, NameTable& names);
// The same from a stream; `path` only names the source in messages.
Timeline readTimelineCsv(std::istream& in, const std::string& path, NameTable& names);

// "embedding", "head" or the block number.
std::string layerName(int32_t layer);

}  // namespace evsim
