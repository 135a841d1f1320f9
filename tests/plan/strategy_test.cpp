// Strategy text ("2M4P2D"), schedules, and the rules a strategy must meet for a model and cluster.
// Every rejection is an InputError whose one line names the flag, the value and the rule.

#include "plan/strategy.h"

#include <gtest/gtest.h>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::inputErrorOf;

Strategy parsed(const std::string& text) {
  Strategy s;
  parseStrategyText(text, s);
  return s;
}

TEST(StrategyText, AcceptsAnyCaseAndOrder) {
  for (const char* text : {"2M4P2D", "2m4p2d", "4P2D2M", "2D2M4P", " 2M4P2D "}) {
    SCOPED_TRACE(text);
    Strategy s = parsed(text);
    EXPECT_EQ(s.tp, 2);
    EXPECT_EQ(s.pp, 4);
    EXPECT_EQ(s.dp, 2);
    EXPECT_EQ(s.gpus(), 16);
    EXPECT_EQ(s.name(), "2M4P2D");
  }
  Strategy big = parsed("8M8P16D");
  EXPECT_EQ(big.gpus(), 1024);
  EXPECT_EQ(parsed("1M1P1D").name(), "1M1P1D");
}

TEST(StrategyText, RejectsMalformedTextNamingFlagAndText) {
  struct Case {
    const char* text;
    const char* rule;
  };
  for (const Case& c : {Case{"2M4P", "missing the D part"}, Case{"0M1P1D", "M must be > 0"},
                        Case{"2X4P2D", "expected the form 2M4P2D"}, Case{"2M2M1P", "M given twice"},
                        Case{"M4P2D", "expected the form"}, Case{"2M4P2D3", "expected the form"},
                        Case{"", "missing the M part"}, Case{"-2M4P2D", "expected the form"}}) {
    SCOPED_TRACE(c.text);
    Strategy s;
    std::string msg = inputErrorOf([&] { parseStrategyText(c.text, s); });
    EXPECT_CONTAINS(msg, std::string("--strategy '").append(c.text).append("'"));
    EXPECT_CONTAINS(msg, c.rule);
  }
  // The flag is the caller's: a strategy list in another command names its own flag.
  Strategy s;
  EXPECT_CONTAINS(inputErrorOf([&] { parseStrategyText("2M", s, "--strategies"); }),
                  "--strategies '2M'");
}

TEST(Schedule, ParsesKnownNamesAndRejectsOthers) {
  EXPECT_EQ(parseSchedule("gpipe"), Schedule::kGpipe);
  EXPECT_EQ(parseSchedule("GPipe"), Schedule::kGpipe);
  EXPECT_EQ(parseSchedule("dapple"), Schedule::kDapple);
  EXPECT_EQ(parseSchedule("1F1B"), Schedule::kDapple);
  EXPECT_EQ(scheduleName(Schedule::kDapple), "dapple");
  EXPECT_EQ(parseSchedule("Interleaved"), Schedule::kInterleaved);
  EXPECT_EQ(scheduleName(Schedule::kInterleaved), "interleaved");
  std::string msg = inputErrorOf([] { parseSchedule("pipedream"); });
  EXPECT_CONTAINS(msg, "--schedule 'pipedream'");
  EXPECT_CONTAINS(msg, "unknown schedule");
}

class StrategyRules : public ::testing::Test {
 protected:
  // BERT-Large shape (h 1024, 16 heads, f 4096) with 4 blocks, on 2 nodes x 4 GPUs = 8 GPUs.
  ModelConfig model_ = test::model(1024, 16, 4096, 128, 30522, 4);
  ClusterConfig cluster_ = test::cluster(4, 2);

  std::string violation(const std::string& text, int64_t b, int64_t B) {
    auto why = strategyViolation(model_, cluster_, test::strategy(text, b, B));
    return why.value_or("");
  }
};

TEST_F(StrategyRules, ValidStrategyHasNoViolation) {
  EXPECT_EQ(violation("2M2P2D", 2, 8), "");
  EXPECT_EQ(violation("8M1P1D", 1, 1), "");  // 8 GPUs on 2 nodes: allowed here, TP crosses nodes
  EXPECT_NO_THROW(validateStrategy(model_, cluster_, test::strategy("1M4P2D", 1, 2)));
}

TEST_F(StrategyRules, MMustDivideHeads) {
  std::string msg = violation("3M1P1D", 1, 1);
  EXPECT_CONTAINS(msg, "--strategy 3M1P1D");
  EXPECT_CONTAINS(msg, "M=3 does not divide num_heads=16");
  // buildIterationPlan validates first and throws the same line.
  EXPECT_EQ(
      inputErrorOf([&] { buildIterationPlan(model_, cluster_, test::strategy("3M1P1D", 1, 1)); }),
      msg);
}

