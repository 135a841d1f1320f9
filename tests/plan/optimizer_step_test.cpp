// What a step adds by framework (plan/optimizer_step.h): Megatron's bf16 gradients reduced in
// fp32 while the ZeRO parameter gathers stay 16-bit; fp16 unchanged; FSDP's foreach AdamW and
// clip_grad_norm_ as memory passes with their bytes counted by hand.
#include "plan/optimizer_step.h"

#include <gtest/gtest.h>

#include <string>

#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

constexpr int64_t kH = 256, kHeads = 8, kF = 1024, kS = 64, kVocab = 1100, kB = 2, kLayers = 2;

IterationPlan plan(const std::string& dtype, int zero, bool overlap, bool param_gather = false,
                   bool grad_reduce_in_bf16 = false) {
  Strategy s = test::strategy("1M1P4D", kB, 4 * kB);
  s.grad_reduce_in_bf16 = grad_reduce_in_bf16;
  s.zero_stage = zero;
  s.dp_overlap = overlap;
  s.overlap_param_gather = param_gather;
  s.dp_bucket_bytes = 1;  // a bucket per layer
  return buildIterationPlan(test::model(kH, kHeads, kF, kS, kVocab, kLayers, dtype),
                            test::cluster(8), s);
}

int64_t bucketBytes(const IterationPlan& p, const StagePlan& st, DType wire = DType::kFp32) {
  int64_t bytes = 0;
  for (const GradBucket& b : st.dp_buckets) {
    EXPECT_EQ(p.events[b.event].event.dtype, wire);
    bytes += p.events[b.event].event.message_bytes;
    EXPECT_EQ(b.bytes, p.events[b.event].event.message_bytes);
  }
  return bytes;
}

TEST(GradReduceDtype, MegatronReducesBf16GradientsInFp32) {
  EXPECT_EQ(dataParallelGradDtype(Framework::kMegatron, DType::kBf16, false), DType::kFp32);
  EXPECT_EQ(dataParallelGradDtype(Framework::kMegatron, DType::kFp16, false), DType::kFp16);
  EXPECT_EQ(dataParallelGradDtype(Framework::kFsdp, DType::kBf16, false), DType::kBf16);
  // --grad-reduce-in-bf16 (grad_reduce_in_fp32 = False in NeMo's performance recipes).
  EXPECT_EQ(dataParallelGradDtype(Framework::kMegatron, DType::kBf16, true), DType::kBf16);
}

TEST(GradReduceDtype, GradReduceInBf16SendsTwoBytesAParameter) {
  const IterationPlan p = plan("bf16", 0, false, false, /*grad_reduce_in_bf16=*/true);
  const Event& e = p.events[p.stages[0].dp_allreduce].event;
  EXPECT_EQ(e.message_bytes, p.stages[0].parameters * 2);
  EXPECT_EQ(e.dtype, DType::kBf16);
  // ZeRO-1: the buckets scatter 2 bytes a parameter and the gather is the same 2 bytes.
  const IterationPlan z = plan("bf16", 1, true, false, true);
  EXPECT_EQ(bucketBytes(z, z.stages[0], DType::kBf16), z.stages[0].parameters * 2);
  EXPECT_EQ(z.events[z.stages[0].dp_allgather].event.message_bytes, z.stages[0].parameters * 2);
}

TEST(GradReduceDtype, Bf16AllReduceSendsFourBytesAParameter) {
  const IterationPlan p = plan("bf16", 0, false);
  const StagePlan& st = p.stages[0];
  ASSERT_GE(st.dp_allreduce, 0);
  const Event& e = p.events[st.dp_allreduce].event;
  EXPECT_EQ(e.message_bytes, st.parameters * 4);  // fp32, not 2 bytes
  EXPECT_EQ(e.dtype, DType::kFp32);
  // fp16 (vTrain's Megatron-DeepSpeed runs) keeps 2 bytes a parameter.
  const IterationPlan h = plan("fp16", 0, false);
  EXPECT_EQ(h.events[h.stages[0].dp_allreduce].event.message_bytes, h.stages[0].parameters * 2);
}

