// Search: candidate counts worked out by hand, invalid candidates with the right rule, OOM at the
// memory limit, ranking where one strategy is clearly best, missing events listed once.
#include "modeler/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "io/profile_db.h"
#include "support/search_options.h"
#include "support/tiny_fp16_model.h"

namespace evsim {
namespace {

// The tiny fp16 model (support/tiny_fp16_model.h) with 4 encoder layers: P <= 4.
const std::string kTinyYaml = test::tinyFp16ModelYaml("tiny-search", 4);

std::string clusterYaml(int gpus_per_node, const std::string& memory_gib,
                        const std::string& network_gb_s = "10") {
  return "name: search-cluster\nnode:\n  gpus: " + std::to_string(gpus_per_node) + R"(
  device:
    name: search-gpu
    peak_tflops: {fp16: 100, bf16: 100, fp32: 10}
    memory_bandwidth_gb_s: 1000
    memory_gib: )" +
         memory_gib + R"(
    memory: {cuda_context_mib: {value: 0, source: test}, cublas_workspace_mib: {value: 0, source: test}, nccl_mib_per_communicator: {value: 0, source: test}, allocator_fragmentation: {value: 0, source: test}}
  intra_link: {name: link, bandwidth_gb_s: 100, latency_us: 0}
network: {name: net, bandwidth_gb_s: )" +
         network_gb_s + R"(, latency_us: 0}
)";
}

SearchOptions options(int64_t gpus, int64_t global_batch, std::vector<int64_t> micro_batches,
                      std::vector<Schedule> schedules) {
  return test_support::searchOptions(gpus, global_batch, std::move(micro_batches),
                                     std::move(schedules));
}

class SearchTest : public ::testing::Test {
 protected:
  ModelConfig model_ = parseModelConfig(kTinyYaml, "tiny-search.yaml");
  ClusterConfig cluster_ = parseClusterConfig(clusterYaml(2, "16"), "search-cluster.yaml");
  CostModel analytic_{cluster_, nullptr, /*analytic_fallback=*/true};
};

const CandidateResult* find(const std::vector<CandidateResult>& rows, const std::string& name,
                            int64_t b, Schedule schedule = Schedule::kDapple) {
  for (const CandidateResult& r : rows) {
    if (r.strategy.name() == name && r.strategy.micro_batch == b &&
        r.strategy.schedule == schedule) {
      return &r;
    }
  }
  return nullptr;
}

TEST_F(SearchTest, FourGpusOnTwoGpuNodes) {
  // N = 4: (M,P,D) in {(1,1,4), (1,2,2), (1,4,1), (2,1,2), (2,2,1), (4,1,1)}; with 2 GPUs per
  // node, M = 4 would cross nodes. b = 1, B = 4: b*D divides B for every D.
  SearchReport report =
      runSearch(model_, cluster_, analytic_, options(4, 4, {1}, {Schedule::kDapple}));
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  EXPECT_EQ(report.candidates.size(), 6u);
  EXPECT_EQ(report.valid, 5);
  EXPECT_EQ(report.ok, 5);
  EXPECT_EQ(report.oom, 0);
  EXPECT_EQ(report.invalid, 1);
  const CandidateResult* cross = find(rows, "4M1P1D", 1);
  ASSERT_NE(cross, nullptr);
  EXPECT_EQ(cross->status, CandidateStatus::kInvalid);
  EXPECT_NE(cross->violation.find("cross nodes"), std::string::npos) << cross->violation;
  // Invalid ones come last; ok ones are ranked 1..5.
  EXPECT_EQ(rows.back().status, CandidateStatus::kInvalid);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rows[i].rank, i + 1);

  SearchOptions cross_ok = options(4, 4, {1}, {Schedule::kDapple});
  cross_ok.space.allow_cross_node_tp = true;
  SearchReport lifted = runSearch(model_, cluster_, analytic_, cross_ok);
  EXPECT_EQ(lifted.valid, 6);
  EXPECT_EQ(lifted.invalid, 0);
}

