// The binary (CBOR, columnar) profile database (issue 33, item 2): the same content as the YAML
// both ways, the form told by content, and one InputError for a corrupt, truncated or bad file.
#include "io/profile_cbor.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <filesystem>
#include <fstream>
#include <functional>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "io/profile_db.h"

namespace evsim {
namespace {

using nlohmann::json;

ProfileDb sample() {
  ProfileDb db;
  db.metadata.backend = "cuda";
  db.metadata.date = "2026-11-21T10:00:00Z";
  db.metadata.world_size = 4;
  db.metadata.ranks_per_node = 2;
  db.metadata.hosts = {"node-a", "node-b"};
  db.metadata.devices = {"NVIDIA A40", "NVIDIA A40"};
  db.metadata.versions = {{"cuda", "13.0"}, {"nccl", "2.28.9"}};
  ProfileRecord gemm;
  gemm.event = parseEventSignature("gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16", "test");
  gemm.time = {12.5, 12.1, 13.9, 0.4, 20};
  db.put(gemm);
  ProfileRecord ar;
  ar.event =
      parseEventSignature("allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16", "test");
  ar.time = {250, 240, 275.5, 7.25, 20};
  ar.setMeasured({4, 2, 2});  // eventprof's 2 x 2
  ar.scaled = true;
  ar.algbw_gb_s = 16.777216;
  ar.busbw_gb_s = 31.45728;
  db.put(ar);
  OverlapRecord o;
  o.compute = gemm.event;
  o.transfer = ar.event;
  o.alone = {10, 9, 11, 0.5, 5};
  o.beside = {13, 12, 14, 0.5, 5};
  db.putOverlap(o);
  return db;
}

// The YAML text save() writes. The file is this process's own: ctest -j runs this program's
// tests side by side, and two of them using one shared name could read each other's file.
std::string yamlText(const ProfileDb& db) {
  const std::string path =
      fmt::format("{}/evsim_profile_cbor_test_{}.yaml", testing::TempDir(), ::getpid());
  db.save(path);
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove(path);
  return text;
}

std::string errorOf(const std::string& bytes) {
  try {
    ProfileDb::parse(bytes, "p.cbor");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "loading succeeded";
  return "";
}

// A layout-2 file's parts (profile_cbor.h): the header map and the column bytes after it.
struct Layout2 {
  json header;
  std::vector<uint8_t> columns;
};
uint64_t bigEndian64(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  for (size_t b = 0; b < 8; ++b) v = (v << 8) | static_cast<uint8_t>(bytes[at + b]);
  return v;
}
Layout2 split(const std::string& file) {
  // magic (3) | 1B + 8-byte header length | header | 5B + 8-byte column length | columns
  EXPECT_EQ(static_cast<uint8_t>(file[3]), 0x1B);
  const uint64_t header_bytes = bigEndian64(file, 4);
  const size_t columns_head = 12 + header_bytes;
  EXPECT_EQ(static_cast<uint8_t>(file[columns_head]), 0x5B);
  EXPECT_EQ(bigEndian64(file, columns_head + 1), file.size() - columns_head - 9);
  return {json::from_cbor(file.substr(12, header_bytes)),
          std::vector<uint8_t>(file.begin() + static_cast<std::ptrdiff_t>(columns_head + 9),
                               file.end())};
}
void putBigEndian64(std::string& out, uint8_t first, uint64_t v) {
  out.push_back(static_cast<char>(first));
  for (int b = 7; b >= 0; --b) out.push_back(static_cast<char>(v >> (8 * b)));
}
std::string join(const Layout2& parts) {
  std::string header;
  json::to_cbor(parts.header, header);
  std::string out(kProfileCborMagic);
  putBigEndian64(out, 0x1B, header.size());
  out += header;
  putBigEndian64(out, 0x5B, parts.columns.size());
  out.append(parts.columns.begin(), parts.columns.end());
  return out;
}

// The same content in layout 1 (sessions 9-10's files): every [offset, bytes] reference replaced
// by the byte string it points at, inside the one map.
json layout1(const Layout2& parts) {
  json doc = parts.header;
  doc["schema_version"] = 1;
  for (const char* table : {"events", "overlap"}) {
    if (!doc.contains(table)) continue;
    for (auto& [key, value] : doc[table].items()) {
      if (!value.is_array()) continue;
      const auto at = parts.columns.begin() + value[0].get<std::ptrdiff_t>();
      value = json::binary(std::vector<uint8_t>(at, at + value[1].get<std::ptrdiff_t>()));
    }
  }
  return doc;
}
std::string encodeLayout1(const json& doc) {
  std::string out(kProfileCborMagic);
  json::to_cbor(doc, out);
  return out;
}

// The sample in layout 1, changed by `edit`: the checks of a row are the same in both layouts.
std::string edited(const std::function<void(json&)>& edit) {
  json doc = layout1(split(encodeProfileCbor(sample())));
  edit(doc);
  return encodeLayout1(doc);
}

// The sample in layout 2 with its header changed by `edit`.
std::string editedHeader(const std::function<void(json&)>& edit) {
  Layout2 parts = split(encodeProfileCbor(sample()));
  edit(parts.header);
  return join(parts);
}

TEST(ProfileCbor, SameContentAsTheYaml) {
  const std::string bytes = encodeProfileCbor(sample());
  ASSERT_TRUE(isCborProfile(bytes));
  // Read by content through the same entry point as YAML (ProfileDb::parse).
  const ProfileDb back = ProfileDb::parse(bytes, "p.cbor");
  EXPECT_EQ(back.metadata.backend, "cuda");
  EXPECT_EQ(back.metadata.hosts, sample().metadata.hosts);
  EXPECT_EQ(back.metadata.versions, sample().metadata.versions);
  ASSERT_EQ(back.records().size(), 2u);
  const ProfileRecord* ar = back.find("allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->time.max_us, 275.5);
  EXPECT_EQ(ar->time.stddev_us, 7.25);
  EXPECT_EQ(ar->measured_group_size, 4);
  EXPECT_TRUE(ar->scaled);  // 4 != 16: follows from measured_group_size
  EXPECT_EQ(ar->busbw_gb_s, 31.45728);
  ASSERT_EQ(back.overlapRecords().size(), 1u);
  EXPECT_EQ(back.overlapRecords()[0].beside.median_us, 13);
  EXPECT_EQ(ar->algbw_gb_s, 16.777216);  // every bit: the YAML keeps 7 digits (16.77722)
  // YAML -> binary -> YAML gives the same text.
  EXPECT_EQ(
      yamlText(ProfileDb::parse(encodeProfileCbor(ProfileDb::parse(yamlText(sample()), "a")), "b")),
      yamlText(sample()));
}

TEST(ProfileCbor, Layout1FilesStillRead) {
  const std::string old_file = encodeLayout1(layout1(split(encodeProfileCbor(sample()))));
  EXPECT_EQ(yamlText(ProfileDb::parse(old_file, "old.cbor")), yamlText(sample()));
}

TEST(ProfileCbor, LayoutIsColumnsAfterTheHeader) {
  // Two entries: 8 bytes per float64, 4 per int32, signatures each followed by '\n'.
  const Layout2 parts = split(encodeProfileCbor(sample()));
  const json& events = parts.header["events"];
  EXPECT_EQ(parts.header["format"], "eventsim-profile");
  EXPECT_EQ(parts.header["schema_version"], 2);
  EXPECT_EQ(events["entries"], 2);
  auto column = [&](const json& ref) {
    const auto at = parts.columns.begin() + ref[0].get<std::ptrdiff_t>();
    return std::vector<uint8_t>(at, at + ref[1].get<std::ptrdiff_t>());
  };
  const std::vector<uint8_t> sig = column(events["signature"]);
  EXPECT_EQ(std::string(sig.begin(), sig.end()),
            "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16\n"
            "allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16\n");
  EXPECT_EQ(events["signature"][0], 0);  // the first column starts the column bytes
  EXPECT_EQ(events["median_us"][1], 16);
  EXPECT_EQ(events["count"][1], 8);
  // 12.5 as little-endian float64: 0x4029000000000000.
  const std::vector<uint8_t> median = column(events["median_us"]);
  EXPECT_EQ(median[7], 0x40);
  EXPECT_EQ(median[6], 0x29);
  EXPECT_EQ(median[0], 0x00);
  // Events: 47 + 58 signature bytes, 4 x 16 statistics, 8 count, 8 group, 2 x 8 measured layout
  // (nodes, ranks per node), 2 x 16 bandwidths; overlap: 47 + 58, then 2 x (4 x 8 + 4) for one
  // row alone and beside.
  EXPECT_EQ(parts.columns.size(), (47u + 58 + 64 + 8 + 8 + 16 + 32) + (47 + 58 + 72));
}

TEST(ProfileCbor, TruncatedAtEveryLengthIsOneInputError) {
  const std::string bytes = encodeProfileCbor(sample());
  const std::string old_bytes = encodeLayout1(layout1(split(bytes)));
  for (const std::string& file : {bytes, old_bytes}) {
    for (size_t n = 3; n < file.size(); ++n) {
      const std::string message = errorOf(file.substr(0, n));
      EXPECT_EQ(message.find('\n'), std::string::npos) << n;
      EXPECT_NE(message.find("p.cbor: corrupt or truncated binary profile"), std::string::npos)
          << n << ": " << message;
    }
  }
  const Layout2 parts = split(bytes);
  EXPECT_EQ(errorOf(bytes + "x"),
            fmt::format("p.cbor: corrupt or truncated binary profile: {} column bytes declared, "
                        "{} in the file",
                        parts.columns.size(), parts.columns.size() + 1));
  EXPECT_EQ(errorOf(old_bytes + "x"),
            "p.cbor: corrupt or truncated binary profile: parse error at byte " +
                std::to_string(old_bytes.size() - 2) +
                ": syntax error while parsing CBOR value: expected end of input; last byte: 0x78");
  // A header length past the end of the file.
  std::string long_header = bytes.substr(0, 3);
  putBigEndian64(long_header, 0x1B, bytes.size());
  long_header += bytes.substr(12);
  EXPECT_EQ(errorOf(long_header),
            fmt::format("p.cbor: corrupt or truncated binary profile: the header ({} bytes) is not "
                        "followed by the column bytes",
                        bytes.size()));
}

TEST(ProfileCbor, ColumnReferencesAreChecked) {
  const size_t columns = split(encodeProfileCbor(sample())).columns.size();
  EXPECT_EQ(errorOf(editedHeader([&](json& h) {
              h["events"]["max_us"] = json::array({columns - 8, 16});
            })),
            fmt::format("p.cbor: events.max_us: bytes {}..{} lie past the {} column bytes",
                        columns - 8, columns + 8, columns));
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["events"]["count"] = json::array({0}); })),
            "p.cbor: events.count: must be [offset, bytes] into the column bytes");
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["events"]["count"] = json::binary({}); })),
            "p.cbor: events.count: must be [offset, bytes] into the column bytes");
  // A reference of the wrong length: the same message as an inline column's.
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["events"]["median_us"][1] = 8; })),
            "p.cbor: events.median_us: 8 bytes, expected 16 (2 entries of 8 bytes)");
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["schema_version"] = 1; })),
            "p.cbor: schema_version: 1 does not match the file's layout (version 2)");
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["schema_version"] = 3; })),
            "p.cbor: schema_version: 3 is not supported (this eventsim reads versions 1 and 2)");
}