TEST(GradReduceDtype, ZeroOneScattersFp32BucketsAndGathersBf16Parameters) {
  for (bool param_gather : {false, true}) {
    SCOPED_TRACE(param_gather ? "overlap-param-gather" : "gather after the step");
    const IterationPlan p = plan("bf16", 1, true, param_gather);
    const StagePlan& st = p.stages[0];
    // Embedding, 2 blocks, head: a bucket each; 4 bytes per parameter in all.
    ASSERT_EQ(st.dp_buckets.size(), static_cast<size_t>(kLayers + 2));
    EXPECT_EQ(bucketBytes(p, st), st.parameters * 4);
    if (param_gather) {
      ASSERT_EQ(st.param_buckets.size(), st.dp_buckets.size());
      int64_t gathered = 0;
      for (size_t i = 0; i < st.param_buckets.size(); ++i) {
        // Forward order is the buckets' reverse; each gathers half its fp32 gradient's bytes.
        const GradBucket& g = st.dp_buckets[st.dp_buckets.size() - 1 - i];
        const Event& e = p.events[st.param_buckets[i].event].event;
        EXPECT_EQ(e.message_bytes * 2, g.bytes);
        EXPECT_EQ(st.param_buckets[i].bytes, e.message_bytes);
        EXPECT_EQ(e.dtype, DType::kBf16);
        gathered += e.message_bytes;
      }
      EXPECT_EQ(gathered, st.parameters * 2);
    } else {
      ASSERT_GE(st.dp_allgather, 0);
      EXPECT_EQ(p.events[st.dp_allgather].event.message_bytes, st.parameters * 2);
      EXPECT_EQ(p.events[st.dp_allgather].event.dtype, DType::kBf16);
    }
  }
}

TEST(FrameworkStepOps, MegatronKeepsTheFusedAdam) {
  const std::vector<StepOp> ops =
      frameworkStepOps(1000, DType::kBf16, Offload::kNone, Framework::kMegatron,
                       OptimizerImpl::kFused);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].event.op, "adam");
  EXPECT_EQ(ops[0].event.dim("params"), 1000);
  // An offloaded step is the host's whatever the framework.
  EXPECT_EQ(frameworkStepOps(1000, DType::kBf16, Offload::kOptimizer, Framework::kFsdp,
                             OptimizerImpl::kFused)
                .size(),
            optimizerStepOps(1000, DType::kBf16, Offload::kOptimizer).size());
}

TEST(FrameworkStepOps, FsdpRunsForeachAdamWAndClipGradNormAsMemoryPasses) {
  const int64_t n = 1000;
  const std::vector<StepOp> ops = frameworkStepOps(n, DType::kBf16, Offload::kNone,
                                                   Framework::kFsdp, OptimizerImpl::kForeach);
  // clip_grad_norm_: norm (read g), scale (read g, write g); then AdamW's eight foreach kernels.
  ASSERT_EQ(ops.size(), 10u);
  EXPECT_EQ(ops[0].name, "grad_norm");
  EXPECT_EQ(ops[0].event.dim("read_bytes"), 4 * n);
  EXPECT_EQ(ops[0].event.dim("write_bytes"), 4);  // the norms: counted as one fp32
  EXPECT_EQ(ops[1].name, "grad_clip_scale");
  EXPECT_EQ(ops[1].event.dim("read_bytes"), 4 * n);
  EXPECT_EQ(ops[1].event.dim("write_bytes"), 4 * n);
  // p*=; m.lerp_(g); v*=; v.addcmul_(g, g); sqrt(v); d/=; d+=eps; p.addcdiv_(m, d):
  // reads 1+2+1+2+1+1+1+3 = 12, writes 8, fp32: 80 bytes a parameter against the fused 28.
  int64_t read = 0, write = 0;
  for (size_t i = 2; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].event.op, "memory_pass");
    EXPECT_EQ(ops[i].stream, Stream::kCompute);
    read += ops[i].event.dim("read_bytes");
    write += ops[i].event.dim("write_bytes");
  }
  EXPECT_EQ(read, 12 * 4 * n);
  EXPECT_EQ(write, 8 * 4 * n);
  EXPECT_EQ(ops[9].name, "adamw_param_addcdiv");
}