TEST_F(SearchTest, MicroBatchesAndSchedulesMultiply) {
  // 6 (M,P,D) x 4 micro-batch sizes x 2 schedules = 48 candidates. b*D must divide B = 4:
  //   D=4 (1,1,4): b=1 -> 1; D=2 (1,2,2), (2,1,2): b=1,2 -> 2 each; D=1 (1,4,1), (2,2,1): b=1,2,4
  //   -> 3 each; (4,1,1) crosses nodes. Valid = (1 + 2 + 2 + 3 + 3) x 2 schedules = 22.
  // GPipe and DAPPLE are one schedule where there is one micro-batch to order: at P = 1 ((1,1,4)
  // b=1, (2,1,2) b=1,2) and at m = 1 ((1,2,2) b=2, (1,4,1) b=4, (2,2,1) b=4): 6 GPipe plans join
  // their twin's row (equivalent_plans.h), 42 rows: the one with less memory stays the row, GPipe
  // (first in the space) where memory ties too.
  SearchReport report =
      runSearch(model_, cluster_, analytic_,
                options(4, 4, {1, 2, 4, 8}, {Schedule::kGpipe, Schedule::kDapple}));
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  EXPECT_EQ(report.total(), 48);
  EXPECT_EQ(report.valid, 22);
  EXPECT_EQ(report.invalid, 26);
  EXPECT_EQ(report.equivalent, 6);
  EXPECT_EQ(report.candidates.size(), 42u);
  for (const CandidateResult& r : rows) {
    if (r.equivalents.empty()) continue;
    const std::string twin = r.strategy.schedule == Schedule::kGpipe ? "dapple" : "gpipe";
    EXPECT_EQ(r.equivalents, std::vector<std::string>{twin});
    EXPECT_TRUE(r.strategy.pp == 1 || r.micro_batches == 1) << r.strategy.name();
  }
  // b=2 with D=4: 2*4 = 8 does not divide B = 4.
  const CandidateResult* batch = find(rows, "1M1P4D", 2);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->status, CandidateStatus::kInvalid);
  EXPECT_NE(batch->violation.find("not divisible by micro-batch x D"), std::string::npos)
      << batch->violation;
}

TEST_F(SearchTest, MorePipelineStagesThanLayersIsInvalid) {
  // N = 8 on 2-GPU nodes: (1,8,1) has P = 8 > 4 layers.
  SearchReport report =
      runSearch(model_, cluster_, analytic_, options(8, 8, {1}, {Schedule::kDapple}));
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  const CandidateResult* deep = find(rows, "1M8P1D", 1);
  ASSERT_NE(deep, nullptr);
  EXPECT_EQ(deep->status, CandidateStatus::kInvalid);
  EXPECT_NE(deep->violation.find("more than the 4 layers"), std::string::npos) << deep->violation;
  // (1,4,2) is fine.
  const CandidateResult* ok = find(rows, "1M4P2D", 1);
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->status, CandidateStatus::kOk);
}

TEST_F(SearchTest, OomJustOverTheLimitAndNotJustUnder) {
  // The tiny model with 2 layers on one GPU, b = 1, m = 1 (memory_model_test works it out):
  // peak = 18 * 134,912 + 260,352 + the embedding gradient 65,536 = 2,754,304 bytes (this device
  // file zeroes the workspace, context, NCCL and fragmentation). With no headroom:
  //   0.00256 GiB = 2,748,779 bytes < peak -> OOM;   0.00257 GiB = 2,759,516 bytes > peak -> ok.
  ModelConfig two = model_;
  two.blocks.resize(2);
  for (const auto& [gib, status] :
       {std::pair{"0.00256", CandidateStatus::kOom}, std::pair{"0.00257", CandidateStatus::kOk}}) {
    ClusterConfig cluster = parseClusterConfig(clusterYaml(1, gib), "limit.yaml");
    CostModel costs(cluster, nullptr, true);
    SearchOptions o = options(1, 1, {1}, {Schedule::kDapple});
    o.memory_headroom = 0;
    SearchReport report = runSearch(two, cluster, costs, o);
    const std::vector<CandidateResult> rows = report.candidates.toVector();
    ASSERT_EQ(report.candidates.size(), 1u);
    const CandidateResult& r = rows[0];
    EXPECT_EQ(r.status, status) << gib;
    EXPECT_EQ(r.peak_memory_bytes, 2'754'304);
    if (status == CandidateStatus::kOom) {
      EXPECT_EQ(report.oom, 1);
      EXPECT_EQ(r.iteration_us, 0);  // not simulated
      EXPECT_EQ(report.best(), nullptr);
    } else {
      EXPECT_GT(r.iteration_us, 0);
      ASSERT_NE(report.best(), nullptr);
      EXPECT_TRUE(*report.best() == r);
    }
  }
  // 10% headroom on 0.00257 GiB leaves 2,483,564 bytes: OOM again.
  ClusterConfig cluster = parseClusterConfig(clusterYaml(1, "0.00257"), "limit.yaml");
  CostModel costs(cluster, nullptr, true);
  SearchReport report = runSearch(two, cluster, costs, options(1, 1, {1}, {Schedule::kDapple}));
  EXPECT_EQ(report.candidates.toVector().at(0).status, CandidateStatus::kOom);
}

