#include "modeler/timeline_csv.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"

namespace evsim {

namespace {

// The current header's 15 columns; files of the 13-column header (before cp and ep) still read.
constexpr size_t kColumnCount = 15;
constexpr size_t kOldColumnCount = 13;
constexpr double kMaxTimeUs = 1e15;
constexpr std::array<std::string_view, kColumnCount> kColumns = {
    "rank",        "tp",    "pp", "dp",    "stream",     "event", "start_us", "dur_us",
    "micro_batch", "phase", "op", "layer", "provenance", "cp",    "ep"};
enum Column {
  kRank,
  kTp,
  kPp,
  kDp,
  kStream,
  kEvent,
  kStart,
  kDur,
  kMicroBatch,
  kPhase,
  kOp,
  kLayer,
  kProvenance,
  kCp,
  kEp
};

struct Coord {
  int32_t tp, pp, dp, cp;
  bool operator==(const Coord&) const = default;
};

// Splits one line into exactly kColumnCount fields; returns the number of fields found (more than
// kColumnCount stops counting at kColumnCount + 1).
size_t splitFields(std::string_view line, std::array<std::string_view, kColumnCount>& fields) {
  size_t count = 0;
  size_t begin = 0;
  while (true) {
    size_t comma = line.find(',', begin);
    std::string_view field =
        line.substr(begin, comma == std::string_view::npos ? line.size() - begin : comma - begin);
    if (count == kColumnCount) return count + 1;
    fields[count++] = field;
    if (comma == std::string_view::npos) return count;
    begin = comma + 1;
  }
}

class LineParser {
 public:
  LineParser(const std::string& path, int64_t line,
             const std::array<std::string_view, kColumnCount>& fields)
      : path_(path), line_(line), fields_(fields) {}

  [[noreturn]] void fail(Column c, std::string_view rule) const {
    EVSIM_THROW(InputError, "{}:{}: column '{}' = '{}': {}", path_, line_, kColumns[c],
                clipped(fields_[c]), rule);
  }

  int32_t integer(Column c, int32_t min_value) const {
    std::string_view text = fields_[c];
    int32_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      fail(c, "not an integer");
    }
    if (value < min_value) fail(c, fmt::format("must be >= {}", min_value));
    return value;
  }

  double number(Column c) const {
    std::string_view text = fields_[c];
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      fail(c, "not a number");
    }
    if (!std::isfinite(value)) fail(c, "not a finite number");
    // Beyond 31 years in microseconds a timeline is corrupt, and sums of such times overflowed
    // to inf (start_us 1e308 was accepted, issue 33).
    if (std::abs(value) > kMaxTimeUs) fail(c, fmt::format("must be within +-{:g} us", kMaxTimeUs));
    return value;
  }

  Stream stream() const {
    for (int s = 0; s < kStreamCount; ++s) {
      if (fields_[kStream] == streamName(static_cast<Stream>(s))) return static_cast<Stream>(s);
    }
    fail(kStream, "not one of compute, tp-comm, pp-comm, dp-comm");
  }

  Phase phase() const {
    for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kRecompute, Phase::kGradSync,
                    Phase::kOptimizer, Phase::kWeightGrad}) {
      if (fields_[kPhase] == phaseName(p)) return p;
    }
    fail(kPhase, "not one of forward, backward, recompute, grad-sync, optimizer, weight-grad");
  }

  int32_t layer() const {
    if (fields_[kLayer] == "embedding") return kEmbeddingLayer;
    if (fields_[kLayer] == "head") return kHeadLayer;
    std::string_view text = fields_[kLayer];
    int32_t value = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
      fail(kLayer, "not a block number, 'embedding' or 'head'");
    }
    return value;
  }

  std::string_view nonEmpty(Column c) const {
    if (fields_[c].empty()) fail(c, "empty");
    return fields_[c];
  }

 private:
  const std::string& path_;
  int64_t line_;
  const std::array<std::string_view, kColumnCount>& fields_;
};

}  // namespace