TEST(ProfileCbor, DeepNestingIsRefusedNotRecursed) {
  // 100,000 nested one-element arrays: the CBOR reader recurses per level.
  std::string bytes(kProfileCborMagic);
  bytes += std::string(100000, '\x81');
  EXPECT_EQ(errorOf(bytes), "p.cbor: corrupt binary profile: nested deeper than 8 levels");
}

TEST(ProfileCbor, BadContentNamesTheColumnAndRow) {
  EXPECT_EQ(errorOf(edited([](json& d) { d["schema_version"] = 2; })),
            "p.cbor: schema_version: 2 does not match the file's layout (version 1)");
  EXPECT_EQ(errorOf(edited([](json& d) { d["events"]["count"] = json::array({0, 8}); })),
            "p.cbor: events.count: must be a byte string");
  EXPECT_EQ(errorOf(edited([](json& d) { d["format"] = "other"; })),
            "p.cbor: format: missing or not \"eventsim-profile\": not an eventsim profile "
            "database");
  EXPECT_EQ(errorOf(edited([](json& d) { d["events"]["extra"] = 1; })),
            "p.cbor: events.extra: unknown key");
  EXPECT_EQ(errorOf(edited([](json& d) {
              d["events"]["median_us"] = json::binary(std::vector<uint8_t>(8, 0));
            })),
            "p.cbor: events.median_us: 8 bytes, expected 16 (2 entries of 8 bytes)");
  // Row 1's min (bytes 8..15) set to 300 > median 250.
  EXPECT_EQ(errorOf(edited([](json& d) {
              auto& min = d["events"]["min_us"].get_binary();
              const auto bits = std::bit_cast<uint64_t>(300.0);
              for (int b = 0; b < 8; ++b) min[8 + b] = static_cast<uint8_t>(bits >> (8 * b));
            })),
            "p.cbor: events[1]: inconsistent statistics: need min <= median <= max, got min=300 "
            "median=250 max=275.5");
  // Row 0 is a compute event: it has no group.
  EXPECT_EQ(
      errorOf(edited([](json& d) { d["events"]["measured_group_size"].get_binary()[0] = 2; })),
      "p.cbor: events[0]: a compute event has measured_group_size, measured_nodes, "
      "measured_ranks_per_node, algbw_gb_s or busbw_gb_s (must be 0)");
  // The second signature made the first: a duplicate.
  EXPECT_EQ(errorOf(edited([](json& d) {
              const std::string s = "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16\n";
              std::string twice = s + s;
              d["events"]["signature"] =
                  json::binary(std::vector<uint8_t>(twice.begin(), twice.end()));
              d["events"]["measured_group_size"] = json::binary(std::vector<uint8_t>(8, 0));
              d["events"]["measured_nodes"] = json::binary(std::vector<uint8_t>(8, 0));
              d["events"]["measured_ranks_per_node"] = json::binary(std::vector<uint8_t>(8, 0));
              d["events"]["algbw_gb_s"] = json::binary(std::vector<uint8_t>(16, 0));
              d["events"]["busbw_gb_s"] = json::binary(std::vector<uint8_t>(16, 0));
            })),
            "p.cbor: events[1].signature: 'gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16' "
            "appears twice");
  EXPECT_EQ(errorOf(edited([](json& d) { d["metadata"]["hosts"] = {"\xff"}; })),
            "p.cbor: metadata.hosts: not UTF-8 text (invalid byte at offset 0)");
}

