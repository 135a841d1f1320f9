// CostModel: lookup, derivation (network-model scaling, log-log interpolation), analytic estimates
// and the missing-event error. Every expected number is worked out by hand in the comment next to
// it.
#include "modeler/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "events/comm_factors.h"

namespace evsim {
namespace {

constexpr int64_t kMiB = 1 << 20;

// 8 GPUs per node; 100 TFLOP/s fp16 and 1000 GB/s memory (1e6 bytes/us); intra link 100 GB/s
// (1e5 bytes/us) with 2 us latency; network 80 GB/s per node with 5 us latency. No bf16 peak.
const char* kClusterYaml = R"(
name: test-cluster
node:
  gpus: 8
  device:
    name: test-gpu
    peak_tflops: {fp16: 100, fp32: 10}
    memory_bandwidth_gb_s: 1000
    memory_gib: 16
  intra_link: {name: test-link, bandwidth_gb_s: 100, latency_us: 2}
network: {name: test-net, bandwidth_gb_s: 80, latency_us: 5}
)";

// The ring and Simple forced, as NCCL_ALGO=ring NCCL_PROTO=Simple: the derived tests' expectations
// are the ring Simple closed form (NCCL's own model would run LL or LL128 at these sizes).
ClusterConfig testCluster() {
  ClusterConfig c = parseClusterConfig(kClusterYaml, "test-cluster.yaml");
  c.topology.nccl.algorithm = "ring";
  c.topology.nccl.protocols = {false, false, true};
  return c;
}

// NCCL's ring all-reduce, Simple (docs/NETWORK.md): base 8.4 us + 2(n-1) steps of `step_us` +
// 2(n-1)/n x bytes over the slowest hop (bytes per us). This cluster (no topology: one NIC per
// GPU) gives a group with 2 ranks per node 80 * 2/8 = 20 GB/s (2e4 B/us) and 5 us steps across
// nodes; inside a node its 100 GB/s link and 2 us steps.
double ringAllReduceUs(int n, double step_us, double bytes_per_us, int64_t bytes) {
  return 8.4 + 2.0 * (n - 1) * step_us + 2.0 * (n - 1) / n * double(bytes) / bytes_per_us;
}
// Reduce-scatter and all-gather: n-1 steps, (n-1)/n of the buffer.
double ringGatherUs(int n, double step_us, double bytes_per_us, int64_t bytes) {
  return 8.4 + (n - 1) * step_us + double(n - 1) / n * double(bytes) / bytes_per_us;
}

Event allReduce(int64_t bytes, int group, int nodes, int rpn, DType dtype = DType::kFp16) {
  return makeCommunication(EventKind::kAllReduce, bytes, {group, nodes, rpn}, dtype);
}

Event p2p(int64_t bytes, int nodes) {
  return makeCommunication(EventKind::kP2P, bytes, {2, nodes, nodes == 1 ? 2 : 1}, DType::kFp16);
}

// A record as eventprof writes it; `measured_group` != group size marks a profiler-scaled one.
ProfileRecord record(const Event& event, double median_us, int measured_group = 0) {
  ProfileRecord r;
  r.event = event;
  r.signature = event.signature();
  r.time = {median_us, median_us, median_us, 0, 10};
  if (isCommunication(event.kind)) {
    int group = event.placement.group_size;
    r.measured_group_size = measured_group == 0 ? group : measured_group;
    r.scaled = r.measured_group_size != group;
    r.algbw_gb_s = double(event.message_bytes) / median_us / 1e3;
    r.busbw_gb_s = r.algbw_gb_s * busBandwidthFactor(event.kind, group);
  }
  return r;
}

class CostModelTest : public ::testing::Test {
 protected:
  ClusterConfig cluster_ = testCluster();
  ProfileDb db_;