TEST_F(SearchTest, PipelineWinsOverDataParallelOnASlowNetwork) {
  // One GPU per node and a network of 0.001 GB/s (1 byte/us, no latency): every transfer crosses
  // it. N = 2, B = 2, b = 1: M = 2 would cross nodes, leaving 1M1P2D and 1M2P1D.
  //   1M1P2D all-reduces every gradient: 34,816 (embedding) + 4 * 49,984 (blocks) + 128 (final
  //     layernorm) = 234,880 params x 2 bytes x ring factor 2*(2-1)/2 = 469,760 bytes -> ~0.47 s.
  //   1M2P1D sends m = 2 activations forward and 2 gradients back, s*b*h*2 = 4,096 bytes each:
  //     16 KB -> ~16 ms at most.
  // Compute (microseconds at 100 TFLOP/s and 1000 GB/s) does not matter, so 1M2P1D ranks first,
  // more than 10x faster.
  ClusterConfig slow = parseClusterConfig(clusterYaml(1, "16", "0.001"), "slow.yaml");
  CostModel costs(slow, nullptr, true);
  SearchReport report = runSearch(model_, slow, costs, options(2, 2, {1}, {Schedule::kDapple}));
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  ASSERT_NE(report.best(), nullptr);
  EXPECT_EQ(report.best()->strategy.name(), "1M2P1D");
  EXPECT_EQ(report.best()->rank, 1);
  EXPECT_EQ(report.ok, 2);
  const CandidateResult* dp = find(rows, "1M1P2D", 1);
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->rank, 2);
  EXPECT_DOUBLE_EQ(report.timeVsBest(*report.best()), 1.0);
  EXPECT_GT(report.timeVsBest(*dp), 10.0);
  EXPECT_DOUBLE_EQ(report.best()->provenance_share[static_cast<int>(Provenance::kEstimated)], 1.0);
}

TEST_F(SearchTest, MissingEventsListedOnceWithTheHint) {
  ProfileDb empty;
  CostModel measured_only(cluster_, &empty, /*analytic_fallback=*/false);
  try {
    runSearch(model_, cluster_, measured_only, options(4, 4, {1}, {Schedule::kDapple}));
    FAIL() << "expected MissingCostsError";
  } catch (const MissingCostsError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("events have no cost"), std::string::npos) << what;
  }
}

TEST_F(SearchTest, BadOptionsAreInputErrors) {
  SearchOptions o = options(4, 4, {1}, {Schedule::kDapple});
  o.memory_headroom = 1.0;
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, o), InputError);
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, options(0, 4, {1}, {Schedule::kDapple})),
               InputError);
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, options(4, 4, {}, {Schedule::kDapple})),
               InputError);
}

// --- techniques (issue 6) ---------------------------------------------------------------------