TEST(FrameworkStepOps, FsdpFusedAdamWIsOnePassOfSevenFp32Elements) {
  // torch._fused_adamw_ (FusedAdamMathFunctor, depth 4): p, g, m, v loaded, p, m, v stored;
  // clip_grad_norm_ stays foreach. n = 1000: reads 4 x 4 x 1000 = 16,000 bytes, writes 12,000.
  const int64_t n = 1000;
  const std::vector<StepOp> ops =
      frameworkStepOps(n, DType::kBf16, Offload::kNone, Framework::kFsdp, OptimizerImpl::kFused);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].name, "grad_norm");
  EXPECT_EQ(ops[1].name, "grad_clip_scale");
  EXPECT_EQ(ops[2].name, "adamw_fused");
  EXPECT_EQ(ops[2].event.op, "memory_pass");
  EXPECT_EQ(ops[2].stream, Stream::kCompute);
  EXPECT_EQ(ops[2].event.dim("read_bytes"), 16000);
  EXPECT_EQ(ops[2].event.dim("write_bytes"), 12000);
  // The whole step, clip included: (1 + 1 + 4) reads and (1 + 3) writes of 4 bytes, + the norm.
  int64_t bytes = 0;
  for (const StepOp& op : ops) bytes += op.event.dim("read_bytes") + op.event.dim("write_bytes");
  EXPECT_EQ(bytes, 40000 + 4);
}

TEST(FrameworkStepOps, OptimizerImplIsParsedAndRefusedWhereNotModelled) {
  EXPECT_EQ(parseOptimizerImpl("fused"), OptimizerImpl::kFused);
  EXPECT_EQ(parseOptimizerImpl("Foreach"), OptimizerImpl::kForeach);
  EXPECT_EQ(parseOptimizerImpl("for-loop"), OptimizerImpl::kForLoop);
  EXPECT_THROW(parseOptimizerImpl("apex"), InputError);
  const ModelConfig m = test::model(kH, kHeads, kF, kS, kVocab, kLayers, "bf16");
  Strategy s = test::strategy("1M1P4D", kB, 4 * kB);
  s.optimizer_impl = OptimizerImpl::kForeach;  // Megatron: its fused Adam only
  ASSERT_TRUE(strategyViolation(m, test::cluster(8), s).has_value());
  EXPECT_NE(strategyViolation(m, test::cluster(8), s)->find("--optimizer-impl foreach"),
            std::string::npos);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  EXPECT_FALSE(strategyViolation(m, test::cluster(8), s).has_value());
  s.optimizer_impl = OptimizerImpl::kForLoop;
  ASSERT_TRUE(strategyViolation(m, test::cluster(8), s).has_value());
  EXPECT_NE(strategyViolation(m, test::cluster(8), s)->find("for-loop: not modelled"),
            std::string::npos);
}

TEST(FrameworkStepOps, TheFsdpPlanStepsItsShardWithTheFusedKernelByDefault) {
  Strategy s = test::strategy("1M1P4D", kB, 4 * kB);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  const IterationPlan p = buildIterationPlan(
      test::model(kH, kHeads, kF, kS, kVocab, kLayers, "bf16"), test::cluster(8), s);
  const StagePlan& st = p.stages[0];
  ASSERT_EQ(st.optimizer.size(), 3u);
  const int64_t shard = (st.parameters + 3) / 4;
  EXPECT_EQ(test::eventOf(p, st.optimizer[2]).dim("read_bytes"), 16 * shard);
  EXPECT_EQ(test::eventOf(p, st.optimizer[2]).dim("write_bytes"), 12 * shard);
}

TEST(FrameworkStepOps, TheFsdpPlanStepsItsShardWithTheForeachKernels) {
  Strategy s = test::strategy("1M1P4D", kB, 4 * kB);
  s.framework = Framework::kFsdp;
  s.zero_stage = 3;
  s.optimizer_impl = OptimizerImpl::kForeach;
  const IterationPlan p = buildIterationPlan(
      test::model(kH, kHeads, kF, kS, kVocab, kLayers, "bf16"), test::cluster(8), s);
  const StagePlan& st = p.stages[0];
  ASSERT_EQ(st.optimizer.size(), 10u);
  const int64_t shard = (st.parameters + 3) / 4;
  EXPECT_EQ(test::eventOf(p, st.optimizer[0]).dim("read_bytes"), 4 * shard);
  EXPECT_EQ(test::eventOf(p, st.optimizer[9]).dim("read_bytes"), 12 * shard);
}

}  // namespace
}  // namespace evsim
