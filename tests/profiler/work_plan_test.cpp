// What a run measures: resume skips measured signatures and refuses other hardware; events the
// cluster cannot measure stop the run or, with --intra-node-only, are listed.
#include "profiler/work_plan.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "topology_fixture.h"

namespace evsim {
namespace {

using test::hosts;

const char* kGemm = "gemm m=64 n=64 k=64 layout=nn dtype=fp16";
const char* kSoftmax = "softmax_fwd rows=8 cols=16 dtype=fp16";
const char* kIntraP2P = "p2p bytes=1024 group=2 nodes=1 rpn=2 dtype=fp16";
const char* kInterAllReduce = "allreduce bytes=4096 group=4 nodes=2 rpn=2 dtype=fp16";

std::vector<Event> wanted() {
  std::vector<Event> out;
  for (const char* s : {kGemm, kSoftmax, kIntraP2P, kInterAllReduce}) {
    out.push_back(parseEventSignature(s, "test"));
  }
  return out;
}

ProfileMetadata hardware() {
  ProfileMetadata m;
  m.backend = "cuda";
  m.date = "2026-11-21T00:00:00Z";
  m.world_size = 4;
  m.ranks_per_node = 2;
  m.hosts = {"a", "b"};
  m.devices = {"NVIDIA A40", "NVIDIA A40", "NVIDIA A40", "NVIDIA A40"};
  return m;
}

TEST(WorkPlan, FreshRunSplitsComputeAndCommunication) {
  WorkPlan plan = planWork(wanted(), nullptr, hosts(2, 2), false);
  ASSERT_EQ(plan.compute.size(), 2u);
  EXPECT_EQ(plan.compute[0].signature(), kGemm);
  ASSERT_EQ(plan.communication.size(), 2u);
  EXPECT_TRUE(plan.already_measured.empty());
  EXPECT_EQ(plan.total(), 4u);
}

TEST(WorkPlan, ResumeSkipsMeasuredSignatures) {
  ProfileDb previous;
  previous.metadata = hardware();
  ProfileRecord gemm;
  gemm.event = parseEventSignature(kGemm, "test");
  gemm.time = {10, 9, 11, 0.5, 5};
  previous.put(gemm);
  ProfileRecord p2p;
  p2p.event = parseEventSignature(kIntraP2P, "test");
  p2p.time = {5, 5, 5, 0, 5};
  p2p.measured_group_size = 2;
  previous.put(p2p);

  WorkPlan plan = planWork(wanted(), &previous, hosts(2, 2), false);
  EXPECT_EQ(plan.already_measured, (std::vector<std::string>{kGemm, kIntraP2P}));
  ASSERT_EQ(plan.compute.size(), 1u);
  EXPECT_EQ(plan.compute[0].signature(), kSoftmax);
  ASSERT_EQ(plan.communication.size(), 1u);
  EXPECT_EQ(plan.communication[0].signature(), kInterAllReduce);
}

TEST(WorkPlan, InterNodeOnOneNodeStopsUnlessIntraNodeOnly) {
  try {
    planWork(wanted(), nullptr, hosts(1, 4), false);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--intra-node-only"), std::string::npos) << e.what();
  }
  WorkPlan plan = planWork(wanted(), nullptr, hosts(1, 4), true);
  ASSERT_EQ(plan.unmeasurable.size(), 1u);
  EXPECT_EQ(plan.unmeasurable[0].rfind(kInterAllReduce, 0), 0u);
  ASSERT_EQ(plan.communication.size(), 1u);  // the intra-node p2p is still measured
  EXPECT_EQ(plan.communication[0].signature(), kIntraP2P);
}

TEST(WorkPlan, IntraNodeWithOneRankPerNodeAlwaysStops) {
  EXPECT_THROW(planWork(wanted(), nullptr, hosts(4, 1), true), InputError);
}

TEST(Resume, SameHardwareIsAccepted) {
  ProfileMetadata now = hardware();
  now.date = "later";
  now.hosts = {"c", "d"};  // other machines of the same kind are fine
  EXPECT_EQ(resumeMismatch(hardware(), now), std::nullopt);
  EXPECT_NO_THROW(checkResumable(hardware(), now, "p.yaml"));
}

TEST(Resume, OtherHardwareIsRefused) {
  ProfileMetadata devices = hardware();
  devices.devices[3] = "NVIDIA H100";
  ProfileMetadata world = hardware();
  world.world_size = 8;
  ProfileMetadata rpn = hardware();
  rpn.ranks_per_node = 4;
  ProfileMetadata backend = hardware();
  backend.backend = "cpu";
  for (const ProfileMetadata& other : {devices, world, rpn, backend}) {
    EXPECT_TRUE(resumeMismatch(hardware(), other).has_value());
    try {
      checkResumable(hardware(), other, "p.yaml");
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("p.yaml: cannot --resume"), std::string::npos) << message;
    }
  }
  EXPECT_NE(resumeMismatch(hardware(), devices)->find("NVIDIA H100"), std::string::npos);
}

}  // namespace
}  // namespace evsim
