// Profile database: round trip, atomic writing, and one clear InputError per kind of damage.
#include "io/profile_db.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "fmt/format.h"

namespace evsim {
namespace {

namespace fs = std::filesystem;

class ProfileDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The pid keeps two runs of one test apart (checkouts testing side by side on one machine):
    // without it one run's remove_all below emptied the other's folder mid-test.
    dir_ = fs::temp_directory_path() /
           ("evsim_profile_db_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "profile.yaml").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static ProfileDb sample() {
    ProfileDb db;
    db.metadata.backend = "cuda";
    db.metadata.date = "2026-11-21T10:00:00Z";
    db.metadata.world_size = 4;
    db.metadata.ranks_per_node = 2;
    db.metadata.hosts = {"node-a", "node-b"};
    db.metadata.devices = {"NVIDIA A40", "NVIDIA A40", "NVIDIA A40", "NVIDIA A40"};
    db.metadata.versions = {{"cuda", "13.0"}, {"nccl", "2.28.9"}, {"mpi", "Open MPI v4.1.4"}};
    ProfileRecord gemm;
    gemm.event = parseEventSignature("gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16", "test");
    gemm.time = {12.5, 12.1, 13.9, 0.4, 20};
    db.put(gemm);
    ProfileRecord ar;
    ar.event =
        parseEventSignature("allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16", "test");
    ar.time = {250, 240, 275.5, 7.25, 20};
    ar.setMeasured({4, 2, 2});  // eventprof's 2 x 2 (rule 3 on this 2-node, 2-rank cluster)
    ar.scaled = true;
    ar.algbw_gb_s = 16.777216;
    ar.busbw_gb_s = 31.45728;
    db.put(ar);
    return db;
  }

  std::string read() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write(const std::string& text) const { std::ofstream(path_) << text; }

