// A binary profile's rows, decoded on first use: see profile_rows.h for what is checked when.
#include "io/profile_rows.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "events/collective.h"
#include "events/measured_layout.h"

namespace evsim {

namespace {

bool validTime(double v, bool zero_ok) {
  return std::isfinite(v) && v >= 0 && (zero_ok || v > 0) && v <= 1e12;
}

bool validBandwidth(double v) { return std::isfinite(v) && v > 0 && v <= 1e12; }

}  // namespace

double columnF64(std::span<const uint8_t> column, size_t i) {
  uint64_t bits = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&bits, column.data() + i * 8, 8);
  } else {
    for (int b = 7; b >= 0; --b) bits = (bits << 8) | column[i * 8 + b];
  }
  return std::bit_cast<double>(bits);
}

int32_t columnI32(std::span<const uint8_t> column, size_t i) {
  uint32_t bits = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&bits, column.data() + i * 4, 4);
  } else {
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | column[i * 4 + b];
  }
  return static_cast<int32_t>(bits);
}

bool timingStatsValid(const TimingStats& s) {
  return validTime(s.median_us, false) && validTime(s.min_us, false) &&
         validTime(s.max_us, false) && validTime(s.stddev_us, true) && s.count > 0 &&
         s.count <= 1'000'000'000 && s.min_us <= s.median_us && s.median_us <= s.max_us;
}

void checkTimingStats(const TimingStats& s, std::string_view where) {
  auto check = [&](const char* name, double v, bool zero_ok) {
    if (!validTime(v, zero_ok)) {
      EVSIM_THROW(InputError, "{}.{}: {}: must be {} and <= 1e12", where, name, v,
                  zero_ok ? ">= 0" : "> 0");
    }
  };
  check("median", s.median_us, false);
  check("min", s.min_us, false);
  check("max", s.max_us, false);
  check("stddev", s.stddev_us, true);
  if (s.count <= 0 || s.count > 1'000'000'000) {
    EVSIM_THROW(InputError, "{}.count: {}: must be between 1 and 1000000000", where, s.count);
  }
  if (!(s.min_us <= s.median_us && s.median_us <= s.max_us)) {
    EVSIM_THROW(InputError,
                "{}: inconsistent statistics: need min <= median <= max, got min={} median={} "
                "max={}",
                where, s.min_us, s.median_us, s.max_us);
  }
}

ProfileRows::ProfileRows(std::shared_ptr<const void> storage, const Columns& columns,
                         size_t entries, std::string origin, Cluster cluster)
    : storage_(std::move(storage)),
      columns_(columns),
      origin_(std::move(origin)),
      cluster_(cluster) {
  const bool layouts = !columns_.measured_nodes.empty();
  const std::string_view all = columns_.signatures;
  if (all.size() > std::numeric_limits<uint32_t>::max()) {
    EVSIM_THROW(InputError, "{}: events.signature: {} bytes: larger than 4 GiB", origin_,
                all.size());
  }
  row_start_.reserve(entries + 1);
  communication_.reserve(entries);
  size_t start = 0;
  for (size_t i = 0; i < entries; ++i) {
    // The caller checked that there are `entries` signatures, each ending in '\n'.
    const size_t end = all.find('\n', start);
    EVSIM_CHECK(end != std::string_view::npos, "{}: events.signature: row {} has no end", origin_,
                i);
    const std::string_view signature = all.substr(start, end - start);
    row_start_.push_back(static_cast<uint32_t>(start));
    start = end + 1;
    // The kind word: a collective's name, else a compute op (parseEventSignature's rule).
    const bool comm = findCollective(signature.substr(0, signature.find(' '))) != nullptr;
    communication_.push_back(comm ? 1 : 0);

    const TimingStats stats{columnF64(columns_.median_us, i), columnF64(columns_.min_us, i),
                            columnF64(columns_.max_us, i), columnF64(columns_.stddev_us, i),
                            columnI32(columns_.count, i)};
    if (!timingStatsValid(stats)) checkTimingStats(stats, where(i));
    const int32_t measured = columnI32(columns_.measured_group_size, i);
    const double algbw = columnF64(columns_.algbw_gb_s, i);
    const double busbw = columnF64(columns_.busbw_gb_s, i);
    const int32_t nodes = layouts ? columnI32(columns_.measured_nodes, i) : 0;
    const int32_t per_node = layouts ? columnI32(columns_.measured_ranks_per_node, i) : 0;
    if (!comm) {
      if (measured != 0 || algbw != 0 || busbw != 0 || nodes != 0 || per_node != 0) {
        EVSIM_THROW(InputError,
                    "{}: a compute event has measured_group_size, measured_nodes, "
                    "measured_ranks_per_node, algbw_gb_s or busbw_gb_s (must be 0)",
                    where(i));
      }
      continue;
    }
    // Both 0 (not known: derived on decode) or both > 0 (checked against the signature then).
    if (nodes < 0 || per_node < 0 || (nodes == 0) != (per_node == 0)) {
      EVSIM_THROW(InputError,
                  "{}.measured_nodes: {} with measured_ranks_per_node {}: both > 0, or both 0 "
                  "where the layout is not known",
                  where(i), nodes, per_node);
    }
    for (auto [name, v] : {std::pair{"algbw_gb_s", algbw}, {"busbw_gb_s", busbw}}) {
      if (!validBandwidth(v)) {
        EVSIM_THROW(InputError, "{}.{}: {}: must be > 0 and <= 1e12", where(i), name, v);
      }
    }
  }
  row_start_.push_back(static_cast<uint32_t>(start));
}