uint32_t NameTable::intern(std::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

std::string layerName(int32_t layer) {
  if (layer == kEmbeddingLayer) return "embedding";
  if (layer == kHeadLayer) return "head";
  return std::to_string(layer);
}

Timeline readTimelineCsv(std::istream& in, const std::string& path, NameTable& names) {
  Timeline timeline;
  timeline.path = path;
  std::string line;
  int64_t line_number = 0;
  auto stripCr = [&line] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
  };
  if (!std::getline(in, line))
    EVSIM_THROW(InputError, "{}: empty file (expected the header '{}')", path, kTimelineCsvHeader);
  ++line_number;
  stripCr();
  if (line == kTimelineMapComment) {
    EVSIM_THROW(InputError,
                "{}: a per-timeline CSV (simulate --ranks all: one row set per simulated timeline, "
                "standing for many ranks); compare needs one per rank: write it with --ranks LIST",
                path);
  }
  if (line != kTimelineCsvHeader && line != kTimelineCsvHeaderWithoutCpEp) {
    EVSIM_THROW(InputError, "{}:1: header '{}' is not the timeline CSV header '{}'", path,
                clipped(line), kTimelineCsvHeader);
  }
  const size_t columns = line == kTimelineCsvHeader ? kColumnCount : kOldColumnCount;
  // The rank's coordinates, to catch a file that mixes strategies; rows come grouped by rank, so
  // one cached entry avoids the map lookup almost always.
  std::unordered_map<int32_t, Coord> coords;
  int32_t last_rank = -1;
  Coord last_coord{};
  std::array<std::string_view, kColumnCount> fields;
  double begin = std::numeric_limits<double>::infinity();
  double end = -std::numeric_limits<double>::infinity();
  while (std::getline(in, line)) {
    ++line_number;
    stripCr();
    if (line.empty()) continue;
    size_t count = splitFields(line, fields);
    if (count != columns) {
      EVSIM_THROW(
          InputError, "{}:{}: {} columns, expected {} (the header's)", path, line_number,
          count > kColumnCount ? fmt::format("more than {}", kColumnCount) : std::to_string(count),
          columns);
    }
    LineParser p(path, line_number, fields);
    TimelineRow row;
    row.rank = p.integer(kRank, 0);
    Coord coord{p.integer(kTp, 0), p.integer(kPp, 0), p.integer(kDp, 0),
                columns == kColumnCount ? p.integer(kCp, 0) : 0};
    if (columns == kColumnCount) p.integer(kEp, 0);
    row.pp = coord.pp;
    row.stream = p.stream();
    p.nonEmpty(kEvent);
    row.start_us = p.number(kStart);
    double dur_us = p.number(kDur);
    if (dur_us < 0) p.fail(kDur, "must be >= 0");
    row.end_us = row.start_us + dur_us;
    row.micro_batch = p.integer(kMicroBatch, -1);
    row.phase = p.phase();
    row.op = names.intern(p.nonEmpty(kOp));
    row.layer = p.layer();
    p.nonEmpty(kProvenance);
    if (row.rank != last_rank || !(coord == last_coord)) {
      auto [it, inserted] = coords.try_emplace(row.rank, coord);
      if (!inserted && !(it->second == coord)) {
        EVSIM_THROW(InputError,
                    "{}:{}: rank {} is at tp {} cp {} pp {} dp {} here but at tp {} cp {} pp {} dp "
                    "{} earlier",
                    path, line_number, row.rank, coord.tp, coord.cp, coord.pp, coord.dp,
                    it->second.tp, it->second.cp, it->second.pp, it->second.dp);
      }
      last_rank = row.rank;
      last_coord = coord;
    }
    begin = std::min(begin, row.start_us);
    end = std::max(end, row.end_us);
    timeline.rows.push_back(row);
  }
  if (in.bad()) EVSIM_THROW(InputError, "{}: read error after line {}", path, line_number);
  if (timeline.rows.empty()) EVSIM_THROW(InputError, "{}: no events after the header", path);
  timeline.begin_us = begin;
  timeline.end_us = end;
  return timeline;
}

Timeline loadTimelineCsv(const std::string& path, NameTable& names) {
  std::istringstream in(readInputFile(path, "timeline CSV"));
  return readTimelineCsv(in, path, names);
}

}  // namespace evsim
