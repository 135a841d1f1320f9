// Profile database: YAML writing with YAML::Emitter and strict loading through YamlReader.
// See profile_db.h for the format. Writers are the profiler (rank 0, after every completed event)
// and tests; readers are the modeler and `eventprof --resume`.
#include "io/profile_db.h"

#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <filesystem>
#include <limits>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"
#include "common/yaml_reader.h"
#include "events/measured_layout.h"
#include "io/profile_cbor.h"
#include "io/profile_rows.h"

namespace evsim {

namespace {

bool hasCommunicationFields(EventKind kind) { return isCommunication(kind); }

// A statistic that must be a finite number >= 0 (stddev may be 0; times of a real event may not).
TimingStats readStats(const YamlReader& entry, const std::string& key = "time_us") {
  YamlReader time = entry.child(key);
  time.allowOnly({"median", "min", "max", "stddev", "count"});
  TimingStats stats;
  stats.median_us = time.positiveDouble("median");
  stats.min_us = time.positiveDouble("min");
  stats.max_us = time.positiveDouble("max");
  stats.stddev_us = time.nonNegativeDouble("stddev");
  int64_t count = time.positiveInt("count");
  if (count > 1'000'000'000) time.fail("count", fmt::format("{}: implausibly large", count));
  stats.count = static_cast<int>(count);
  if (!(stats.min_us <= stats.median_us && stats.median_us <= stats.max_us)) {
    time.fail("", fmt::format("inconsistent statistics: need min <= median <= max, got min={} "
                              "median={} max={}",
                              stats.min_us, stats.median_us, stats.max_us));
  }
  return stats;
}

// Checks that a key of the entry agrees with the value its signature implies.
// `max`: bytes may pass 2^31 (a 70B model's gradient all-reduce is ~19 GB); counts of ranks not.
void expectEqual(const YamlReader& entry, const std::string& key, int64_t from_signature,
                 int64_t max = YamlReader::kMaxInt) {
  int64_t value = entry.positiveInt(key, max);
  if (value != from_signature) {
    entry.fail(key, fmt::format("{} disagrees with the signature ({})", value, from_signature));
  }
}

ProfileRecord readRecord(const YamlReader& entry) {
  if (!entry.node().IsMap()) entry.fail("", "must be a mapping with signature, kind, time_us");
  ProfileRecord record;
  record.signature = entry.str("signature");
  record.event = parseEventSignature(record.signature, entry.where("signature"));
  // Store the canonical form so lookups by Event::signature() always match.
  record.signature = record.event.signature();
  std::string kind = entry.str("kind");
  if (kind != eventKindName(record.event.kind)) {
    entry.fail("kind", fmt::format("'{}' disagrees with the signature (kind {})", kind,
                                   eventKindName(record.event.kind)));
  }
  if (!hasCommunicationFields(record.event.kind)) {
    entry.allowOnly({"signature", "kind", "time_us"});
    record.time = readStats(entry);
    return record;
  }
  entry.allowOnly({"signature", "kind", "time_us", "group_size", "nodes", "ranks_per_node", "bytes",
                   "measured_group_size", "measured_nodes", "measured_ranks_per_node", "scaled",
                   "algbw_gb_s", "busbw_gb_s"});
  record.time = readStats(entry);
  const Placement& p = record.event.placement;
  expectEqual(entry, "group_size", p.group_size);
  expectEqual(entry, "nodes", p.nodes);
  expectEqual(entry, "ranks_per_node", p.ranks_per_node);
  expectEqual(entry, "bytes", record.event.message_bytes, std::numeric_limits<int64_t>::max());
  int64_t measured = entry.positiveInt("measured_group_size");
  if (measured < 2 || measured > p.group_size) {
    entry.fail("measured_group_size",
               fmt::format("{}: must be between 2 and group_size {}", measured, p.group_size));
  }
  record.measured_group_size = static_cast<int>(measured);
  // Where it was measured (session 15): both keys or neither (an older file; derived on load).
  const bool has_nodes = entry.has("measured_nodes");
  if (has_nodes != entry.has("measured_ranks_per_node")) {
    const char* missing = has_nodes ? "measured_ranks_per_node" : "measured_nodes";
    entry.fail(missing, "missing: measured_nodes and measured_ranks_per_node come together");
  }
  if (has_nodes) {
    record.measured_nodes = static_cast<int>(entry.positiveInt("measured_nodes"));
    record.measured_ranks_per_node = static_cast<int>(entry.positiveInt("measured_ranks_per_node"));
    const std::string problem = measuredLayoutProblem(p, record.measuredPlacement());
    if (!problem.empty()) entry.fail("measured_nodes", problem);
  }
  record.scaled = entry.boolean("scaled");
  if (record.scaled != (measured != p.group_size)) {
    entry.fail("scaled", fmt::format("{} but measured_group_size {} {} group_size {}",
                                     record.scaled ? "true" : "false", measured,
                                     record.scaled ? "==" : "!=", p.group_size));
  }
  record.algbw_gb_s = entry.positiveDouble("algbw_gb_s");
  record.busbw_gb_s = entry.positiveDouble("busbw_gb_s");
  return record;
}

OverlapRecord readOverlap(const YamlReader& entry) {
  if (!entry.node().IsMap())
    entry.fail("", "must be a mapping with compute, transfer, alone_us, beside_us");
  entry.allowOnly({"compute", "transfer", "alone_us", "beside_us"});
  OverlapRecord r;
  r.compute = parseEventSignature(entry.str("compute"), entry.where("compute"));
  if (r.compute.kind != EventKind::kCompute) entry.fail("compute", "not a compute event");
  r.transfer = parseEventSignature(entry.str("transfer"), entry.where("transfer"));
  if (!isCommunication(r.transfer.kind)) entry.fail("transfer", "not a communication event");
  r.alone = readStats(entry, "alone_us");
  r.beside = readStats(entry, "beside_us");
  return r;
}

void emitStats(YAML::Emitter& out, const std::string& key, const TimingStats& t) {
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "median" << YAML::Value << t.median_us;
  out << YAML::Key << "min" << YAML::Value << t.min_us;
  out << YAML::Key << "max" << YAML::Value << t.max_us;
  out << YAML::Key << "stddev" << YAML::Value << t.stddev_us;
  out << YAML::Key << "count" << YAML::Value << t.count;
  out << YAML::EndMap;
}

std::vector<std::string> stringList(const YamlReader& parent, const std::string& key) {
  std::vector<std::string> out;
  for (const YamlReader& item : parent.items(key)) {
    if (!item.node().IsScalar() || item.node().as<std::string>().empty()) {
      item.fail("", "must be a non-empty string");
    }
    out.push_back(item.node().as<std::string>());
  }
  return out;
}

ProfileMetadata readMetadata(const YamlReader& root) {
  YamlReader meta = root.child("metadata");
  meta.allowOnly(
      {"backend", "date", "world_size", "ranks_per_node", "hosts", "devices", "versions"});
  ProfileMetadata out;
  out.backend = meta.str("backend");
  if (!isKnownProfileBackend(out.backend)) {
    meta.fail("backend", fmt::format("'{}': must be {}", out.backend, kProfileBackendsText));
  }
  out.date = meta.str("date");
  out.world_size = static_cast<int>(meta.positiveInt("world_size"));
  out.ranks_per_node = static_cast<int>(meta.positiveInt("ranks_per_node"));
  out.hosts = stringList(meta, "hosts");
  out.devices = stringList(meta, "devices");
  if (meta.has("versions")) {
    YamlReader versions = meta.child("versions");
    if (versions.node().IsMap()) {
      for (const auto& [name, value] : versions.entries()) out.versions[name] = versions.str(name);
    } else if (!versions.node().IsNull()) {
      versions.fail("", "must be a mapping of component: version");
    }
  }
  return out;
}

void emitRecord(YAML::Emitter& out, const ProfileRecord& r) {
  out << YAML::BeginMap;
  out << YAML::Key << "signature" << YAML::Value << YAML::DoubleQuoted << r.signature;
  out << YAML::Key << "kind" << YAML::Value << std::string(eventKindName(r.event.kind));
  emitStats(out, "time_us", r.time);
  if (hasCommunicationFields(r.event.kind)) {
    const Placement& p = r.event.placement;
    out << YAML::Key << "group_size" << YAML::Value << p.group_size;
    out << YAML::Key << "nodes" << YAML::Value << p.nodes;
    out << YAML::Key << "ranks_per_node" << YAML::Value << p.ranks_per_node;
    out << YAML::Key << "bytes" << YAML::Value << r.event.message_bytes;
    out << YAML::Key << "measured_group_size" << YAML::Value << r.measured_group_size;
    if (r.hasMeasuredLayout()) {
      out << YAML::Key << "measured_nodes" << YAML::Value << r.measured_nodes;
      out << YAML::Key << "measured_ranks_per_node" << YAML::Value << r.measured_ranks_per_node;
    }
    out << YAML::Key << "scaled" << YAML::Value << r.scaled;
    out << YAML::Key << "algbw_gb_s" << YAML::Value << r.algbw_gb_s;
    out << YAML::Key << "busbw_gb_s" << YAML::Value << r.busbw_gb_s;
  }
  out << YAML::EndMap;
}

std::string emit(const ProfileMetadata& m, const std::vector<ProfileRecord>& records,
                 const std::vector<OverlapRecord>& overlap) {
  YAML::Emitter out;
  // 7 significant digits: sub-ns resolution below 1 ms, and no float noise ("4.9470000000000001").
  out.SetDoublePrecision(7);
  out << YAML::BeginMap;
  out << YAML::Key << "schema_version" << YAML::Value << kProfileSchemaVersion;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backend" << YAML::Value << m.backend;
  out << YAML::Key << "date" << YAML::Value << YAML::DoubleQuoted << m.date;
  out << YAML::Key << "world_size" << YAML::Value << m.world_size;
  out << YAML::Key << "ranks_per_node" << YAML::Value << m.ranks_per_node;
  out << YAML::Key << "hosts" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& h : m.hosts) out << YAML::DoubleQuoted << h;
  out << YAML::EndSeq;
  out << YAML::Key << "devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& d : m.devices) out << YAML::DoubleQuoted << d;
  out << YAML::EndSeq;
  out << YAML::Key << "versions" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [name, version] : m.versions) {
    out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << version;
  }
  out << YAML::EndMap;
  out << YAML::EndMap;
  out << YAML::Key << "events" << YAML::Value << YAML::BeginSeq;
  for (const ProfileRecord& r : records) emitRecord(out, r);
  out << YAML::EndSeq;
  if (!overlap.empty()) {
    out << YAML::Key << "overlap" << YAML::Value << YAML::BeginSeq;
    for (const OverlapRecord& r : overlap) {
      out << YAML::BeginMap;
      out << YAML::Key << "compute" << YAML::Value << YAML::DoubleQuoted << r.compute.signature();
      out << YAML::Key << "transfer" << YAML::Value << YAML::DoubleQuoted << r.transfer.signature();
      emitStats(out, "alone_us", r.alone);
      emitStats(out, "beside_us", r.beside);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  if (!out.good())
    EVSIM_THROW(Error, "profile database: YAML emitter error: {}", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace

void deriveMeasuredLayouts(const ProfileMetadata& metadata, std::vector<ProfileRecord>& records) {
  for (ProfileRecord& r : records) {
    if (!isCommunication(r.event.kind) || r.hasMeasuredLayout()) continue;
    if (const std::optional<Placement> measured =
            derivedMeasuredPlacement(r.event.placement, r.measured_group_size,
                                     metadata.world_size, metadata.ranks_per_node)) {
      r.setMeasured(*measured);
    }
  }
}

bool isKnownProfileBackend(std::string_view backend) {
  return backend == "cpu" || backend == "cuda" || backend == "nccl-tests" || backend == "pytorch";
}

ProfileFormat profileFormatForPath(const std::string& path) {
  return std::string_view(path).ends_with(".cbor") ? ProfileFormat::kCbor : ProfileFormat::kYaml;
}

std::string_view profileFormatName(ProfileFormat format) {
  return format == ProfileFormat::kCbor ? "cbor" : "yaml";
}

ProfileDb ProfileDb::load(const std::string& path) {
  // Binary bytes are not UTF-8: the text check waits until the content says YAML.
  std::string bytes = readInputBytes(path, "profile database");
  if (isCborProfile(bytes)) return decodeProfileCbor(std::move(bytes), path);
  if (const int64_t bad = firstInvalidUtf8(bytes); bad >= 0) {
    EVSIM_THROW(InputError, "{}: not UTF-8 text (invalid byte at offset {})", path, bad);
  }
  return parse(bytes, path);
}

// The entries are read as the parser reaches them (YamlReader::fromStringStreaming): a
// 400,000-entry profile is never held as YAML nodes at once. The version is still judged before any
// entry: an entry's error is kept until the whole file is parsed and the version checked.
ProfileDb ProfileDb::parse(const std::string& text, const std::string& origin) {
  if (isCborProfile(text)) return decodeProfileCbor(text, origin);
  ProfileDb db;
  std::optional<std::string> entry_error;
  const YamlReader root =
      YamlReader::fromStringStreaming(text, origin, "events", [&](const YamlReader& entry) {
        if (entry_error) return;
        try {
          ProfileRecord record = readRecord(entry);
          if (db.find(record.signature) != nullptr) {
            entry.fail("signature", fmt::format("'{}' appears twice", record.signature));
          }
          db.put(std::move(record));
        } catch (const InputError& e) {
          entry_error = e.what();
        }
      });
  readHeader(root, db);
  if (entry_error) EVSIM_THROW(InputError, "{}", *entry_error);
  deriveMeasuredLayouts(db.metadata, db.records_);
  return db;
}

void ProfileDb::readHeader(const YamlReader& root, ProfileDb& db) {
  root.allowOnly({"schema_version", "metadata", "events", "overlap"});
  // The version is read before anything else so a newer file says so instead of failing on keys.
  if (!root.has("schema_version")) {
    root.fail("schema_version", "missing: not an eventsim profile database");
  }
  int64_t version = root.nonNegativeInt("schema_version");
  if (version != kProfileSchemaVersion) {
    root.fail("schema_version", fmt::format("{} is not supported (this eventsim reads version {})",
                                            version, kProfileSchemaVersion));
  }
  db.metadata = readMetadata(root);
  if (root.has("overlap")) {
    for (const YamlReader& entry : root.items("overlap")) db.putOverlap(readOverlap(entry));
  }
  YamlReader events = root.child("events");
  // "events:" with nothing after it: no entries yet. A list was streamed (and left empty here).
  if (events.node().IsNull() || events.node().IsSequence()) return;
  events.fail("", "must be a list");
}

void ProfileDb::save(const std::string& path) const { save(path, profileFormatForPath(path)); }

void ProfileDb::save(const std::string& path, ProfileFormat format) const {
  // Temp file beside the target (`<path>.tmp.<pid>`, what removeStaleTemps looks for), fsync,
  // rename: an interrupted save leaves the previous database whole.
  AtomicFileWriter writer(path, AtomicFileWriter::Durability::kDurable);
  if (format == ProfileFormat::kCbor) {
    writer.stream() << encodeProfileCbor(*this);
  } else {
    writer.stream() << emit(metadata, records(), overlap_);
  }
  writer.commit();
}

int ProfileDb::removeStaleTemps(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::optional<int64_t> pid = parseInteger(std::string_view(name).substr(prefix.size()));
    if (!pid || *pid <= 0) continue;
    // kill(pid, 0) fails with ESRCH when no such process exists: its writer is gone.
    if (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno != ESRCH) continue;
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

void ProfileDb::put(ProfileRecord record) {
  materialize();
  if (record.signature.empty()) record.signature = record.event.signature();
  const size_t existing = index_.insert(record.signature, records_.size(), keyOf());
  if (existing != SignatureIndex::kAbsent) {
    records_[existing] = std::move(record);
    return;
  }
  records_.push_back(std::move(record));
}

bool ProfileDb::putNew(ProfileRecord record) {
  materialize();
  if (record.signature.empty()) record.signature = record.event.signature();
  if (index_.insert(record.signature, records_.size(), keyOf()) != SignatureIndex::kAbsent) {
    return false;
  }
  records_.push_back(std::move(record));
  return true;
}

void ProfileDb::reserve(size_t records) {
  materialize();
  records_.reserve(records);
  index_.reserve(records);
}

void ProfileDb::adoptRows(std::shared_ptr<const ProfileRows> rows) {
  EVSIM_CHECK(records_.empty() && rows_ == nullptr && index_.size() == 0,
              "adoptRows into a database that holds records");
  rows_ = std::move(rows);
  const size_t twice = index_.insertAll(rows_->size(), keyOf());
  if (twice != SignatureIndex::kAbsent) {
    EVSIM_THROW(InputError, "{}.signature: '{}' appears twice", rows_->where(twice),
                rows_->signature(twice));
  }
}

void ProfileDb::materialize() {
  if (rows_ == nullptr) return;
  records_ = rows_->all();
  rows_.reset();
}

std::string_view ProfileDb::keyAt(size_t i) const {
  return rows_ != nullptr ? rows_->signature(i) : std::string_view(records_[i].signature);
}

size_t ProfileDb::size() const { return rows_ != nullptr ? rows_->size() : records_.size(); }

const std::vector<ProfileRecord>& ProfileDb::records() const {
  return rows_ != nullptr ? rows_->all() : records_;
}

std::vector<const ProfileRecord*> ProfileDb::communicationRecords() const {
  std::vector<const ProfileRecord*> out;
  if (rows_ != nullptr) {
    for (size_t i = 0; i < rows_->size(); ++i) {
      if (rows_->isCommunication(i)) out.push_back(&rows_->record(i));
    }
    return out;
  }
  for (const ProfileRecord& r : records_) {
    if (isCommunication(r.event.kind)) out.push_back(&r);
  }
  return out;
}

void ProfileDb::putOverlap(OverlapRecord record) {
  for (OverlapRecord& r : overlap_) {
    if (r.compute.signature() == record.compute.signature() &&
        r.transfer.signature() == record.transfer.signature()) {
      r = std::move(record);
      return;
    }
  }
  overlap_.push_back(std::move(record));
}

const ProfileRecord* ProfileDb::find(std::string_view signature) const {
  const size_t position = index_.find(signature, keyOf());
  if (position == SignatureIndex::kAbsent) {
    // Was it stored under another spelling? (profile_rows.h: the row's error, not a miss.)
    if (rows_ != nullptr) rows_->checkSignatures();
    return nullptr;
  }
  return rows_ != nullptr ? &rows_->record(position) : &records_[position];
}

}  // namespace evsim