// The sample in layout 2 with its signature column replaced by `signatures` (same length: the
// other columns keep their offsets).
std::string withSignatures(const std::string& signatures) {
  Layout2 parts = split(encodeProfileCbor(sample()));
  const json& ref = parts.header["events"]["signature"];
  const auto at = parts.columns.begin() + ref[0].get<std::ptrdiff_t>();
  EXPECT_EQ(signatures.size(), ref[1].get<size_t>());
  std::copy(signatures.begin(), signatures.end(), at);
  return join(parts);
}
constexpr std::string_view kGemm = "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16";
constexpr std::string_view kAllReduce = "allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16";

std::string errorOfLookup(const ProfileDb& db, std::string_view signature) {
  try {
    db.find(signature);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the lookup succeeded";
  return "";
}

TEST(ProfileCbor, RowsAreDecodedWhenFirstLookedUp) {
  // Row 0's dtype misspelt (same length): the file loads, the all-reduce is found, and only a
  // lookup that misses (or a scan of every row) fails, naming the file and the row.
  const std::string bad_gemm = "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf17";
  const ProfileDb db =
      ProfileDb::parse(withSignatures(bad_gemm + "\n" + std::string(kAllReduce) + "\n"), "p.cbor");
  EXPECT_EQ(db.size(), 2u);
  const ProfileRecord* ar = db.find(kAllReduce);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->time.median_us, 250);
  EXPECT_EQ(ar->event.placement.group_size, 16);
  EXPECT_EQ(db.find(kAllReduce), ar);  // decoded once, the same record after
  const std::vector<const ProfileRecord*> comm = db.communicationRecords();
  ASSERT_EQ(comm.size(), 1u);  // the compute row is not decoded for it
  EXPECT_EQ(comm[0], ar);
  // A miss checks every row's signature: the row that could never be found is the error.
  const std::string message = errorOfLookup(db, kGemm);
  EXPECT_TRUE(message.starts_with("p.cbor: events[0].signature: ")) << message;
  EXPECT_NE(message.find("bf17"), std::string::npos) << message;
  EXPECT_THROW(db.records(), InputError);
}