  // Loads and returns the InputError's message (fails the test when loading succeeds).
  std::string loadError() const {
    try {
      ProfileDb::load(path_);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading succeeded";
    return "";
  }
  // Replaces the first `from` in the saved sample.
  void writeSampleWith(const std::string& from, const std::string& to) {
    sample().save(path_);
    std::string text = read();
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write(text.replace(at, from.size(), to));
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(ProfileDbTest, RoundTrip) {
  ProfileDb original = sample();
  original.save(path_);
  ProfileDb loaded = ProfileDb::load(path_);
  EXPECT_EQ(loaded.metadata.backend, "cuda");
  EXPECT_EQ(loaded.metadata.world_size, 4);
  EXPECT_EQ(loaded.metadata.ranks_per_node, 2);
  EXPECT_EQ(loaded.metadata.hosts, original.metadata.hosts);
  EXPECT_EQ(loaded.metadata.devices, original.metadata.devices);
  EXPECT_EQ(loaded.metadata.versions, original.metadata.versions);
  EXPECT_EQ(loaded.metadata.date, original.metadata.date);
  ASSERT_EQ(loaded.records().size(), 2u);
  const ProfileRecord* gemm = loaded.find("gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16");
  ASSERT_NE(gemm, nullptr);
  EXPECT_DOUBLE_EQ(gemm->time.median_us, 12.5);
  EXPECT_DOUBLE_EQ(gemm->time.stddev_us, 0.4);
  EXPECT_EQ(gemm->time.count, 20);
  EXPECT_EQ(gemm->event.kind, EventKind::kCompute);
  const ProfileRecord* ar =
      loaded.find("allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->measured_group_size, 4);
  EXPECT_EQ(ar->measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_TRUE(ar->scaled);
  EXPECT_DOUBLE_EQ(ar->time.max_us, 275.5);
  EXPECT_NEAR(ar->algbw_gb_s, 16.777216, 1e-5);
  EXPECT_NEAR(ar->busbw_gb_s, 31.45728, 1e-5);
  EXPECT_EQ(ar->event.placement, (Placement{16, 2, 8}));
}

TEST_F(ProfileDbTest, TransfersPastTwoGiBRoundTripInBothForms) {
  // A 70B model's gradient all-reduce is ~19 GB: its bytes must not be read as a 32-bit count.
  ProfileDb db = sample();
  ProfileRecord big;
  big.event = parseEventSignature(
      "allreduce bytes=19214434304 group=8 nodes=1 rpn=8 dtype=bf16", "test");
  big.time = {9.0e4, 8.9e4, 9.2e4, 100, 5};
  big.measured_group_size = 8;
  big.algbw_gb_s = 213.5;  // 19214434304 B / 90 ms
  big.busbw_gb_s = 373.6;  // x 2(8-1)/8
  db.put(big);
  for (const std::string name : {"big.yaml", "big.cbor"}) {
    const std::string path = (dir_ / name).string();
    db.save(path);
    const ProfileDb loaded = ProfileDb::load(path);
    const ProfileRecord* r =
        loaded.find("allreduce bytes=19214434304 group=8 nodes=1 rpn=8 dtype=bf16");
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->event.message_bytes, 19214434304) << name;
    EXPECT_EQ(r->time.median_us, 9.0e4) << name;
  }
}

TEST_F(ProfileDbTest, SaveReplacesAtomicallyAndLeavesNoTempFile) {
  ProfileDb db = sample();
  db.save(path_);
  ProfileRecord extra;
  extra.event = parseEventSignature("gelu_fwd elems=1024 dtype=bf16", "test");
  extra.time = {1, 1, 1, 0, 3};
  db.put(extra);
  db.put(extra);  // same signature: replaced, not duplicated
  db.save(path_);
  EXPECT_EQ(ProfileDb::load(path_).records().size(), 3u);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "profile.yaml");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(ProfileDbTest, EmptyEventListLoads) {
  ProfileDb db = sample();
  ProfileDb empty;
  empty.metadata = db.metadata;
  empty.save(path_);
  EXPECT_TRUE(ProfileDb::load(path_).records().empty());
}

TEST_F(ProfileDbTest, MissingFile) {
  EXPECT_NE(loadError().find(path_ + ": cannot open"), std::string::npos);
}

TEST_F(ProfileDbTest, TruncatedFile) {
  sample().save(path_);
  std::string text = read();
  // Cut inside the last entry's flow map: "time_us: {median: 250, min: 2"
  size_t cut = text.rfind("min: ");
  ASSERT_NE(cut, std::string::npos);
  write(text.substr(0, cut + 6));
  std::string error = loadError();
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_NE(error.find("malformed YAML"), std::string::npos) << error;
  // Cut between an entry's keys: the entry lacks its statistics.
  write(text.substr(0, text.find("    time_us", text.find("allreduce"))));
  error = loadError();
  EXPECT_NE(error.find(path_ + ": events[1].time_us: missing"), std::string::npos) << error;
}

TEST_F(ProfileDbTest, WrongVersion) {
  writeSampleWith("schema_version: 1", "schema_version: 2");
  std::string error = loadError();
  EXPECT_NE(error.find(path_ + ": schema_version: 2 is not supported"), std::string::npos) << error;
}

// A world size beyond an int is refused where it is read, not narrowed (4294967300 became 4).
TEST_F(ProfileDbTest, WorldSizeBeyondAnIntIsRefused) {
  writeSampleWith("world_size: 4", "world_size: 4294967300");
  std::string error = loadError();
  EXPECT_NE(error.find("metadata.world_size: 4294967300: must be <= 2147483647"), std::string::npos)
      << error;
}

// The temp file of an interrupted save whose process is gone is removed; a running writer's (this
// process) is kept (issue 17, item 4).
TEST_F(ProfileDbTest, StaleTempFilesAreRemoved) {
  pid_t gone = 0;
  for (pid_t p = 4194000; p > 1000; --p) {  // a pid no process has (kill says ESRCH)
    if (::kill(p, 0) != 0 && errno == ESRCH) {
      gone = p;
      break;
    }
  }
  ASSERT_GT(gone, 0);
  const std::string stale = path_ + ".tmp." + std::to_string(gone);
  const std::string live = path_ + ".tmp." + std::to_string(::getpid());
  std::ofstream(stale) << "half";
  std::ofstream(live) << "writing";
  EXPECT_EQ(ProfileDb::removeStaleTemps(path_), 1);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  std::filesystem::remove(live);
}

TEST_F(ProfileDbTest, NotAProfile) {
  write("events: []\n");
  EXPECT_NE(loadError().find("schema_version: missing"), std::string::npos);
}

TEST_F(ProfileDbTest, MissingKey) {
  writeSampleWith("    kind: compute\n", "");
  std::string error = loadError();
  EXPECT_NE(error.find(path_ + ": events[0].kind: missing required key"), std::string::npos)
      << error;
}

TEST_F(ProfileDbTest, BadSignature) {
  writeSampleWith("gemm m=2048", "gemm m=abc");
  std::string error = loadError();
  EXPECT_NE(error.find(path_ + ": events[0].signature"), std::string::npos) << error;
  EXPECT_NE(error.find("not an integer"), std::string::npos) << error;
}

TEST_F(ProfileDbTest, MinAboveMax) {
  writeSampleWith("min: 12.1", "min: 14.5");
  std::string error = loadError();
  EXPECT_NE(error.find(path_ + ": events[0].time_us: inconsistent statistics"), std::string::npos)
      << error;
}

TEST_F(ProfileDbTest, KindContradictsSignature) {
  writeSampleWith("kind: allreduce", "kind: allgather");
  EXPECT_NE(loadError().find("events[1].kind: 'allgather' disagrees"), std::string::npos);
}

TEST_F(ProfileDbTest, ScaledFlagMustMatchGroupSizes) {
  writeSampleWith("scaled: true", "scaled: false");
  EXPECT_NE(loadError().find("events[1].scaled"), std::string::npos);
}

TEST_F(ProfileDbTest, PlacementMustMatchSignature) {
  writeSampleWith("group_size: 16", "group_size: 8");
  EXPECT_NE(loadError().find("events[1].group_size: 8 disagrees with the signature (16)"),
            std::string::npos);
}

TEST_F(ProfileDbTest, DuplicateSignature) {
  sample().save(path_);
  std::string text = read();
  size_t events = text.find("events:\n") + 8;
  std::string first_entry = text.substr(events, text.find("  - signature", events + 4) - events);
  write(text + first_entry);
  EXPECT_NE(loadError().find("appears twice"), std::string::npos);
}

TEST_F(ProfileDbTest, UnknownKey) {
  writeSampleWith("    kind: compute\n", "    kind: compute\n    colour: blue\n");
  EXPECT_NE(loadError().find("events[0].colour: unknown key"), std::string::npos);
}

// Issue 33: entries are read as they are parsed. A bad entry is still reported after a newer
// schema version (the version is judged first, even when "events" comes before it in the file),
// and the entry's index is its place in the list.
TEST_F(ProfileDbTest, VersionIsJudgedBeforeStreamedEntries) {
  sample().save(path_);
  std::string text = read();
  const std::string version = "schema_version: 1\n";
  ASSERT_EQ(text.rfind(version, 0), 0u);
  // The version moved after the events, then made 2, with a broken first entry.
  text = text.substr(version.size()) + "schema_version: 2\n";
  const size_t kind = text.find("    kind: compute\n");
  ASSERT_NE(kind, std::string::npos);
  text.insert(kind, "    colour: blue\n");
  write(text);
  EXPECT_EQ(loadError(), path_ + ": schema_version: 2 is not supported (this eventsim reads version 1)");
  // With version 1 the entry's error is the answer.
  const size_t two = text.rfind("schema_version: 2");
  write(text.replace(two, 17, "schema_version: 1"));
  EXPECT_NE(loadError().find(path_ + ": events[0].colour: unknown key"), std::string::npos);
}

TEST_F(ProfileDbTest, EventsMustBeAList) {
  writeSampleWith("events:\n", "events: {a: 1}\nunused:\n");
  // The unknown top-level key is judged first, as before.
  EXPECT_NE(loadError().find(path_ + ": unused: unknown key"), std::string::npos);
  sample().save(path_);
  std::string text = read();
  write(text.substr(0, text.find("events:\n")) + "events: {a: 1}\n");
  EXPECT_EQ(loadError(), path_ + ": events: must be a list");
}

// Many entries stream through the loader and come back in order (the loader at size).
TEST_F(ProfileDbTest, ManyEntriesLoadInOrder) {
  ProfileDb db = sample();
  const size_t base = db.records().size();
  for (int i = 0; i < 5000; ++i) {
    ProfileRecord r;
    r.event = parseEventSignature(fmt::format("gemm m={} n=64 k=64 layout=nt dtype=bf16", 64 + i),
                                  "test");
    r.time = {2.0 + i, 1.0 + i, 3.0 + i, 0.5, 5};
    db.put(r);
  }
  db.save(path_);
  const ProfileDb loaded = ProfileDb::load(path_);
  ASSERT_EQ(loaded.records().size(), base + 5000);
  const ProfileRecord& last = loaded.records().back();
  EXPECT_EQ(last.signature, "gemm m=5063 n=64 k=64 layout=nt dtype=bf16");
  EXPECT_DOUBLE_EQ(last.time.median_us, 5001.0);
  EXPECT_DOUBLE_EQ(loaded.records()[base].time.min_us, 1.0);
}

// Session 15: where a record was measured is recorded, both forms, and wins over the fallback.
TEST_F(ProfileDbTest, MeasuredLayoutRoundTripsInBothForms) {
  ProfileDb db = sample();
  // A 16-rank event over 4 nodes of 4 measured on 4 nodes of 1 (as on a 4 x 1 cluster). The
  // fallback on this profile's 2 x 2 metadata would say 2 nodes of 2: the record must win.
  ProfileRecord wide;
  wide.event =
      parseEventSignature("allgather bytes=1048576 group=16 nodes=4 rpn=4 dtype=bf16", "test");
  wide.time = {90, 90, 90, 0, 20};
  wide.setMeasured({4, 4, 1});
  wide.scaled = true;
  wide.algbw_gb_s = wide.busbw_gb_s = 11.65;
  db.put(wide);
  db.save(path_);
  EXPECT_NE(read().find("    measured_nodes: 4\n    measured_ranks_per_node: 1\n"),
            std::string::npos)
      << read();
  const std::string cbor = (dir_ / "p.cbor").string();
  db.save(cbor);
  for (const std::string& path : {path_, cbor}) {
    const ProfileDb loaded = ProfileDb::load(path);
    const ProfileRecord* w = loaded.find(wide.event.signature());
    ASSERT_NE(w, nullptr) << path;
    EXPECT_EQ(w->measuredPlacement(), (Placement{4, 4, 1})) << path;
    EXPECT_EQ(loaded.find("allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16")
                  ->measuredPlacement(),
              (Placement{4, 2, 2}))
        << path;
    EXPECT_EQ(loaded.find("gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16")->measured_nodes, 0);
  }
}

// A profile written before session 15 (no layout keys) loads; the layout follows from the
// metadata's cluster (2 nodes of 2) by events/measured_layout.h's fallback, worked by hand:
//   - group 16 over 2 nodes of 8, measured on 4: rule 3, k <= 2 nodes, r <= 2 ranks: 2 x 2 = 4;
//   - group 4 over 3 nodes of 2, measured on 4 (not scaled): the cluster has 2 nodes, so rule 3:
//     2 x 2;
//   - group 4 over 2 nodes of 2 measured on 4: where it is filed (rule 2);
//   - group 8 over 1 node of 8 measured on 2: rule 3 with k = 1: 1 x 2;
//   - group 16 over 2 nodes of 8 measured on 3: rule 3 gives 4, not 3: unknown (0), and saved
//     again without the keys.
TEST_F(ProfileDbTest, OlderProfilesDeriveTheLayout) {
  auto entry = [](const std::string& kind, int group, int nodes, int rpn, int measured) {
    return fmt::format(
        "  - signature: \"{} bytes=65536 group={} nodes={} rpn={} dtype=bf16\"\n"
        "    kind: {}\n    time_us: {{median: 10, min: 10, max: 10, stddev: 0, count: 5}}\n"
        "    group_size: {}\n    nodes: {}\n    ranks_per_node: {}\n    bytes: 65536\n"
        "    measured_group_size: {}\n    scaled: {}\n    algbw_gb_s: 6.5\n"
        "    busbw_gb_s: 6.5\n",
        kind, group, nodes, rpn, kind, group, nodes, rpn, measured,
        measured != group ? "true" : "false");
  };
  sample().save(path_);
  std::string text = read();
  text = text.substr(0, text.find("events:\n") + 8) + entry("allreduce", 16, 2, 8, 4) +
         entry("allgather", 4, 3, 2, 4) + entry("reduce_scatter", 4, 2, 2, 4) +
         entry("allreduce", 8, 1, 8, 2) + entry("allgather", 16, 2, 8, 3);
  write(text);
  const ProfileDb loaded = ProfileDb::load(path_);
  ASSERT_EQ(loaded.records().size(), 5u);
  EXPECT_EQ(loaded.records()[0].measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_EQ(loaded.records()[1].measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_EQ(loaded.records()[2].measuredPlacement(), (Placement{4, 2, 2}));
  EXPECT_EQ(loaded.records()[3].measuredPlacement(), (Placement{2, 1, 2}));
  EXPECT_FALSE(loaded.records()[4].hasMeasuredLayout());
  EXPECT_EQ(loaded.records()[4].measured_group_size, 3);
  // The binary form of the same older content (its columns hold 0 for "not recorded").
  const std::string cbor = (dir_ / "old.cbor").string();
  loaded.save(cbor);
  const ProfileDb from_cbor = ProfileDb::load(cbor);
  EXPECT_EQ(from_cbor.records()[3].measuredPlacement(), (Placement{2, 1, 2}));
  EXPECT_FALSE(from_cbor.records()[4].hasMeasuredLayout());
  loaded.save(path_);
  const std::string again = read();
  EXPECT_EQ(again.find("measured_nodes"), again.find("    measured_nodes: 2\n") + 4);
  size_t keys = 0;
  for (size_t at = again.find("measured_nodes"); at != std::string::npos;
       at = again.find("measured_nodes", at + 1)) {
    ++keys;
  }
  EXPECT_EQ(keys, 4u);  // the unexplained record stays without them
}

TEST_F(ProfileDbTest, MeasuredLayoutMustFitTheRecord) {
  // 2 nodes of 1 rank cannot hold the 4 ranks measured.
  writeSampleWith("measured_ranks_per_node: 2", "measured_ranks_per_node: 1");
  EXPECT_EQ(loadError(), path_ + ": events[1].measured_nodes: 2 nodes with at most 1 ranks each "
                                 "cannot hold measured_group_size 4");
  // One node (of 4 ranks) for an event across nodes: the link type is not what was measured.
  writeSampleWith("measured_nodes: 2\n    measured_ranks_per_node: 2",
                  "measured_nodes: 1\n    measured_ranks_per_node: 4");
  EXPECT_EQ(loadError(), path_ + ": events[1].measured_nodes: measured on 1 node(s) for an event "
                                 "on 2: the link type must be kept");
  // Wider than the event (3 nodes of an event over 2).
  writeSampleWith("measured_nodes: 2\n    measured_ranks_per_node: 2",
                  "measured_nodes: 3\n    measured_ranks_per_node: 2");
  EXPECT_EQ(loadError(), path_ + ": events[1].measured_nodes: 3 nodes of 2 ranks is wider than the "
                                 "event's 2 nodes of 8");
  // One key without the other.
  writeSampleWith("    measured_ranks_per_node: 2\n", "");
  EXPECT_EQ(loadError(), path_ + ": events[1].measured_ranks_per_node: missing: measured_nodes and "
                                 "measured_ranks_per_node come together");
  writeSampleWith("measured_nodes: 2", "measured_nodes: 0");
  EXPECT_NE(loadError().find("events[1].measured_nodes: 0"), std::string::npos);
}

}  // namespace
}  // namespace evsim