// No test for "M does not divide hidden_size": a model needs num_heads | hidden_size, so any M
// dividing num_heads divides hidden_size too; that rule of strategyViolation cannot fire.
TEST_F(StrategyRules, MMustDivideFfnHiddenSize) {
  // odd-ffn: 4 heads, h 64, f 1001: M=2 divides heads and h, not f.
  ModelConfig odd = loadModelConfig(test::dataPath("models/odd-ffn.yaml"));
  auto why = strategyViolation(odd, cluster_, test::strategy("2M1P1D", 1, 1));
  ASSERT_TRUE(why.has_value());
  EXPECT_CONTAINS(*why, "--strategy 2M1P1D");
  EXPECT_CONTAINS(*why, "M=2 does not divide ffn_hidden_size=1001");
  EXPECT_FALSE(strategyViolation(odd, cluster_, test::strategy("1M1P1D", 1, 1)).has_value());
}

TEST_F(StrategyRules, PMustNotExceedLayers) {
  std::string msg = violation("1M8P1D", 1, 1);
  EXPECT_CONTAINS(msg, "--strategy 1M8P1D");
  EXPECT_CONTAINS(msg, "P=8 is more than the 4 layers");
  EXPECT_EQ(violation("1M4P2D", 1, 2), "");  // P equal to the layer count is fine
}

TEST_F(StrategyRules, GpusMustFitTheCluster) {
  std::string msg = violation("2M2P4D", 1, 4);
  EXPECT_CONTAINS(msg, "--strategy 2M2P4D");
  EXPECT_CONTAINS(msg, "needs 16 GPUs");
  EXPECT_CONTAINS(msg, "has 8 (2 nodes x 4)");
  // A cluster without a node count has no limit.
  EXPECT_FALSE(strategyViolation(model_, test::cluster(4), test::strategy("2M2P4D", 1, 4)));
}

TEST_F(StrategyRules, GlobalBatchMustBeAMultipleOfMicroBatchTimesD) {
  std::string msg = violation("1M1P4D", 2, 12);  // 12 % (2*4) = 4
  EXPECT_CONTAINS(msg, "--global-batch 12");
  EXPECT_CONTAINS(msg, "2 x 4 = 8");
  EXPECT_EQ(violation("1M1P4D", 2, 16), "");
  EXPECT_CONTAINS(violation("1M1P4D", 8, 4), "--global-batch 4");  // B smaller than b*D
  EXPECT_CONTAINS(violation("1M1P1D", 0, 4), "--micro-batch 0");
  EXPECT_CONTAINS(violation("1M1P1D", 1, 0), "--global-batch 0");
  EXPECT_EQ(test::strategy("1M1P4D", 2, 16).microBatches(), 2);
}

TEST(Recompute, ParsesKnownNamesAndRejectsOthers) {
  EXPECT_EQ(parseRecompute("none"), Recompute::kNone);
  EXPECT_EQ(parseRecompute("FULL"), Recompute::kFull);
  EXPECT_EQ(parseRecompute("selective"), Recompute::kSelective);
  EXPECT_EQ(recomputeName(Recompute::kSelective), "selective");
  std::string msg = inputErrorOf([] { parseRecompute("partial"); });
  EXPECT_CONTAINS(msg, "--recompute 'partial'");
  EXPECT_CONTAINS(msg, "none, full, selective or selective-op");
}

TEST_F(StrategyRules, InterleavedNeedsVirtualStagesPipelineAndMicroBatchMultipleOfP) {
  Strategy s = test::strategy("1M2P1D", 1, 4);  // m = 4
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = 2;  // 2 x 2 = 4 chunks of 4 layers
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  EXPECT_EQ(s.techniques(), " v2");

  s.virtual_stages = 1;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""), "needs v >= 2");
  s.virtual_stages = 3;  // 6 chunks, 4 layers
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "P x v = 6 model chunks but");
  s.virtual_stages = 128;  // the task graph's byte send codes hold 127 chunks a device
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "--virtual-stages 128: at most 127 model chunks per device");
  s.virtual_stages = 2;
  s.global_batch = 3;  // m = 3, not a multiple of P = 2
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "m = B/(b*D) = 3 micro-batches is not a multiple of P=2");
  Strategy one_stage = test::strategy("1M1P1D", 1, 4);
  one_stage.schedule = Schedule::kInterleaved;
  one_stage.virtual_stages = 2;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, one_stage).value_or(""), "needs P >= 2");
  Strategy dapple = test::strategy("1M2P1D", 1, 4);
  dapple.virtual_stages = 2;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, dapple).value_or(""),
                  "--virtual-stages 2: only with --schedule interleaved");
}

