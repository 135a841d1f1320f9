// The binary (CBOR, columnar) profile database: see profile_cbor.h for the layout and why.
// This file reads it (every field checked); profile_cbor_write.cpp writes it.
#include "io/profile_cbor.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "common/error.h"
#include "common/input_file.h"
#include "io/profile_cbor_layout.h"
#include "io/profile_db.h"
#include "io/profile_rows.h"

namespace evsim {

namespace {

using nlohmann::json;
// The layout nests three levels (top, metadata, versions); a corrupt file may claim any depth,
// and nlohmann's CBOR reader recurses per level: refused past this.
constexpr int kMaxDepth = 8;
constexpr int64_t kMaxOverlapEntries = 1000;

// nlohmann's own DOM builder behind the SAX interface, with two checks it lacks: a depth bound
// (a byte run of 0x81 "array of one" would otherwise recurse until the stack ends) and no key
// twice in one map (the DOM keeps the last silently).
class CheckedDomSax {
 public:
  explicit CheckedDomSax(json& root) : dom_(root, /*allow_exceptions=*/true) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    keys_.emplace_back();
    return enter() && dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (!keys_.back().insert(k).second) {
      problem = "key '" + k.substr(0, 64) + "' appears twice in one map";
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t at, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(at, token, e);
  }

  std::string problem;  // why the parse stopped, when this class stopped it

 private:
  bool enter() {
    if (++depth_ <= kMaxDepth) return true;
    problem = fmt::format("nested deeper than {} levels", kMaxDepth);
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::set<std::string>> keys_;
  int depth_ = 0;
};

// A map of the document, with the path for messages ("origin: events.median_us: ...").
class Node {
 public:
  // `columns`: the file's trailing column bytes (layout 2), or empty (layout 1: columns inline).
  Node(const json& value, std::string origin, std::string path,
       std::span<const uint8_t> columns = {}, bool columns_by_reference = false)
      : value_(value),
        origin_(std::move(origin)),
        path_(std::move(path)),
        columns_(columns),
        by_reference_(columns_by_reference) {}