  CostModel model(bool fallback = false) const { return CostModel(cluster_, &db_, fallback); }
};

// --- measured ------------------------------------------------------------------------------------

TEST_F(CostModelTest, ExactSignatureIsMeasured) {
  db_.put(record(makeGemm(1024, 1024, 1024, "nn", DType::kFp16), 30));
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  auto gemm = model().cost(makeGemm(1024, 1024, 1024, "nn", DType::kFp16));
  ASSERT_TRUE(gemm);
  EXPECT_DOUBLE_EQ(gemm->time_us, 30);
  EXPECT_EQ(gemm->provenance, Provenance::kMeasured);
  auto ar = model().cost(allReduce(kMiB, 4, 2, 2));
  ASSERT_TRUE(ar);
  EXPECT_DOUBLE_EQ(ar->time_us, 100);
  EXPECT_EQ(ar->provenance, Provenance::kMeasured);
}

TEST_F(CostModelTest, ProfilerScaledRecordIsDerived) {
  // The profiler scaled group 16 from group 4: its time was computed, not measured.
  db_.put(record(allReduce(kMiB, 16, 2, 8), 125, /*measured_group=*/4));
  auto c = model().cost(allReduce(kMiB, 16, 2, 8));
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->time_us, 125);
  EXPECT_EQ(c->provenance, Provenance::kDerived);
}

// --- derived: scaling by the network model -------------------------------------------------------

TEST_F(CostModelTest, ScalesAllReduceToLargerGroupByTheNetworkModel) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  // N=16 from n=4, t(N) = t(n) * model(N) / model(n): model(4) = 8.4 + 30 + 1.5 * 52.4288 =
  // 117.0432 us, model(16) = 8.4 + 150 + 1.875 * 52.4288 = 256.704 us -> 219.327 (the ring volume
  // factor alone said 125: it held the latency of 2(n-1) steps flat).
  auto n16 = model().cost(allReduce(kMiB, 16, 8, 2));
  ASSERT_TRUE(n16);
  EXPECT_NEAR(n16->time_us, 100 * 256.704 / 117.0432, 1e-9);
  EXPECT_NEAR(n16->time_us,
              100 * ringAllReduceUs(16, 5, 2e4, kMiB) / ringAllReduceUs(4, 5, 2e4, kMiB), 1e-9);
  EXPECT_EQ(n16->provenance, Provenance::kDerived);
  // N=8 from n=4: model(8) = 8.4 + 70 + 1.75 * 52.4288 = 170.1504 -> 145.372.
  auto n8 = model().cost(allReduce(kMiB, 8, 4, 2));
  ASSERT_TRUE(n8);
  EXPECT_NEAR(n8->time_us, 100 * 170.1504 / 117.0432, 1e-9);
  EXPECT_EQ(n8->provenance, Provenance::kDerived);
}

TEST_F(CostModelTest, ScalesReduceScatterAndAllGatherLikeAllReduce) {
  Placement n4{4, 2, 2};
  Placement n8{8, 4, 2};
  db_.put(record(makeCommunication(EventKind::kReduceScatter, kMiB, n4, DType::kFp16), 60));
  db_.put(record(makeCommunication(EventKind::kAllGather, kMiB, n4, DType::kFp16), 90));
  // model(4) = 8.4 + 3 * 5 + 0.75 * 52.4288 = 62.7216, model(8) = 8.4 + 35 + 0.875 * 52.4288 =
  // 89.2752: 60 * 89.2752 / 62.7216 = 85.40; 90 * the same = 128.10.
  auto rs = model().cost(makeCommunication(EventKind::kReduceScatter, kMiB, n8, DType::kFp16));
  auto ag = model().cost(makeCommunication(EventKind::kAllGather, kMiB, n8, DType::kFp16));
  ASSERT_TRUE(rs && ag);
  EXPECT_NEAR(rs->time_us, 60 * 89.2752 / 62.7216, 1e-9);
  EXPECT_NEAR(ag->time_us, 90 * ringGatherUs(8, 5, 2e4, kMiB) / ringGatherUs(4, 5, 2e4, kMiB),
              1e-9);
  EXPECT_EQ(rs->provenance, Provenance::kDerived);
}

