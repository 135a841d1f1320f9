#pragma once
// A binary profile's event rows, kept as the file's column bytes and decoded into a ProfileRecord
// only when a lookup or a scan first needs that row (issue 33, item 2: "a profile format that
// loads at disk speed").
//
// Why: a 400,000-entry profile used to be parsed row by row on load (each signature into an Event,
// formatted back, two heap blocks per record): ~1 s of CPU and ~6x the file's size in memory,
// although a simulation looks up a few hundred signatures. Here loading keeps the bytes (the file
// itself, or for layout 1 the parsed header's byte strings), finds each signature's start, and
// checks per row only what needs no allocation: the statistics and bandwidth columns (the same
// rules and messages as the YAML loader), and the signature's kind word (a collective's name or
// not), which decides which bandwidth columns must be 0. The index from signature to row
// (io/signature_index.h) hashes the signature bytes in place; a duplicate is refused on load.
//
// What waits until a row is decoded: the signature's own parse (its fields, dtype, placement), the
// rule that it be in canonical form (what Event::signature() writes, as every eventsim writer
// stores it: lookups hash the canonical text, so another spelling could never be found), and
// measured_group_size <= the signature's group, and the measured layout against the signature
// (events/measured_layout.h; derived there when the file has none). A bad row is then one InputError naming the file
// and "events[i]", thrown by the lookup that reached it, the same for that input under any load.
// records() (calibrate, convert, a profile being extended) decodes every row. The first lookup
// that finds nothing checks every row's signature (checkSignatures): a miss caused by a stored
// spelling that is not canonical is then that row's error, not a "missing event" or a silent
// fallback to the analytic model; a profile without misses never pays for it.
//
// Thread-safe: decoded rows are cached under a mutex; a returned record never moves.

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/profile_db.h"

namespace evsim {

// The checks every timing row gets (profile_db.cpp's readStats, for the binary columns): finite,
// > 0 (stddev >= 0), <= 1e12; count in 1..1e9; min <= median <= max. Throws InputError naming
// `where` and the field.
void checkTimingStats(const TimingStats& stats, std::string_view where);
bool timingStatsValid(const TimingStats& stats);

// A little-endian float64 / int32 column's item i.
double columnF64(std::span<const uint8_t> column, size_t i);
int32_t columnI32(std::span<const uint8_t> column, size_t i);

class ProfileRows {
 public:
  // The events table's columns, each already checked to hold `entries` items.
  struct Columns {
    std::string_view signatures;  // `entries` signatures, each followed by '\n'
    std::span<const uint8_t> median_us, min_us, max_us, stddev_us;  // float64 LE
    std::span<const uint8_t> count, measured_group_size;             // int32 LE
    std::span<const uint8_t> algbw_gb_s, busbw_gb_s;                 // float64 LE
    // Where each row was measured (int32 LE; 0 for compute rows and unknown layouts). Empty in
    // files written before session 15: every row's layout is then derived on decode.
    std::span<const uint8_t> measured_nodes, measured_ranks_per_node;
  };
  // The profile's cluster (metadata world_size, ranks_per_node): what the fallback for a row
  // without a measured layout derives it on (events/measured_layout.h).
  struct Cluster {
    int world_size = 0;
    int ranks_per_node = 0;
  };

  // `storage` owns the bytes the columns point into (kept alive here). Checks every row as the
  // header comment says; InputError "origin: events[i]...: ..." for the first bad one.
  ProfileRows(std::shared_ptr<const void> storage, const Columns& columns, size_t entries,
              std::string origin, Cluster cluster);

  size_t size() const { return row_start_.size() - 1; }
  // Row i's signature as stored (a view into the column bytes).
  std::string_view signature(size_t row) const {
    return columns_.signatures.substr(row_start_[row], row_start_[row + 1] - row_start_[row] - 1);
  }
  bool isCommunication(size_t row) const { return communication_[row] != 0; }
  // "origin: events[i]", for messages.
  std::string where(size_t row) const;

  // Row i, decoded on first use. InputError for a row the header comment's later checks refuse.
  const ProfileRecord& record(size_t row) const;
  // Every row, in file order (decodes those not yet decoded).
  const std::vector<ProfileRecord>& all() const;
  // Parses every row's signature once (keeping nothing) and throws the first row's InputError
  // whose signature is malformed or not in canonical form; later calls return at once.
  void checkSignatures() const;

 private:
  ProfileRecord decode(size_t row) const;

  std::shared_ptr<const void> storage_;
  Columns columns_;
  std::string origin_;
  Cluster cluster_;
  std::vector<uint32_t> row_start_;     // offset of row i's signature; [size()]: the column's end
  std::vector<uint8_t> communication_;  // 1 where the row's kind word names a collective

  mutable std::mutex mutex_;
  mutable std::unordered_map<size_t, ProfileRecord> decoded_;  // nodes: records never move
  mutable std::vector<ProfileRecord> all_;                     // filled by all()
  mutable bool all_decoded_ = false;
  mutable bool signatures_checked_ = false;
};

}  // namespace evsim