TEST_F(SearchTest, TechniqueDimensionsMultiplyWhereTheyApply) {
  // N = 4, b = 1, B = 4, DAPPLE; recompute x3, SP off/on (on only at M >= 2), ZeRO 0..3 (> 0 only
  // at D >= 2): (1,1,4) 3*1*4 = 12, (1,2,2) 12, (1,4,1) 3, (2,1,2) 3*2*4 = 24, (2,2,1) 3*2 = 6,
  // (4,1,1) 6 (TP crosses nodes: invalid). 63 candidates, 57 valid, all fit.
  SearchOptions o = options(4, 4, {1}, {Schedule::kDapple});
  o.space.recomputes = {Recompute::kNone, Recompute::kFull, Recompute::kSelective};
  o.space.sequence_parallel = {false, true};
  o.space.zero_stages = {0, 1, 2, 3};
  SearchReport report = runSearch(model_, cluster_, analytic_, o);
  const std::vector<CandidateResult> rows = report.candidates.toVector();
  EXPECT_EQ(report.total(), 63);
  EXPECT_EQ(report.valid, 57);
  EXPECT_EQ(report.ok, 57);
  EXPECT_EQ(report.invalid, 6);
  // ZeRO-2 reduces its buckets in every micro-batch's backward (plan/zero2_buckets.h), ZeRO-1
  // once at the step: the same timeline only with one micro-batch and one bucket, at (1,1,4)
  // (m = B / (b D) = 1; DeepSpeed's 5e8-element bucket holds this tiny model), where its three
  // plans join their ZeRO-1 twins' rows (its 1e9-byte bucket outweighs the gradient shard it
  // saves); at (1,2,2) and (2,1,2), m = 2, they are rows of their own. ZeRO-3's per-layer
  // transfers outlast this tiny model's layers, and the prefetched transfers hide every block's
  // compute (plan/sharded_prefetch.h): at (1,2,2) and (1,1,4) the three recompute choices time
  // the same (2 + 2 join the full-recompute row, the least memory), and so do they at (2,1,2)
  // without SP, whose cross-node ZeRO-3 transfers, at the protocols NCCL's own model picks for
  // these small sizes (modeler/network/nccl_estimate.h), outlast every block too (2 more): 3 + 6.
  EXPECT_EQ(report.equivalent, 9);
  EXPECT_EQ(report.candidates.size(), 54u);
  int sp = 0, zero = 0;
  for (const CandidateResult& r : rows) {
    // The plans a row stands for count too: "dapple rc=full sp z1" is SP and ZeRO.
    for (const std::string& e : r.equivalents) {
      sp += e.find(" sp") != std::string::npos;
      zero += e.find(" z") != std::string::npos;
      if (r.strategy.zero_stage == 3) {
        EXPECT_NE(e.find(" z3"), std::string::npos) << e;  // another recompute choice
        continue;
      }
      EXPECT_EQ(r.strategy.zero_stage, 1) << e;
      EXPECT_NE(e.find(" z2"), std::string::npos) << e;
    }
    sp += r.strategy.sequence_parallel;
    zero += r.strategy.zero_stage > 0;
    if (r.strategy.sequence_parallel) {
      EXPECT_GE(r.strategy.tp, 2);
    }
    if (r.strategy.zero_stage > 0) {
      EXPECT_GE(r.strategy.dp, 2);
    }
  }
  EXPECT_EQ(sp, 12 + 3 + 3);    // (2,1,2) 3*4, (2,2,1) 3, (4,1,1) 3
  EXPECT_EQ(zero, 9 + 9 + 18);  // (1,1,4) 3*3, (1,2,2) 3*3, (2,1,2) 3*2*3
  // With the same costs, full recomputation adds a forward per block: never faster than none.
  const CandidateResult* none = nullptr;
  const CandidateResult* full = nullptr;
  for (const CandidateResult& r : rows) {
    const Strategy& st = r.strategy;
    if (st.name() != "1M2P2D" || st.zero_stage != 0) continue;
    if (st.recompute == Recompute::kNone) none = &r;
    if (st.recompute == Recompute::kFull) full = &r;
  }
  ASSERT_TRUE(none && full);
  EXPECT_GT(full->iteration_us, none->iteration_us);
  EXPECT_LT(full->peak_memory_bytes, none->peak_memory_bytes);
}