TEST_F(CostModelTest, PrefersLargestMeasuredGroup) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  db_.put(record(allReduce(kMiB, 8, 4, 2), 150));
  // From n=8: 150 * 256.704 / 170.1504 = 226.30 (n=4 would give 219.33).
  auto c = model().cost(allReduce(kMiB, 16, 8, 2));
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->time_us, 150.0 * 256.704 / 170.1504, 1e-9);
}

TEST_F(CostModelTest, ScalesIntraNodeGroupsFromIntraNodeGroups) {
  // Intra-node groups have ranks_per_node == group_size, so only the scope is compared.
  db_.put(record(allReduce(kMiB, 4, 1, 4), 100));
  // Over the 100 GB/s link with 2 us steps: model(4) = 8.4 + 12 + 1.5 * 10.48576 = 36.12864,
  // model(8) = 8.4 + 28 + 1.75 * 10.48576 = 54.75008 -> 151.541.
  auto c = model().cost(allReduce(kMiB, 8, 1, 8));
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->time_us, 100 * 54.75008 / 36.12864, 1e-9);
  EXPECT_EQ(c->provenance, Provenance::kDerived);
}

TEST_F(CostModelTest, DoesNotScaleAcrossRanksPerNodeScopeDtypeOrCollective) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  CostModel m = model();
  EXPECT_FALSE(m.cost(allReduce(kMiB, 16, 2, 8)));                // rpn 8 != 2
  EXPECT_FALSE(m.cost(allReduce(kMiB, 16, 16, 1)));               // rpn 1 != 2
  EXPECT_FALSE(m.cost(allReduce(kMiB, 8, 1, 8)));                 // intra, measured inter
  EXPECT_FALSE(m.cost(allReduce(kMiB, 16, 8, 2, DType::kBf16)));  // other dtype
  EXPECT_FALSE(m.cost(makeCommunication(EventKind::kReduceScatter, kMiB, {16, 8, 2},
                                        DType::kFp16)));  // other collective
}

TEST_F(CostModelTest, DoesNotDeriveGroupsNotLargerThanEveryMeasuredOne) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  db_.put(record(allReduce(kMiB, 16, 8, 2), 130));
  // 8 lies between the measured 4 and 16: a gap in the profile, not derived.
  EXPECT_FALSE(model().cost(allReduce(kMiB, 8, 4, 2)));
  // Smaller than every measured group: no scaling down either.
  db_ = ProfileDb();
  db_.put(record(allReduce(kMiB, 8, 4, 2), 100));
  EXPECT_FALSE(model().cost(allReduce(kMiB, 4, 2, 2)));
}

TEST_F(CostModelTest, ScalingComposesOverProfilerScaledRecords) {
  // Group 16 (rpn 8) was scaled from 4 by the profiler: 125, a base like any other. Group 32
  // (rpn 8, the whole node's 80 GB/s = 8e4 B/us) from it: model(16) = 8.4 + 150 + 1.875 * 13.1072
  // = 182.976, model(32) = 8.4 + 310 + 1.9375 * 13.1072 = 343.7952 -> 234.862.
  db_.put(record(allReduce(kMiB, 16, 2, 8), 125, /*measured_group=*/4));
  auto c = model().cost(allReduce(kMiB, 32, 4, 8));
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->time_us, 125 * 343.7952 / 182.976, 1e-9);
  EXPECT_EQ(c->provenance, Provenance::kDerived);
}

// --- derived: log-log interpolation --------------------------------------------------------------