  std::string where(std::string_view key = {}) const {
    std::string full = path_;
    if (!key.empty() && !full.empty()) full += '.';
    full += key;
    return full.empty() ? origin_ : origin_ + ": " + full;
  }
  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    EVSIM_THROW(InputError, "{}: {}", where(key), message);
  }
  void allowOnly(const std::vector<std::string>& keys) const {
    if (!value_.is_object()) fail("", "must be a map");
    for (const auto& [key, _] : value_.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(utf8("", key.substr(0, 64)), "unknown key");
      }
    }
  }
  bool has(std::string_view key) const { return value_.contains(key); }
  const json& at(std::string_view key) const {
    if (!value_.is_object() || !value_.contains(key)) fail(key, "missing required key");
    return value_.at(std::string(key));
  }
  Node child(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_object()) fail(key, "must be a map");
    std::string path = path_;
    if (!path.empty()) path += '.';
    path += key;
    return Node(v, origin_, std::move(path), columns_, by_reference_);
  }
  std::string str(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
      fail(key, "must be a non-empty string");
    }
    return utf8(key, v.get<std::string>());
  }
  int64_t positiveInt(std::string_view key, int64_t max = 2147483647) const {
    const int64_t out = nonNegativeInt(key, max);
    if (out == 0) fail(key, "0: must be > 0");
    return out;
  }
  int64_t nonNegativeInt(std::string_view key, int64_t max) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    // A value past int64 arrives unsigned: compare before converting.
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(max)
                               : v.get<int64_t>() > max) {
      fail(key, fmt::format("{}: must be <= {}", v.dump(), max));
    }
    const int64_t out = v.get<int64_t>();
    if (out < 0) fail(key, fmt::format("{}: must be >= 0", out));
    return out;
  }
  std::vector<std::string> strings(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "must be a list of strings");
    std::vector<std::string> out;
    for (const json& item : v) {
      if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
        fail(key, "must be a list of non-empty strings");
      }
      out.push_back(utf8(key, item.get<std::string>()));
    }
    return out;
  }
  // A column of `count` items of `item_bytes` each: a CBOR byte string in the map (layout 1) or
  // [offset, bytes] into the file's trailing column bytes (layout 2).
  std::span<const uint8_t> column(std::string_view key, size_t count, size_t item_bytes) const {
    const std::span<const uint8_t> bytes = columnBytes(key);
    if (bytes.size() != count * item_bytes) {
      fail(key, fmt::format("{} bytes, expected {} ({} entries of {} bytes)", bytes.size(),
                            count * item_bytes, count, item_bytes));
    }
    return bytes;
  }
  // The signatures column: `count` signatures, each ending in '\n', checked to be UTF-8 text.
  std::string_view signatures(std::string_view key, size_t count) const {
    const std::span<const uint8_t> bytes = columnBytes(key);
    const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (const int64_t bad = firstInvalidUtf8(all); bad >= 0) {
      fail(key, fmt::format("not UTF-8 text (invalid byte at offset {})", bad));
    }
    size_t found = 0, start = 0;
    while (start < all.size() && found <= count) {
      const size_t end = all.find('\n', start);
      if (end == std::string_view::npos) fail(key, "the last signature has no '\\n' after it");
      ++found;
      start = end + 1;
    }
    if (found != count) {
      fail(key, fmt::format("{}{} signatures, expected {}", found > count ? "more than " : "",
                            found, count));
    }
    return all;
  }

  // `s` when it is UTF-8 text (names read here end up in JSON output), else a failure.
  std::string utf8(std::string_view key, std::string s) const {
    if (const int64_t bad = firstInvalidUtf8(s); bad >= 0) {
      fail(key, fmt::format("not UTF-8 text (invalid byte at offset {})", bad));
    }
    return s;
  }

 private:
  std::span<const uint8_t> columnBytes(std::string_view key) const {
    const json& v = at(key);
    if (!by_reference_) {
      if (!v.is_binary()) fail(key, "must be a byte string");
      return v.get_binary();
    }
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() ||
        !v[1].is_number_unsigned()) {
      fail(key, "must be [offset, bytes] into the column bytes");
    }
    const uint64_t offset = v[0].get<uint64_t>(), length = v[1].get<uint64_t>();
    if (offset > columns_.size() || length > columns_.size() - offset) {
      fail(key, fmt::format("bytes {}..{} lie past the {} column bytes", offset,
                            offset + std::min<uint64_t>(length, UINT64_MAX - offset),
                            columns_.size()));
    }
    return columns_.subspan(offset, length);
  }

  const json& value_;
  std::string origin_;
  std::string path_;
  std::span<const uint8_t> columns_;
  bool by_reference_ = false;
};


// The statistics columns under `prefix` ("" or "alone_" / "beside_").
struct StatsColumns {
  std::span<const uint8_t> median, min, max, stddev, count;
  StatsColumns(const Node& table, const std::string& prefix, size_t n)
      : median(table.column(prefix + "median_us", n, 8)),
        min(table.column(prefix + "min_us", n, 8)),
        max(table.column(prefix + "max_us", n, 8)),
        stddev(table.column(prefix + "stddev_us", n, 8)),
        count(table.column(prefix + "count", n, 4)) {}

  // Row i, checked as the YAML loader checks time_us (profile_db.cpp: readStats).
  TimingStats row(size_t i, const std::string& where) const {
    const TimingStats s{columnF64(median, i), columnF64(min, i), columnF64(max, i),
                        columnF64(stddev, i), columnI32(count, i)};
    checkTimingStats(s, where);
    return s;
  }
};