TEST_F(SearchTest, RowsSpilledToTheFileRankAsInMemory) {
  // The 63 candidates above, 4 rows in memory at a time (sorted runs, merged into one with the
  // 9 equivalent plans collapsed): the same 54 rows in the same order, field for field, as with
  // all of them in memory.
  SearchOptions o = options(4, 4, {1}, {Schedule::kDapple});
  o.space.recomputes = {Recompute::kNone, Recompute::kFull, Recompute::kSelective};
  o.space.sequence_parallel = {false, true};
  o.space.zero_stages = {0, 1, 2, 3};
  const SearchReport in_memory = runSearch(model_, cluster_, analytic_, o);
  o.rows_in_memory = 4;
  const SearchReport spilled = runSearch(model_, cluster_, analytic_, o);
  EXPECT_EQ(in_memory.candidates.spilledRuns(), 0u);
  EXPECT_EQ(spilled.candidates.spilledRuns(), 1u);
  EXPECT_EQ(spilled.equivalent, 9);
  const std::vector<CandidateResult> a = in_memory.candidates.toVector();
  const std::vector<CandidateResult> b = spilled.candidates.toVector();
  ASSERT_EQ(a.size(), 54u);
  ASSERT_EQ(b.size(), 54u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << i;
  EXPECT_EQ(a[47].rank, 48);  // the last ok row: 57 - 9
  EXPECT_EQ(a[48].status, CandidateStatus::kInvalid);
  ASSERT_NE(spilled.best(), nullptr);
  EXPECT_TRUE(*spilled.best() == a[0]);
}

TEST_F(SearchTest, InterleavedEnumeratesOnlyValidVirtualStages) {
  // 4 layers, N = 4, b = 1, B = 8, {dapple, interleaved}, v in {2, 3, 4}: interleaved needs P >= 2,
  // P*v <= 4 and m = 8/D a multiple of P. (1,2,2): m = 4, v = 2 only; (2,2,1): m = 8, v = 2 only;
  // (1,4,1): P*v >= 8 > 4, none; P = 1: none. 6 DAPPLE + 2 interleaved = 8.
  StrategySpace space;
  space.gpus = 4;
  space.micro_batches = {1};
  space.schedules = {Schedule::kDapple, Schedule::kInterleaved};
  space.virtual_stages = {2, 3, 4};
  Strategy base;
  base.global_batch = 8;
  std::vector<Candidate> all = enumerateCandidates(model_, cluster_, base, space);
  EXPECT_EQ(all.size(), 8u);
  std::vector<std::string> interleaved;
  for (const Candidate& c : all) {
    if (c.strategy.schedule != Schedule::kInterleaved) {
      EXPECT_EQ(c.strategy.virtual_stages, 1);
      continue;
    }
    EXPECT_FALSE(c.violation) << violationMessage(model_, cluster_, c.strategy, *c.violation);
    interleaved.push_back(c.strategy.name() + " v" + std::to_string(c.strategy.virtual_stages));
  }
  EXPECT_EQ(interleaved, (std::vector<std::string>{"1M2P2D v2", "2M2P1D v2"}));
  // B = 6: (1,2,2) has m = 3, not a multiple of P = 2; (2,2,1) m = 6 keeps v = 2.
  base.global_batch = 6;
  int count = 0;
  for (const Candidate& c : enumerateCandidates(model_, cluster_, base, space)) {
    count += c.strategy.schedule == Schedule::kInterleaved;
  }
  EXPECT_EQ(count, 1);
}

TEST_F(SearchTest, BadTechniqueOptionsAreInputErrors) {
  SearchOptions o = options(4, 4, {1}, {Schedule::kDapple});
  o.space.zero_stages = {4};
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, o), InputError);
  o.space.zero_stages = {};
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, o), InputError);
  o = options(4, 4, {1}, {Schedule::kDapple});
  o.space.virtual_stages = {1};
  EXPECT_THROW(runSearch(model_, cluster_, analytic_, o), InputError);
}

}  // namespace
}  // namespace evsim