TEST_F(CostModelTest, InterpolatesLogLogBetweenMeasuredSizes) {
  db_.put(record(p2p(kMiB, 2), 100));
  db_.put(record(p2p(4 * kMiB, 2), 300));
  // 2 MiB is halfway in log(bytes) between 1 and 4 MiB: 100 * 3^0.5 = 173.205.
  auto c = model().cost(p2p(2 * kMiB, 2));
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->time_us, 100.0 * std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(c->time_us, 173.2050808, 1e-6);
  EXPECT_EQ(c->provenance, Provenance::kDerived);
  // Uses the two nearest sizes: with 16 MiB -> 2000 added, 2 MiB is unchanged, and
  // 8 MiB is halfway between 4 and 16 MiB: 300 * (2000/300)^0.5 = 774.597.
  db_.put(record(p2p(16 * kMiB, 2), 2000));
  EXPECT_NEAR(model().cost(p2p(2 * kMiB, 2))->time_us, 173.2050808, 1e-6);
  EXPECT_NEAR(model().cost(p2p(8 * kMiB, 2))->time_us, std::sqrt(300.0 * 2000.0), 1e-9);
}

TEST_F(CostModelTest, InterpolatesOnlyAtTheSamePlacement) {
  db_.put(record(p2p(kMiB, 2), 100));
  db_.put(record(p2p(4 * kMiB, 2), 300));
  EXPECT_FALSE(model().cost(p2p(2 * kMiB, 1)));  // intra-node p2p: another placement
}

TEST_F(CostModelTest, NeverExtrapolatesOutsideMeasuredSizes) {
  db_.put(record(p2p(kMiB, 2), 100));
  db_.put(record(p2p(4 * kMiB, 2), 300));
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  db_.put(record(allReduce(4 * kMiB, 4, 2, 2), 300));
  EXPECT_FALSE(model().cost(p2p(kMiB / 2, 2)));
  EXPECT_FALSE(model().cost(p2p(8 * kMiB, 2)));
  EXPECT_FALSE(model().cost(allReduce(8 * kMiB, 16, 8, 2)));  // nor before scaling
  // With the fallback, outside the range is estimated: p2p inter-node on rpn 1 gets 80/8 = 10 GB/s
  // (1e4 bytes/us): 5 + 524288 / 1e4 = 57.4288 us.
  auto c = model(/*fallback=*/true).cost(p2p(kMiB / 2, 2));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provenance, Provenance::kEstimated);
  EXPECT_NEAR(c->time_us, 57.4288, 1e-9);
}

TEST_F(CostModelTest, InterpolatesAtMeasuredGroupThenScales) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  db_.put(record(allReduce(4 * kMiB, 4, 2, 2), 300));
  // 2 MiB at n=4: 173.205; to N=16 at 2 MiB: model(4) = 38.4 + 1.5 * 104.8576 = 195.6864,
  // model(16) = 158.4 + 1.875 * 104.8576 = 355.008 -> 314.225.
  auto c = model().cost(allReduce(2 * kMiB, 16, 8, 2));
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->time_us, 100.0 * std::sqrt(3.0) * 355.008 / 195.6864, 1e-9);
  EXPECT_EQ(c->provenance, Provenance::kDerived);
}

TEST_F(CostModelTest, ExactMeasurementWinsOverDerivation) {
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  db_.put(record(allReduce(4 * kMiB, 4, 2, 2), 300));
  db_.put(record(allReduce(2 * kMiB, 4, 2, 2), 190));  // interpolation would say 173.2
  db_.put(record(allReduce(kMiB, 16, 8, 2), 140));     // scaling would say 125
  auto mid = model().cost(allReduce(2 * kMiB, 4, 2, 2));
  auto big = model().cost(allReduce(kMiB, 16, 8, 2));
  ASSERT_TRUE(mid && big);
  EXPECT_DOUBLE_EQ(mid->time_us, 190);
  EXPECT_EQ(mid->provenance, Provenance::kMeasured);
  EXPECT_DOUBLE_EQ(big->time_us, 140);
  EXPECT_EQ(big->provenance, Provenance::kMeasured);
}