// The events table: its columns checked for size, its rows kept as they are and decoded when
// first needed (io/profile_rows.h). `storage` owns the bytes the columns point into.
void readEvents(const Node& events, const std::string& origin,
                std::shared_ptr<const void> storage, ProfileDb& db) {
  events.allowOnly({"entries", "signature", "median_us", "min_us", "max_us", "stddev_us", "count",
                    "measured_group_size", "measured_nodes", "measured_ranks_per_node",
                    "algbw_gb_s", "busbw_gb_s"});
  const auto n = static_cast<size_t>(events.nonNegativeInt("entries", 1'000'000'000));
  ProfileRows::Columns columns;
  columns.signatures = events.signatures("signature", n);
  const StatsColumns stats(events, "", n);
  columns.median_us = stats.median;
  columns.min_us = stats.min;
  columns.max_us = stats.max;
  columns.stddev_us = stats.stddev;
  columns.count = stats.count;
  columns.measured_group_size = events.column("measured_group_size", n, 4);
  columns.algbw_gb_s = events.column("algbw_gb_s", n, 8);
  columns.busbw_gb_s = events.column("busbw_gb_s", n, 8);
  // Where each row was measured: both columns (session 15) or neither (older files).
  if (events.has("measured_nodes") != events.has("measured_ranks_per_node")) {
    events.fail(events.has("measured_nodes") ? "measured_ranks_per_node" : "measured_nodes",
                "missing: measured_nodes and measured_ranks_per_node come together");
  }
  if (events.has("measured_nodes")) {
    columns.measured_nodes = events.column("measured_nodes", n, 4);
    columns.measured_ranks_per_node = events.column("measured_ranks_per_node", n, 4);
  }
  const ProfileRows::Cluster cluster{db.metadata.world_size, db.metadata.ranks_per_node};
  db.adoptRows(
      std::make_shared<const ProfileRows>(std::move(storage), columns, n, origin, cluster));
}

// The lines of a signatures column (each ends in '\n': checked by Node::signatures).
std::vector<std::string_view> lines(std::string_view column) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start < column.size();) {
    const size_t end = column.find('\n', start);
    out.push_back(column.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

void readOverlap(const Node& table, const std::string& origin, ProfileDb& db) {
  std::vector<std::string> keys = {"entries", "compute", "transfer"};
  for (const char* side : {"alone_", "beside_"}) {
    for (const char* stat : {"median_us", "min_us", "max_us", "stddev_us", "count"}) {
      keys.push_back(std::string(side) + stat);
    }
  }
  table.allowOnly(keys);
  // eventprof --overlap measures a few dozen pairs; putOverlap's lookup is linear, so a corrupt
  // count of millions would take hours: bounded here.
  const auto n = static_cast<size_t>(table.nonNegativeInt("entries", kMaxOverlapEntries));
  const std::vector<std::string_view> compute = lines(table.signatures("compute", n));
  const std::vector<std::string_view> transfer = lines(table.signatures("transfer", n));
  const StatsColumns alone(table, "alone_", n), beside(table, "beside_", n);
  for (size_t i = 0; i < n; ++i) {
    const std::string where = fmt::format("{}: overlap[{}]", origin, i);
    OverlapRecord r;
    r.compute = parseEventSignature(compute[i], where + ".compute");
    if (r.compute.kind != EventKind::kCompute) {
      EVSIM_THROW(InputError, "{}.compute: not a compute event", where);
    }
    r.transfer = parseEventSignature(transfer[i], where + ".transfer");
    if (!isCommunication(r.transfer.kind)) {
      EVSIM_THROW(InputError, "{}.transfer: not a communication event", where);
    }
    r.alone = alone.row(i, where + ".alone_us");
    r.beside = beside.row(i, where + ".beside_us");
    db.putOverlap(std::move(r));
  }
}


// The argument of a fixed head at `at`, when the byte there says `major` with an 8-byte argument.
std::optional<uint64_t> fixedHeadAt(std::string_view bytes, size_t at, uint8_t major) {
  if (at > bytes.size() || bytes.size() - at < kFixedHeadBytes) return std::nullopt;
  if (static_cast<uint8_t>(bytes[at]) != ((major << 5) | 27)) return std::nullopt;
  uint64_t value = 0;
  for (size_t b = 1; b < kFixedHeadBytes; ++b) value = (value << 8) | uint8_t(bytes[at + b]);
  return value;
}

// Parses one CBOR item that spans all of `bytes` (nlohmann, with the depth and duplicate-key
// checks); a corrupt or truncated item is one InputError naming origin.
json parseItem(std::string_view bytes, const std::string& origin) {
  json doc;
  CheckedDomSax sax(doc);
  bool ok = false;
  try {
    ok = json::sax_parse(bytes.begin(), bytes.end(), &sax, json::input_format_t::cbor,
                         /*strict=*/true);
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.110] parse error at byte 9: ... unexpected end of input"
    std::string what = e.what();
    if (const size_t cut = what.find("] "); what.starts_with("[json.") && cut != std::string::npos)
      what = what.substr(cut + 2);
    EVSIM_THROW(InputError, "{}: corrupt or truncated binary profile: {}", origin, what);
  }
  if (!ok) {
    EVSIM_THROW(InputError, "{}: corrupt binary profile: {}", origin,
                sax.problem.empty() ? "the CBOR parser stopped" : sax.problem);
  }
  return doc;
}

}  // namespace

bool isCborProfile(std::string_view bytes) { return bytes.starts_with(kProfileCborMagic); }


ProfileDb decodeProfileCbor(std::string bytes, const std::string& origin) {
  if (!isCborProfile(bytes)) {
    EVSIM_THROW(InputError, "{}: not a binary profile (it does not start with the CBOR magic)",
                origin);
  }
  // What the event rows point into, kept alive by them: the file (layout 2: the columns are read
  // in place) or the parsed header (layout 1: the columns are its byte strings).
  struct Storage {
    std::string file;
    json doc;
  };
  const auto storage = std::make_shared<Storage>();
  storage->file = std::move(bytes);
  json& doc = storage->doc;
  const std::string_view body = std::string_view(storage->file).substr(kProfileCborMagic.size());
  // Layout 2 starts with the header's length (a fixed-width unsigned); layout 1 with the map.
  std::span<const uint8_t> column_bytes;
  const bool by_reference = fixedHeadAt(body, 0, kMajorUnsigned).has_value();
  if (by_reference) {
    const uint64_t header_bytes = *fixedHeadAt(body, 0, kMajorUnsigned);
    const size_t columns_at = kFixedHeadBytes + std::min<uint64_t>(header_bytes, body.size());
    const std::optional<uint64_t> declared = fixedHeadAt(body, columns_at, kMajorBytes);
    if (header_bytes > body.size() || !declared) {
      EVSIM_THROW(InputError,
                  "{}: corrupt or truncated binary profile: the header ({} bytes) is not followed "
                  "by the column bytes",
                  origin, header_bytes);
    }
    const size_t available = body.size() - columns_at - kFixedHeadBytes;
    if (*declared != available) {
      EVSIM_THROW(InputError,
                  "{}: corrupt or truncated binary profile: {} column bytes declared, {} in the "
                  "file",
                  origin, *declared, available);
    }
    doc = parseItem(body.substr(kFixedHeadBytes, header_bytes), origin);
    column_bytes = std::span(reinterpret_cast<const uint8_t*>(body.data()) + columns_at +
                                 kFixedHeadBytes,
                             available);
  } else {
    doc = parseItem(body, origin);
    storage->file = std::string();  // the columns were copied into the header's byte strings
  }
  const Node root(doc, origin, "", column_bytes, by_reference);
  if (!doc.is_object()) root.fail("", "corrupt binary profile: the top level is not a map");
  root.allowOnly({"format", "schema_version", "metadata", "events", "overlap"});
  if (!doc.contains("format") || doc["format"] != kFormatName) {
    root.fail("format",
              fmt::format("missing or not \"{}\": not an eventsim profile database", kFormatName));
  }
  const int64_t version = root.positiveInt("schema_version");
  const int64_t layout_version = by_reference ? kColumnsByReferenceVersion : kColumnsInlineVersion;
  if (version != layout_version) {
    root.fail("schema_version",
              version == kColumnsInlineVersion || version == kColumnsByReferenceVersion
                  ? fmt::format("{} does not match the file's layout (version {})", version,
                                layout_version)
                  : fmt::format("{} is not supported (this eventsim reads versions {} and {})",
                                version, kColumnsInlineVersion, kColumnsByReferenceVersion));
  }
  ProfileDb db;
  const Node meta = root.child("metadata");
  meta.allowOnly(
      {"backend", "date", "world_size", "ranks_per_node", "hosts", "devices", "versions"});
  db.metadata.backend = meta.str("backend");
  if (!isKnownProfileBackend(db.metadata.backend)) {
    meta.fail("backend", fmt::format("'{}': must be {}", db.metadata.backend.substr(0, 64),
                                     kProfileBackendsText));
  }
  db.metadata.date = meta.str("date");
  db.metadata.world_size = static_cast<int>(meta.positiveInt("world_size"));
  db.metadata.ranks_per_node = static_cast<int>(meta.positiveInt("ranks_per_node"));
  db.metadata.hosts = meta.strings("hosts");
  db.metadata.devices = meta.strings("devices");
  const Node versions = meta.child("versions");
  for (const auto& [name, _] : doc["metadata"]["versions"].items()) {
    db.metadata.versions[versions.utf8("", name)] = versions.str(name);
  }
  readEvents(root.child("events"), origin, storage, db);
  if (root.has("overlap")) readOverlap(root.child("overlap"), origin, db);
  return db;
}

}  // namespace evsim
