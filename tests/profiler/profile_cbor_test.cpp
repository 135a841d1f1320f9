// The binary (CBOR, columnar) profile database (issue 33, item 2): the same content as the YAML
// both ways, the form told by content, and one InputError for a corrupt, truncated or bad file.
#include "io/profile_cbor.h"

#include <gtest/gtest.h>

#include <bit>
#include <fstream>
#include <functional>
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
  ar.measured_group_size = 4;
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

// The YAML text save() writes.
std::string yamlText(const ProfileDb& db) {
  const std::string path = testing::TempDir() + "/evsim_profile_cbor_test.yaml";
  db.save(path);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
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

// The sample's document, changed by `edit`, encoded again with the magic.
std::string edited(const std::function<void(json&)>& edit) {
  const std::string bytes = encodeProfileCbor(sample());
  json doc = json::from_cbor(bytes.substr(kProfileCborMagic.size()));
  edit(doc);
  std::string out(kProfileCborMagic);
  json::to_cbor(doc, out);
  return out;
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

TEST(ProfileCbor, LayoutIsColumns) {
  // Two entries: 8 bytes per float64, 4 per int32, signatures each followed by '\n'.
  const json doc = json::from_cbor(encodeProfileCbor(sample()).substr(3));
  EXPECT_EQ(doc["format"], "eventsim-profile");
  EXPECT_EQ(doc["events"]["entries"], 2);
  EXPECT_EQ(doc["events"]["median_us"].get_binary().size(), 16u);
  EXPECT_EQ(doc["events"]["count"].get_binary().size(), 8u);
  const auto& sig = doc["events"]["signature"].get_binary();
  EXPECT_EQ(std::string(sig.begin(), sig.end()),
            "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16\n"
            "allreduce bytes=4194304 group=16 nodes=2 rpn=8 dtype=bf16\n");
  // 12.5 as little-endian float64: 0x4029000000000000.
  const auto& median = doc["events"]["median_us"].get_binary();
  EXPECT_EQ(median[7], 0x40);
  EXPECT_EQ(median[6], 0x29);
  EXPECT_EQ(median[0], 0x00);
}

TEST(ProfileCbor, TruncatedAtEveryLengthIsOneInputError) {
  const std::string bytes = encodeProfileCbor(sample());
  for (size_t n = 3; n < bytes.size(); ++n) {
    const std::string message = errorOf(bytes.substr(0, n));
    EXPECT_EQ(message.find('\n'), std::string::npos) << n;
    EXPECT_NE(message.find("p.cbor: corrupt or truncated binary profile"), std::string::npos)
        << n << ": " << message;
  }
  EXPECT_EQ(errorOf(bytes + "x"),
            "p.cbor: corrupt or truncated binary profile: parse error at byte " +
                std::to_string(bytes.size() - 2) +
                ": syntax error while parsing CBOR value: expected end of input; last byte: 0x78");
}

TEST(ProfileCbor, DeepNestingIsRefusedNotRecursed) {
  // 100,000 nested one-element arrays: the CBOR reader recurses per level.
  std::string bytes(kProfileCborMagic);
  bytes += std::string(100000, '\x81');
  EXPECT_EQ(errorOf(bytes), "p.cbor: corrupt binary profile: nested deeper than 8 levels");
}

TEST(ProfileCbor, BadContentNamesTheColumnAndRow) {
  EXPECT_EQ(errorOf(edited([](json& d) { d["schema_version"] = 2; })),
            "p.cbor: schema_version: 2 is not supported (this eventsim reads version 1)");
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
      "p.cbor: events[0]: a compute event has measured_group_size, algbw_gb_s or busbw_gb_s "
      "(must be 0)");
  // The second signature made the first: a duplicate.
  EXPECT_EQ(errorOf(edited([](json& d) {
              const std::string s = "gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16\n";
              std::string twice = s + s;
              d["events"]["signature"] =
                  json::binary(std::vector<uint8_t>(twice.begin(), twice.end()));
              d["events"]["measured_group_size"] = json::binary(std::vector<uint8_t>(8, 0));
              d["events"]["algbw_gb_s"] = json::binary(std::vector<uint8_t>(16, 0));
              d["events"]["busbw_gb_s"] = json::binary(std::vector<uint8_t>(16, 0));
            })),
            "p.cbor: events[1].signature: 'gemm m=2048 n=3072 k=1024 layout=nt dtype=bf16' "
            "appears twice");
  EXPECT_EQ(errorOf(edited([](json& d) { d["metadata"]["hosts"] = {"\xff"}; })),
            "p.cbor: metadata.hosts: not UTF-8 text (invalid byte at offset 0)");
}

}  // namespace
}  // namespace evsim