std::string ProfileRows::where(size_t row) const {
  return fmt::format("{}: events[{}]", origin_, row);
}

namespace {

// Row `at`'s event from its stored signature; InputError unless the text is canonical.
Event canonicalEvent(std::string_view stored, const std::string& at) {
  Event event = parseEventSignature(stored, at + ".signature");
  if (const std::string canonical = event.signature(); canonical != stored) {
    EVSIM_THROW(InputError,
                "{}.signature: '{}' is not in canonical form (eventsim writes '{}'; a lookup could "
                "never find it)",
                at, stored, canonical);
  }
  return event;
}

}  // namespace

ProfileRecord ProfileRows::decode(size_t row) const {
  const std::string at = where(row);
  ProfileRecord r;
  r.event = canonicalEvent(signature(row), at);
  r.signature = std::string(signature(row));
  r.time = {columnF64(columns_.median_us, row), columnF64(columns_.min_us, row),
            columnF64(columns_.max_us, row), columnF64(columns_.stddev_us, row),
            columnI32(columns_.count, row)};
  if (!isCommunication(row)) return r;  // its bandwidth columns were checked to be 0
  r.measured_group_size = columnI32(columns_.measured_group_size, row);
  r.algbw_gb_s = columnF64(columns_.algbw_gb_s, row);
  r.busbw_gb_s = columnF64(columns_.busbw_gb_s, row);
  const int group = r.event.placement.group_size;
  if (r.measured_group_size < 2 || r.measured_group_size > group) {
    EVSIM_THROW(InputError, "{}.measured_group_size: {}: must be between 2 and group_size {}", at,
                r.measured_group_size, group);
  }
  r.scaled = r.measured_group_size != group;
  if (!columns_.measured_nodes.empty()) {
    r.measured_nodes = columnI32(columns_.measured_nodes, row);
    r.measured_ranks_per_node = columnI32(columns_.measured_ranks_per_node, row);
  }
  if (r.hasMeasuredLayout()) {
    const std::string problem = measuredLayoutProblem(r.event.placement, r.measuredPlacement());
    if (!problem.empty()) EVSIM_THROW(InputError, "{}.measured_nodes: {}", at, problem);
  } else if (const std::optional<Placement> derived =
                 derivedMeasuredPlacement(r.event.placement, r.measured_group_size,
                                          cluster_.world_size, cluster_.ranks_per_node)) {
    r.setMeasured(*derived);
  }
  return r;
}

const ProfileRecord& ProfileRows::record(size_t row) const {
  std::lock_guard lock(mutex_);
  if (all_decoded_) return all_[row];
  auto found = decoded_.find(row);
  if (found == decoded_.end()) found = decoded_.emplace(row, decode(row)).first;
  return found->second;
}

void ProfileRows::checkSignatures() const {
  std::lock_guard lock(mutex_);
  if (signatures_checked_ || all_decoded_) return;
  for (size_t i = 0; i < size(); ++i) {
    if (!decoded_.count(i)) canonicalEvent(signature(i), where(i));
  }
  signatures_checked_ = true;
}

const std::vector<ProfileRecord>& ProfileRows::all() const {
  std::lock_guard lock(mutex_);
  if (all_decoded_) return all_;
  std::vector<ProfileRecord> out;
  out.reserve(size());
  for (size_t i = 0; i < size(); ++i) {
    const auto found = decoded_.find(i);
    out.push_back(found != decoded_.end() ? found->second : decode(i));
  }
  all_ = std::move(out);
  all_decoded_ = true;
  return all_;
}

}  // namespace evsim