TEST_F(CostModelTest, ComputeIsNeverDerived) {
  db_.put(record(makeGemm(1024, 1024, 1024, "nn", DType::kFp16), 30));
  db_.put(record(makeGemm(4096, 1024, 1024, "nn", DType::kFp16), 100));
  EXPECT_FALSE(model().cost(makeGemm(2048, 1024, 1024, "nn", DType::kFp16)));
  EXPECT_FALSE(model().cost(makeGemm(1024, 1024, 1024, "nt", DType::kFp16)));
  auto c = model(/*fallback=*/true).cost(makeGemm(2048, 1024, 1024, "nn", DType::kFp16));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provenance, Provenance::kEstimated);
}

// --- estimated -----------------------------------------------------------------------------------

TEST_F(CostModelTest, EstimatesComputeBoundGemm) {
  CostModel m(cluster_, nullptr, true);
  // flops 2 * 1024^3 = 2.147e9 at 1e14 flop/s = 21.475 us;
  // bytes 3 * 1024^2 * 2 = 6.29e6 at 1e12 B/s = 6.291 us -> compute-bound, 21.475 us.
  Event gemm = makeGemm(1024, 1024, 1024, "nn", DType::kFp16);
  EXPECT_NEAR(m.estimateUs(gemm), 21.47483648, 1e-9);
  auto c = m.cost(gemm);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->provenance, Provenance::kEstimated);
  EXPECT_NEAR(c->time_us, 21.47483648, 1e-9);
}

TEST_F(CostModelTest, EstimatesMemoryBoundElementwiseOp) {
  CostModel m(cluster_, nullptr, true);
  // add over 2^20 fp16 elements: 2^20 flops -> 0.0105 us; 3 * 2^20 * 2 = 6291456 bytes at
  // 1e6 B/us -> 6.291456 us: memory-bound.
  Event add = makeCompute("add", {{"elems", kMiB}}, "", DType::kFp16);
  EXPECT_NEAR(m.estimateUs(add), 6.291456, 1e-9);
}

TEST_F(CostModelTest, EstimateNeedsAPeakForTheDtype) {
  CostModel m(cluster_, nullptr, true);
  EXPECT_THROW(m.estimateUs(makeGemm(64, 64, 64, "nn", DType::kBf16)), InputError);
}

TEST_F(CostModelTest, EstimatesCollectivesByTheForcedRing) {
  CostModel m(cluster_, nullptr, true);
  // The ring, Simple (LL's quarter of the link loses at these sizes): NCCL's base 8.4 us + steps
  // x the hop's step latency + the bus factor x bytes over the slowest hop.
  // Intra all-reduce n=4, 4e6 bytes, 1e5 B/us, steps 2 us: 8.4 + 2*3*2 + 2*(3/4)*4e6/1e5 = 80.4.
  EXPECT_NEAR(m.estimateUs(allReduce(4'000'000, 4, 1, 4)), 8.4 + 72.0, 1e-9);
  // Inter all-reduce n=16 on 8 nodes, rpn 2: bw min(100, 80*2/8) = 20 GB/s = 2e4 B/us, steps 5:
  // 8.4 + 2*15*5 + 2*(15/16)*4e6/2e4 = 8.4 + 150 + 375 = 533.4.
  EXPECT_NEAR(m.estimateUs(allReduce(4'000'000, 16, 8, 2)), 8.4 + 525.0, 1e-9);
  // Inter all-reduce n=16 on 2 nodes, rpn 8: the whole NIC, 80 GB/s = 8e4 B/us:
  // 8.4 + 150 + 2*(15/16)*4e6/8e4 = 8.4 + 150 + 93.75 = 252.15.
  EXPECT_NEAR(m.estimateUs(allReduce(4'000'000, 16, 2, 8)), 8.4 + 243.75, 1e-9);
  // Intra reduce-scatter n=8, 8e6 bytes: 8.4 + 7*2 + (7/8)*8e6/1e5 = 8.4 + 14 + 70 = 92.4.
  EXPECT_NEAR(m.estimateUs(
                  makeCommunication(EventKind::kReduceScatter, 8'000'000, {8, 1, 8}, DType::kFp16)),
              8.4 + 84.0, 1e-9);
  // Inter all-gather n=4, one rank per node: 80/8 = 10 GB/s = 1e4 B/us:
  // 8.4 + 3*5 + (3/4)*4e6/1e4 = 8.4 + 15 + 300 = 323.4.
  EXPECT_NEAR(
      m.estimateUs(makeCommunication(EventKind::kAllGather, 4'000'000, {4, 4, 1}, DType::kFp16)),
      8.4 + 315.0, 1e-9);
  // p2p: inter 5 + 1e6/1e4 = 105; intra 2 + 1e6/1e5 = 12.
  EXPECT_NEAR(m.estimateUs(p2p(1'000'000, 2)), 105.0, 1e-9);
  EXPECT_NEAR(m.estimateUs(p2p(1'000'000, 1)), 12.0, 1e-9);
}