TEST(ProfileCbor, AStoredSignatureMustBeCanonical) {
  // dtype before layout: parses to the same event, but lookups hash the canonical text.
  const std::string swapped = "gemm m=2048 n=3072 k=1024 dtype=bf16 layout=nt";
  const ProfileDb db = ProfileDb::parse(
      withSignatures(swapped + "\n" + std::string(kAllReduce) + "\n"), "p.cbor");
  EXPECT_NE(db.find(kAllReduce), nullptr);  // a hit checks nothing else
  // Looking the GEMM up by its canonical text misses; the miss names the row, not "missing".
  EXPECT_NE(errorOfLookup(db, kGemm).find("events[0].signature: "), std::string::npos);
  try {
    db.records();
    ADD_FAILURE() << "decoding every row succeeded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "p.cbor: events[0].signature: 'gemm m=2048 n=3072 k=1024 dtype=bf16 layout=nt' is "
              "not in canonical form (eventsim writes 'gemm m=2048 n=3072 k=1024 layout=nt "
              "dtype=bf16'; a lookup could never find it)");
  }
}

TEST(ProfileCbor, MeasuredGroupIsCheckedAgainstTheSignatureWhenDecoded) {
  Layout2 parts = split(encodeProfileCbor(sample()));
  const json& ref = parts.header["events"]["measured_group_size"];
  parts.columns[ref[0].get<size_t>() + 4] = 32;  // row 1: measured at 32 > group 16
  const ProfileDb db = ProfileDb::parse(join(parts), "p.cbor");
  ASSERT_NE(db.find(kGemm), nullptr);
  EXPECT_EQ(errorOfLookup(db, kAllReduce),
            "p.cbor: events[1].measured_group_size: 32: must be between 2 and group_size 16");
}