TEST_F(StrategyRules, MicrobatchGroupFollowsMegatronsTableRules) {
  // 1M2P1D, v = 2, m = B/(b*D) = 5: Megatron's own example (schedules.py: "PP2 N3M5 with VP2"):
  // groups of N = 3 leave a last group of 2 >= P = 2.
  Strategy s = test::strategy("1M2P1D", 1, 5);
  s.schedule = Schedule::kInterleaved;
  s.virtual_stages = 2;
  // Without N, m must be a multiple of P (N = P's table).
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "m = B/(b*D) = 5 micro-batches is not a multiple of P=2");
  s.microbatch_group = 3;
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  EXPECT_EQ(s.techniques(), " v2 n3");
  s.microbatch_group = 4;  // 5 = 4 + 1: a last group of 1 < P
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "leave a last group of 1, which must be 0 or >= P=2");
  s.microbatch_group = 6;  // more than m
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "--microbatch-group-size 6: more than the m = B/(b*D) = 5 micro-batches");
  s.microbatch_group = 1;  // N < P: Megatron's range is [P, m]
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "--microbatch-group-size 1: fewer than P=2");
  Strategy dapple = test::strategy("1M2P1D", 1, 4);
  dapple.microbatch_group = 2;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, dapple).value_or(""),
                  "--microbatch-group-size 2: only with --schedule interleaved");
}

TEST_F(StrategyRules, SequenceParallelNeedsTensorParallelismDividingTheSequence) {
  Strategy s = test::strategy("2M1P1D", 1, 1);
  s.sequence_parallel = true;
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  EXPECT_EQ(s.techniques(), " sp");
  Strategy no_tp = test::strategy("1M1P1D", 1, 1);
  no_tp.sequence_parallel = true;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, no_tp).value_or(""), "needs M >= 2");
}

// FSDP2's wrapping (--fsdp-wrap): separate by default (torchtitan since 2025-07), root named in
// the techniques and refused outside FSDP; which groups are gathered again for the backward.
TEST_F(StrategyRules, FsdpWrapIsFsdpsAndSaysWhatIsGatheredAgain) {
  Strategy s = test::strategy("1M1P2D", 1, 2);
  EXPECT_EQ(s.fsdp_wrap, FsdpWrap::kSeparate);
  s.fsdp_wrap = FsdpWrap::kRoot;
  EXPECT_EQ(strategyViolation(model_, cluster_, s).value_or(""),
            "--fsdp-wrap root: only with --framework fsdp");
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  EXPECT_EQ(s.techniques(), " fsdp wrap=root");
  // Root, default policy, no PP: blocks gathered again but the last; the head never.
  EXPECT_TRUE(s.reshardsAfterForward());
  EXPECT_FALSE(s.reshardsLastBlockAfterForward());
  EXPECT_FALSE(s.reshardsHeadAfterForward());
  s.reshard = Reshard::kAlways;
  EXPECT_TRUE(s.reshardsLastBlockAfterForward());
  EXPECT_FALSE(s.reshardsHeadAfterForward());
  // Separate: the last block as every block; [norm, output] only under "always".
  s.fsdp_wrap = FsdpWrap::kSeparate;
  EXPECT_EQ(s.techniques(), " fsdp reshard=always");
  EXPECT_TRUE(s.reshardsHeadAfterForward());
  s.reshard = Reshard::kDefault;
  EXPECT_TRUE(s.reshardsLastBlockAfterForward());
  EXPECT_FALSE(s.reshardsHeadAfterForward());
  EXPECT_EQ(parseFsdpWrap(" ROOT "), FsdpWrap::kRoot);
  EXPECT_EQ(fsdpWrapName(FsdpWrap::kSeparate), "separate");
}

TEST_F(StrategyRules, ZeroNeedsDataParallelismAndAKnownStage) {
  Strategy s = test::strategy("1M1P2D", 1, 2);
  s.zero_stage = 3;
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  EXPECT_EQ(s.techniques(), " zero3");
  s.zero_stage = 4;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""),
                  "--zero 4: must be 0, 1, 2 or 3");
  s.zero_stage = 3;
  s.dp_overlap = true;  // ZeRO-3 has no DDP buckets
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, s).value_or(""), "--zero 3 --dp-overlap");
  s.zero_stage = 1;  // ZeRO-1 overlaps its bucketed reduce-scatters
  EXPECT_FALSE(strategyViolation(model_, cluster_, s).has_value());
  Strategy single = test::strategy("1M1P1D", 1, 1);
  single.zero_stage = 1;
  EXPECT_CONTAINS(strategyViolation(model_, cluster_, single).value_or(""), "needs D x C >= 2");
}

}  // namespace
}  // namespace evsim
