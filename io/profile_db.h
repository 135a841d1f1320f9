#pragma once
// The profile database: what eventprof measured, keyed by event signature. Versioned YAML; the
// profiler writes it (atomically, re-written as events complete) and the modeler reads it.
//
// Format (schema_version 1):
//   schema_version: 1
//   metadata:
//     backend: cpu | cuda | nccl-tests | pytorch   # nccl-tests: imported by eventsim
//                                                  # import-nccl-tests; pytorch: kernels timed in
//                                                  # PyTorch (scripts/gpu/torch_to_profile.py)
//     date: "2026-11-21T10:00:00Z"
//     world_size: 4
//     ranks_per_node: 2
//     hosts: [node-a, node-b]
//     devices: ["NVIDIA H100 80GB HBM3", ...]     # or CPU model names
//     versions: {cuda: "13.0", nccl: "2.27.3", mpi: "Open MPI 4.1.4"}   # those that apply
//   events:
//     - signature: "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16"
//       kind: compute                    # compute | p2p | allreduce | reduce_scatter | allgather
//       time_us: {median: 12.5, min: 12.1, max: 13.9, stddev: 0.4, count: 20}
//     - signature: "allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16"
//       kind: allreduce
//       time_us: {median: ..., min: ..., max: ..., stddev: ..., count: ...}
//       group_size: 16
//       nodes: 2
//       ranks_per_node: 8
//       bytes: 4194304
//       measured_group_size: 4           # == group_size when measured directly
//       measured_nodes: 2                # where it was measured (session 15; optional, below)
//       measured_ranks_per_node: 2
//       scaled: true                     # scaled from measured_group_size by the ring factor
//       algbw_gb_s: 10.2
//       busbw_gb_s: 19.1
//   overlap:                             # optional (eventprof --overlap; older files lack it)
//     - compute: "gemm m=512 n=512 k=512 layout=nn dtype=fp32"
//       transfer: "allreduce bytes=67108864 group=2 nodes=1 rpn=2 dtype=fp32"
//       alone_us: {median: ..., min: ..., max: ..., stddev: ..., count: ...}
//       beside_us: {median: ..., ...}    # the same kernel while the transfer runs all along
//
// The same content can be kept in binary, columnar form (CBOR, io/profile_cbor.h): a 400,000-entry
// profile then loads in a small fraction of the YAML's time and memory. save() picks the form by
// the name (".cbor": binary, anything else: YAML, the human-readable default); load() and parse()
// by the content (the CBOR magic), whatever the name. `eventsim convert-profile` converts both
// ways.
//
// measured_nodes and measured_ranks_per_node (session 15) say where the record was measured: the
// layout of the group eventprof timed it on (profiler/group_planner.h), the event's own placement
// for an imported row. Both or neither; when given they must fit measured_group_size and the event
// (events/measured_layout.h: measuredLayoutProblem), else an InputError naming the entry. A file
// written before (neither key) still loads: each communication record's layout is then derived
// by events/measured_layout.h's derivedMeasuredPlacement from the metadata's cluster, and left
// unknown (0, not written back) when that rule does not explain the record.
//
// Loading checks the schema version, every required key, that each signature parses, and that the
// statistics are consistent (min <= median <= max, count > 0); anything else is an InputError
// naming the file and the entry.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/event.h"
#include "io/signature_index.h"

namespace evsim {

class YamlReader;
class ProfileRows;

inline constexpr int kProfileSchemaVersion = 1;

// metadata.backend's values, for both forms.
bool isKnownProfileBackend(std::string_view backend);
inline constexpr std::string_view kProfileBackendsText = "cpu, cuda, nccl-tests or pytorch";

enum class ProfileFormat { kYaml, kCbor };
// kCbor for a name ending in ".cbor", else kYaml.
ProfileFormat profileFormatForPath(const std::string& path);
std::string_view profileFormatName(ProfileFormat format);  // "yaml", "cbor"

struct TimingStats {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  double stddev_us = 0;
  int count = 0;
};

struct ProfileMetadata {
  std::string backend;
  std::string date;
  int world_size = 0;
  int ranks_per_node = 0;
  std::vector<std::string> hosts;
  std::vector<std::string> devices;
  std::map<std::string, std::string> versions;
};

struct ProfileRecord {
  Event event;  // parsed from the signature
  std::string signature;
  TimingStats time;
  // Communication only:
  int measured_group_size = 0;  // group the time was measured at (== group_size unless scaled)
  // Where that group sat (nodes, most ranks on one node); 0: unknown (an older profile whose
  // layout the fallback rule does not explain).
  int measured_nodes = 0;
  int measured_ranks_per_node = 0;
  bool scaled = false;
  double algbw_gb_s = 0;
  double busbw_gb_s = 0;

