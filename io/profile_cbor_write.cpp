// The binary profile's writer (encodeProfileCbor, profile_cbor.h): the header map and the
// column bytes of layout 2. Apart from the reader (profile_cbor.cpp), whose checks on every
// field of a file it may not trust are most of the format's code and none of the writer's.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/profile_cbor.h"
#include "io/profile_cbor_layout.h"
#include "io/profile_db.h"

namespace evsim {

namespace {

using nlohmann::json;

void putF64(std::vector<uint8_t>& out, double value) {
  const auto bits = std::bit_cast<uint64_t>(value);
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<uint8_t>(bits >> (8 * b)));
}
void putI32(std::vector<uint8_t>& out, int32_t value) {
  const auto bits = static_cast<uint32_t>(value);
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(bits >> (8 * b)));
}

json stringsJson(const std::vector<std::string>& items) {
  json out = json::array();
  for (const std::string& s : items) out.push_back(s);
  return out;
}

// The columns being written (layout 2): one byte run, each column a [offset, bytes] reference.
class ColumnWriter {
 public:
  json add(const std::vector<uint8_t>& column) {
    const json ref = json::array({bytes_.size(), column.size()});
    bytes_.insert(bytes_.end(), column.begin(), column.end());
    return ref;
  }
  json signatures(const std::vector<std::string>& signatures) {
    const size_t start = bytes_.size();
    for (const std::string& s : signatures) {
      bytes_.insert(bytes_.end(), s.begin(), s.end());
      bytes_.push_back('\n');
    }
    return json::array({start, bytes_.size() - start});
  }
  void stats(json& table, const std::string& prefix, const std::vector<TimingStats>& rows) {
    std::vector<uint8_t> median, min, max, stddev, count;
    for (const TimingStats& s : rows) {
      putF64(median, s.median_us);
      putF64(min, s.min_us);
      putF64(max, s.max_us);
      putF64(stddev, s.stddev_us);
      putI32(count, s.count);
    }
    table[prefix + "median_us"] = add(median);
    table[prefix + "min_us"] = add(min);
    table[prefix + "max_us"] = add(max);
    table[prefix + "stddev_us"] = add(stddev);
    table[prefix + "count"] = add(count);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A CBOR head of major type `major` with a fixed 8-byte argument (RFC 8949, section 3: additional
// information 27), so that its size is known before the item it announces is written.
void putFixedHead(std::string& out, uint8_t major, uint64_t argument) {
  out.push_back(static_cast<char>((major << 5) | 27));
  for (int b = 7; b >= 0; --b) out.push_back(static_cast<char>(argument >> (8 * b)));
}

}  // namespace

std::string encodeProfileCbor(const ProfileDb& db) {
  json doc;
  doc["format"] = kFormatName;
  doc["schema_version"] = kColumnsByReferenceVersion;
  const ProfileMetadata& m = db.metadata;
  doc["metadata"] = {{"backend", m.backend},          {"date", m.date},
                     {"world_size", m.world_size},    {"ranks_per_node", m.ranks_per_node},
                     {"hosts", stringsJson(m.hosts)}, {"devices", stringsJson(m.devices)},
                     {"versions", json(m.versions)}};
  ColumnWriter columns;
  json events = json::object();
  std::vector<std::string> signatures;
  std::vector<TimingStats> times;
  std::vector<uint8_t> measured, measured_nodes, measured_rpn, algbw, busbw;
  for (const ProfileRecord& r : db.records()) {
    signatures.push_back(r.signature);
    times.push_back(r.time);
    const bool comm = isCommunication(r.event.kind);
    putI32(measured, comm ? r.measured_group_size : 0);
    putI32(measured_nodes, comm ? r.measured_nodes : 0);
    putI32(measured_rpn, comm ? r.measured_ranks_per_node : 0);
    putF64(algbw, comm ? r.algbw_gb_s : 0);
    putF64(busbw, comm ? r.busbw_gb_s : 0);
  }
  events["entries"] = db.records().size();
  events["signature"] = columns.signatures(signatures);
  columns.stats(events, "", times);
  events["measured_group_size"] = columns.add(measured);
  events["measured_nodes"] = columns.add(measured_nodes);
  events["measured_ranks_per_node"] = columns.add(measured_rpn);
  events["algbw_gb_s"] = columns.add(algbw);
  events["busbw_gb_s"] = columns.add(busbw);
  doc["events"] = std::move(events);
  if (!db.overlapRecords().empty()) {
    json overlap = json::object();
    std::vector<std::string> compute, transfer;
    std::vector<TimingStats> alone, beside;
    for (const OverlapRecord& r : db.overlapRecords()) {
      compute.push_back(r.compute.signature());
      transfer.push_back(r.transfer.signature());
      alone.push_back(r.alone);
      beside.push_back(r.beside);
    }
    overlap["entries"] = db.overlapRecords().size();
    overlap["compute"] = columns.signatures(compute);
    overlap["transfer"] = columns.signatures(transfer);
    columns.stats(overlap, "alone_", alone);
    columns.stats(overlap, "beside_", beside);
    doc["overlap"] = std::move(overlap);
  }
  std::string header;
  json::to_cbor(doc, header);
  std::string out(kProfileCborMagic);
  putFixedHead(out, kMajorUnsigned, header.size());
  out += header;
  putFixedHead(out, kMajorBytes, columns.bytes().size());
  out.append(reinterpret_cast<const char*>(columns.bytes().data()), columns.bytes().size());
  return out;
}

}  // namespace evsim