// Session 15: the measured layout's columns. Row 1 (the all-reduce, 16 ranks over 2 nodes of 8,
// measured on 4) was written as 2 nodes of 2.
TEST(ProfileCbor, MeasuredLayoutColumns) {
  const ProfileDb back = ProfileDb::parse(encodeProfileCbor(sample()), "p.cbor");
  EXPECT_EQ(back.find(kAllReduce)->measuredPlacement(), (Placement{4, 2, 2}));
  // Row 1 set to 1 node of 4: one node for an event across nodes, refused when it is decoded.
  Layout2 parts = split(encodeProfileCbor(sample()));
  const json& nodes = parts.header["events"]["measured_nodes"];
  const json& per_node = parts.header["events"]["measured_ranks_per_node"];
  parts.columns[nodes[0].get<size_t>() + 4] = 1;
  parts.columns[per_node[0].get<size_t>() + 4] = 4;
  const ProfileDb one_node = ProfileDb::parse(join(parts), "p.cbor");
  EXPECT_EQ(errorOfLookup(one_node, kAllReduce),
            "p.cbor: events[1].measured_nodes: measured on 1 node(s) for an event on 2: the link "
            "type must be kept");
  // Nodes 0 with ranks per node 4: refused on load.
  parts.columns[nodes[0].get<size_t>() + 4] = 0;
  EXPECT_EQ(errorOf(join(parts)),
            "p.cbor: events[1].measured_nodes: 0 with measured_ranks_per_node 4: both > 0, or "
            "both 0 where the layout is not known");
  // One column without the other.
  EXPECT_EQ(errorOf(editedHeader([](json& h) { h["events"].erase("measured_nodes"); })),
            "p.cbor: events.measured_nodes: missing: measured_nodes and measured_ranks_per_node "
            "come together");
  // A file written before session 15 (neither column): derived from the metadata's 2 x 2 by the
  // planner's rule 3 (16 ranks over 2 nodes of 8 -> 2 nodes of 2 = the 4 measured).
  const std::string old_file = editedHeader([](json& h) {
    h["events"].erase("measured_nodes");
    h["events"].erase("measured_ranks_per_node");
  });
  EXPECT_EQ(ProfileDb::parse(old_file, "old.cbor").find(kAllReduce)->measuredPlacement(),
            (Placement{4, 2, 2}));
}

TEST(ProfileCbor, ALoadedProfileCanBeExtendedAndCopied) {
  const ProfileDb loaded = ProfileDb::parse(encodeProfileCbor(sample()), "p.cbor");
  ProfileDb extended = loaded;  // shares the rows; changing it decodes its own
  ProfileRecord softmax;
  softmax.event = parseEventSignature("softmax_fwd rows=4096 cols=4096 dtype=bf16", "test");
  softmax.time = {3, 2, 4, 0.5, 10};
  extended.put(softmax);
  EXPECT_EQ(extended.size(), 3u);
  EXPECT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded.find("softmax_fwd rows=4096 cols=4096 dtype=bf16"), nullptr);
  ASSERT_NE(extended.find(kGemm), nullptr);
  EXPECT_EQ(extended.find(kGemm)->time.median_us, 12.5);
  EXPECT_EQ(extended.records()[2].signature, "softmax_fwd rows=4096 cols=4096 dtype=bf16");
  // A record replaced in place keeps its position.
  ProfileRecord faster = extended.records()[0];
  faster.time.median_us = faster.time.min_us = 12.2;
  extended.put(faster);
  EXPECT_EQ(extended.records()[0].time.median_us, 12.2);
  EXPECT_EQ(extended.size(), 3u);
  EXPECT_EQ(loaded.find(kGemm)->time.median_us, 12.5);
}

}  // namespace
}  // namespace evsim