TEST_F(CostModelTest, InterNodeBandwidthNeverExceedsTheIntraLink) {
  // A network faster than the GPU's link: rpn 8 would get 400 GB/s, capped at the link's 100.
  std::string yaml = kClusterYaml;
  yaml.replace(yaml.find("bandwidth_gb_s: 80"), 18, "bandwidth_gb_s: 400");
  ClusterConfig fat = parseClusterConfig(yaml, "fat.yaml");
  fat.topology.nccl.algorithm = "ring";
  fat.topology.nccl.protocols = {false, false, true};  // Simple, as the closed form below
  CostModel m(fat, nullptr, true);
  // 8.4 + 2*15*5 + 2*(15/16)*4e6/1e5 = 8.4 + 150 + 75 = 233.4.
  EXPECT_NEAR(m.estimateUs(allReduce(4'000'000, 16, 2, 8)), 8.4 + 225.0, 1e-9);
}

// --- costAll and errors --------------------------------------------------------------------------

TEST_F(CostModelTest, CostAllReturnsCostsInTableOrder) {
  db_.put(record(makeGemm(1024, 1024, 1024, "nn", DType::kFp16), 30));
  db_.put(record(allReduce(kMiB, 4, 2, 2), 100));
  EventTable table;
  table.intern(allReduce(kMiB, 16, 8, 2));
  table.intern(makeGemm(1024, 1024, 1024, "nn", DType::kFp16));
  std::vector<EventCost> costs = model().costAll(table);
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_NEAR(costs[0].time_us, 100 * 256.704 / 117.0432, 1e-9);  // as in ScalesAllReduce...
  EXPECT_EQ(costs[0].provenance, Provenance::kDerived);
  EXPECT_DOUBLE_EQ(costs[1].time_us, 30);
  EXPECT_EQ(costs[1].provenance, Provenance::kMeasured);
}

TEST_F(CostModelTest, CostAllListsEveryMissingSignatureAndTheHint) {
  db_.put(record(makeGemm(1024, 1024, 1024, "nn", DType::kFp16), 30));
  EventTable table;
  table.intern(makeGemm(1024, 1024, 1024, "nn", DType::kFp16));
  Event gemm = makeGemm(2048, 1024, 1024, "nn", DType::kFp16);
  Event ar = allReduce(kMiB, 4, 2, 2);
  table.intern(gemm);
  table.intern(ar);
  try {
    withEventprofHint("mpirun -np 4 eventprof\n--events missing.yaml",
                      [&] { return model().costAll(table); });
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("2 events have no cost in profile"), std::string::npos) << msg;
    EXPECT_NE(msg.find(gemm.signature() + "; " + ar.signature()), std::string::npos) << msg;
    EXPECT_NE(msg.find("measure them with: mpirun -np 4 eventprof --events missing.yaml"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("m=1024 n=1024"), std::string::npos) << "measured event listed: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // With the fallback nothing is missing: the two are estimated.
  std::vector<EventCost> costs = model(/*fallback=*/true).costAll(table);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[0].provenance, Provenance::kMeasured);
  EXPECT_EQ(costs[1].provenance, Provenance::kEstimated);
  EXPECT_EQ(costs[2].provenance, Provenance::kEstimated);
}