  bool hasMeasuredLayout() const { return measured_nodes > 0; }
  Placement measuredPlacement() const {
    return {measured_group_size, measured_nodes, measured_ranks_per_node};
  }
  // Sets the measured layout (group size included) to `measured`.
  void setMeasured(const Placement& measured) {
    measured_group_size = measured.group_size;
    measured_nodes = measured.nodes;
    measured_ranks_per_node = measured.ranks_per_node;
  }
};

// Fills the measured layout of each communication record that lacks it by the fallback rule
// (events/measured_layout.h, derivedMeasuredPlacement) on `metadata`'s cluster.
void deriveMeasuredLayouts(const ProfileMetadata& metadata, std::vector<ProfileRecord>& records);

// A compute kernel timed alone and while a transfer is in flight on its device the whole time
// (eventprof --overlap): the overlap slowdown's measurement (modeler/overlap_slowdown.h). The
// transfer's placement gives the traffic kind (inside a node or across nodes).
struct OverlapRecord {
  Event compute;
  Event transfer;
  TimingStats alone;
  TimingStats beside;
};

class ProfileDb {
 public:
  ProfileMetadata metadata;

  // Throws InputError: missing file, malformed YAML or CBOR, wrong schema version, bad entries.
  // YAML or binary, told apart by the content.
  static ProfileDb load(const std::string& path);
  // The same from the file's bytes; `origin` names it in errors (tests, fuzzing).
  static ProfileDb parse(const std::string& text, const std::string& origin);
  // Writes to `path` atomically (temp file "<path>.tmp.<pid>" in the same directory, then rename),
  // in the form profileFormatForPath(path) names, or `format`.
  void save(const std::string& path) const;
  void save(const std::string& path, ProfileFormat format) const;
  // Removes the temp files an interrupted save() of `path` left behind: "<path>.tmp.<pid>" whose
  // process no longer runs (a running writer's is kept). Returns how many were removed.
  static int removeStaleTemps(const std::string& path);

  // Adds or replaces the record with the same signature.
  void put(ProfileRecord record);
  // Adds the record unless one with its signature is there (then false, nothing changed).
  bool putNew(ProfileRecord record);
  // Room for this many records without reallocating (loaders that know the count).
  void reserve(size_t records);
  // Takes a binary profile's rows, decoded when first needed (io/profile_rows.h), as this
  // database's records (it must hold none yet). InputError for a signature stored twice.
  void adoptRows(std::shared_ptr<const ProfileRows> rows);

  // The record of `signature` (canonical form), or nullptr. A binary profile's row is decoded
  // here the first time: an InputError naming the file and row when it is bad.
  const ProfileRecord* find(std::string_view signature) const;
  size_t size() const;
  // Every record, in order. A binary profile decodes all its rows the first time (calibrate,
  // convert-profile); lookups should use find() and communicationRecords().
  const std::vector<ProfileRecord>& records() const;
  // The communication records, in order (what derived costs scan; a binary profile decodes just
  // these rows). The pointers stay valid until the database is changed.
  std::vector<const ProfileRecord*> communicationRecords() const;

  // Adds or replaces the overlap record of the same compute and transfer events.
  void putOverlap(OverlapRecord record);
  const std::vector<OverlapRecord>& overlapRecords() const { return overlap_; }

 private:
  // Checks the top level (version, metadata, the events key) and fills db.metadata.
  static void readHeader(const YamlReader& root, ProfileDb& db);
  // Record i's signature, for the index (which keeps positions, not copies of the keys).
  std::string_view keyAt(size_t i) const;
  auto keyOf() const {
    return [this](size_t i) { return keyAt(i); };
  }
  // Before a change: a binary profile's rows become records_ (same order, so the index holds).
  void materialize();

  std::vector<ProfileRecord> records_;
  // A binary profile's rows, not yet decoded (then records_ is empty). Shared by copies: the
  // rows never change, and a copy that is changed materializes its own records_.
  std::shared_ptr<const ProfileRows> rows_;
  std::vector<OverlapRecord> overlap_;
  SignatureIndex index_;  // signature -> position in records_ (or row in rows_)
};

}  // namespace evsim