TEST_F(CostModelTest, CostAllListsAtMostTenMissing) {
  EventTable table;
  for (int i = 1; i <= 12; ++i) table.intern(makeCompute("add", {{"elems", i}}, "", DType::kFp16));
  try {
    model().costAll(table);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("12 events have no cost"), std::string::npos) << msg;
    EXPECT_NE(msg.find("add elems=10 dtype=fp16; and 2 more"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("elems=11"), std::string::npos) << msg;
  }
}

TEST_F(CostModelTest, NeedsAtLeastOneSource) {
  EXPECT_THROW(CostModel(cluster_, nullptr, false), InputError);
  CostModel analytic(cluster_, nullptr, true);
  EventTable table;
  table.intern(allReduce(4'000'000, 4, 1, 4));
  std::vector<EventCost> costs = analytic.costAll(table);
  ASSERT_EQ(costs.size(), 1u);
  EXPECT_NEAR(costs[0].time_us, 80.4, 1e-9);  // as in EstimatesCollectivesByTheForcedRing
  EXPECT_EQ(costs[0].provenance, Provenance::kEstimated);
}

// --- names and factors ---------------------------------------------------------------------------

TEST(CostModelNames, ProvenanceNames) {
  EXPECT_EQ(provenanceName(Provenance::kMeasured), "measured");
  EXPECT_EQ(provenanceName(Provenance::kDerived), "derived");
  EXPECT_EQ(provenanceName(Provenance::kEstimated), "estimated");
}

TEST(CostModelNames, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllReduce, 2), 1.0);   // 2*1/2
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllReduce, 8), 1.75);  // 2*7/8
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kAllGather, 16), 0.9375);  // 15/16
  EXPECT_DOUBLE_EQ(busBandwidthFactor(EventKind::kP2P, 2), 1.0);
}

// --- a profile database from a file --------------------------------------------------------------

TEST(CostModelProfileFile, LoadsAndCostsFromAHandWrittenProfile) {
  ProfileDb db = ProfileDb::load(EVSIM_TEST_DATA_DIR "/profiles/cost_model_small.yaml");
  ClusterConfig cluster = testCluster();
  CostModel m(cluster, &db, false);
  auto gemm = m.cost(makeGemm(1024, 1024, 1024, "nn", DType::kFp16));
  ASSERT_TRUE(gemm);
  EXPECT_DOUBLE_EQ(gemm->time_us, 30);
  EXPECT_EQ(gemm->provenance, Provenance::kMeasured);
  // The profiler-scaled record: 125, derived.
  auto scaled = m.cost(allReduce(kMiB, 16, 2, 8));
  ASSERT_TRUE(scaled);
  EXPECT_DOUBLE_EQ(scaled->time_us, 125);
  EXPECT_EQ(scaled->provenance, Provenance::kDerived);
  // 2 MiB at n=8 (rpn 2) from n=4: 100 * 3^0.5 * model(8) / model(4) at 2 MiB, the ring over
  // 2e4 B/us with 5 us steps: (78.4 + 1.75 * 104.8576) / (38.4 + 1.5 * 104.8576) = 261.9008 /
  // 195.6864 -> 231.812.
  auto ar = m.cost(allReduce(2 * kMiB, 8, 4, 2));
  ASSERT_TRUE(ar);
  EXPECT_NEAR(ar->time_us, 100 * std::sqrt(3.0) * 261.9008 / 195.6864, 1e-6);
  // p2p of 2 MiB: only 1 MiB measured, nothing to interpolate against.
  EXPECT_FALSE(m.cost(p2p(2 * kMiB, 2)));
  EventTable table;
  table.intern(p2p(2 * kMiB, 2));
  try {
    m.costAll(table);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("1 event has no cost in profile (cpu backend, "
                                         "2026-11-21T10:00:00Z, 5 records): p2p bytes=2097152"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace evsim
