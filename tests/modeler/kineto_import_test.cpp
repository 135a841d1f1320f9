// import-kineto's reading and matching (modeler/kineto/) against a real PyTorch profiler trace
// (tests/data/kineto/tiny_gpt_cpu_step.json, made by scripts/kineto/make_fixture.py: one CPU
// training step of tiny-gpt, b=2) and a small GPU trace written here. Expected times are read off
// the fixture by hand (the ops named in each test, with the dims given).

#include <gtest/gtest.h>

#include "common/error.h"
#include "config/cluster_config.h"
#include "config/model_config.h"
#include "modeler/cli/eventprof_hint.h"
#include "modeler/kineto/kineto_comm.h"
#include "modeler/kineto/kineto_match.h"
#include "modeler/kineto/kineto_trace.h"
#include "plan/iteration_plan.h"
#include "support/test_support.h"

namespace evsim {
namespace {

IterationPlan tinyGptPlan() {
  return buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-gpt")),
                            loadClusterConfig(test::configPath("clusters", "cpu-local")),
                            test::strategy("1M1P1D", 2, 2));
}

const ProfileRecord& record(const KinetoImport& result, const std::string& signature) {
  const ProfileRecord* r = result.db.find(signature);
  if (r == nullptr) ADD_FAILURE() << "no record " << signature;
  static const ProfileRecord none;
  return r ? *r : none;
}

TEST(KinetoImport, CpuTraceOfTinyGptMatchesItsEventsByOpAndShape) {
  const KinetoTrace trace = loadKinetoTrace(test::dataPath("kineto/tiny_gpt_cpu_step.json"));
  EXPECT_FALSE(trace.has_device_kernels);
  const IterationPlan plan = tinyGptPlan();
  const KinetoImport result = matchKinetoTrace(trace, plan.events);
  ASSERT_EQ(plan.events.size(), 34);
  // QKV projection: the 4 aten::addmm with Input Dims [[192], [64, 64], [64, 192]], the weight
  // a transposed view (strides [1, 64]): 132.407, 94.677, 55.173, 66.545 us -> median of the
  // middle two (66.545 + 94.677) / 2 = 80.611.
  const ProfileRecord& qkv = record(result, "gemm m=64 n=192 k=64 layout=nt dtype=fp32");
  EXPECT_EQ(qkv.time.count, 4);
  EXPECT_NEAR(qkv.time.median_us, 80.611, 1e-9);
  EXPECT_NEAR(qkv.time.min_us, 55.173, 1e-9);
  EXPECT_NEAR(qkv.time.max_us, 132.407, 1e-9);
  // aten::mm [[64, 64], [64, 256]]: 4 with the first operand a transposed view (strides
  // [1, 64]: a weight gradient, "tn") and 4 without (FC2's input gradient, "nn").
  EXPECT_EQ(record(result, "gemm m=64 n=256 k=64 layout=tn dtype=fp32").time.count, 4);
  EXPECT_EQ(record(result, "gemm m=64 n=256 k=64 layout=nn dtype=fp32").time.count, 4);
  // The head's weight gradient: mm [[512, 64], [64, 64]], 216.084 us, the only one.
  const ProfileRecord& head_wgrad = record(result, "gemm m=512 n=64 k=64 layout=tn dtype=fp32");
  EXPECT_EQ(head_wgrad.time.count, 1);
  EXPECT_NEAR(head_wgrad.time.median_us, 216.084, 1e-9);
  // 9 aten::layer_norm (2 per layer + the final one), median 43.461 us.
  const ProfileRecord& ln = record(result, "layernorm_fwd rows=64 cols=64 dtype=fp32");
  EXPECT_EQ(ln.time.count, 9);
  EXPECT_NEAR(ln.time.median_us, 43.461, 1e-9);
  EXPECT_NEAR(ln.time.min_us, 22.261, 1e-9);
  // Adam: the Optimizer.step#Adam.step annotation over all 234,880 parameters.
  const ProfileRecord& adam = record(result, "adam params=234880 dtype=fp32");
  EXPECT_EQ(adam.time.count, 1);
  EXPECT_NEAR(adam.time.median_us, 98552.166, 1e-6);
  EXPECT_NEAR(
      record(result, "embedding_fwd tokens=64 hidden=64 vocab=512 dtype=fp32").time.median_us,
      252.972, 1e-9);
  EXPECT_NEAR(record(result, "cross_entropy_fwd rows=64 cols=512 dtype=fp32").time.median_us,
              132.958, 1e-9);
  // PyTorch's CPU dropout backward is a plain multiply (MulBackward0): not matched, and said.
  EXPECT_EQ(result.db.records().size(), 32u);
  EXPECT_EQ(result.not_measured, (std::vector<std::string>{"dropout_bwd elems=4096 dtype=fp32",
                                                           "dropout_bwd elems=8192 dtype=fp32"}));
  bool masked_fill_listed = false;
  for (const KinetoUnmatched& u : result.unmatched) {
    if (u.what.rfind("aten::masked_fill_ [[2, 4, 32, 32], [32, 32], []]", 0) == 0) {
      masked_fill_listed = u.count == 8 && u.reason == "no eventsim op";
    }
  }
  EXPECT_TRUE(masked_fill_listed);
  EXPECT_GT(result.matched_us, 0.5 * result.total_us);
  EXPECT_EQ(result.matched_ops, 136);
  // All but the optimizer step and the embedding backward (its vocabulary is not an input).
  EXPECT_EQ(result.shape_matched_ops, 134);
}

TEST(KinetoImport, WrongStrategyMatchesNothingOfThatShape) {
  // The trace is of micro-batch 2: with b = 1 no GEMM has its shape.
  const IterationPlan plan = buildIterationPlan(
      loadModelConfig(test::configPath("models", "tiny-gpt")),
      loadClusterConfig(test::configPath("clusters", "cpu-local")), test::strategy("1M1P1D", 1, 1));
  const KinetoImport result = matchKinetoTrace(
      loadKinetoTrace(test::dataPath("kineto/tiny_gpt_cpu_step.json")), plan.events);
  for (const ProfileRecord& r : result.db.records()) EXPECT_NE(r.event.op, "gemm") << r.signature;
  // What does not depend on b still matches: the optimizer step over the same parameters.
  EXPECT_NE(result.db.find("adam params=234880 dtype=fp32"), nullptr);
}

// A GPU trace: aten::mm launching two kernels (7.5 + 2.5 us of device time) inside 50 us of host
// time, and an NCCL kernel whose launch is not in the trace.
constexpr const char* kGpuTrace = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
   "args": {"Input Dims": [[64, 64], [64, 192]], "Input Strides": [[64, 1], [1, 64]],
            "Input type": ["float", "float"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110,
   "dur": 5, "args": {"correlation": 7}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120,
   "dur": 5, "args": {"correlation": 8}},
  {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 130, "dur": 7.5,
   "args": {"correlation": 7}},
  {"ph": "X", "cat": "kernel", "name": "splitk_reduce", "pid": 0, "tid": 7, "ts": 140, "dur": 2.5,
   "args": {"correlation": 8}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0,
   "tid": 8, "ts": 150, "dur": 40, "args": {"correlation": 99}}
]})";

TEST(KinetoImport, GpuKernelsAreChargedToTheirLaunchingOp) {
  const KinetoTrace trace = parseKinetoTrace(kGpuTrace, "gpu.json");
  ASSERT_TRUE(trace.has_device_kernels);
  const KinetoImport result = matchKinetoTrace(trace, tinyGptPlan().events);
  const ProfileRecord& gemm = record(result, "gemm m=64 n=192 k=64 layout=nt dtype=fp32");
  EXPECT_EQ(gemm.time.count, 1);
  EXPECT_DOUBLE_EQ(gemm.time.median_us, 10.0);  // 7.5 + 2.5, not the op's 50 us on the host
  ASSERT_EQ(result.unmatched.size(), 1u);
  EXPECT_EQ(result.unmatched[0].what, "kernel ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_DOUBLE_EQ(result.unmatched[0].total_us, 40.0);
}

// NCCL collectives (tests/data/kineto/nccl_collectives_gpu.json: rank 0 of tiny-gpt 2M1P2D, b=2,
// B=4, on cpu-local's 2 nodes x 2 GPUs; how it was built is in its fixtureNote). The plan's
// communication events, by hand:
//   TP all-reduce of s b h = 32 x 2 x 64 fp32 = 16,384 bytes over ranks {0, 1} (one node);
//   cross-entropy all-reduce of s b = 64 fp32 = 256 bytes, same group;
//   gradient all-reduce over DP ranks {0, 2} (two nodes): 119,296 parameters per TP rank (word
//   embedding 512/2 x 64 = 16,384, positions 32 x 64 = 2,048, final layer norm 128, per block
//   ln 2 x 128, qkv 64 x 96 + 96, proj 64 x 32 + 64, fc1 64 x 128 + 128, fc2 128 x 64 + 64 =
//   25,184, x 4 blocks) x 4 bytes = 477,184 bytes.
IterationPlan tinyGptTpDpPlan() {
  return buildIterationPlan(loadModelConfig(test::configPath("models", "tiny-gpt")),
                            loadClusterConfig(test::configPath("clusters", "cpu-local")),
                            test::strategy("2M1P2D", 2, 4));
}

const KinetoUnmatched* unmatchedStarting(const KinetoImport& result, const std::string& what) {
  for (const KinetoUnmatched& u : result.unmatched) {
    if (u.what.rfind(what, 0) == 0) return &u;
  }
  ADD_FAILURE() << "not listed as unmatched: " << what;
  return nullptr;
}

TEST(KinetoImport, NcclCollectivesBecomeMeasuredCommunicationEvents) {
  const KinetoTrace trace = loadKinetoTrace(test::dataPath("kineto/nccl_collectives_gpu.json"));
  ASSERT_TRUE(trace.has_device_kernels);
  const IterationPlan plan = tinyGptTpDpPlan();
  const KinetoImport result = matchKinetoTrace(trace, plan.events, /*gpus_per_node=*/2);
  // The two TP all-reduces' kernels: 9.5 and 10.5 us (not their 30 us on the host).
  const ProfileRecord& tp =
      record(result, "allreduce bytes=16384 group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_EQ(tp.time.count, 2);
  EXPECT_DOUBLE_EQ(tp.time.median_us, 10.0);
  const ProfileRecord& dp =
      record(result, "allreduce bytes=477184 group=2 nodes=2 rpn=1 dtype=fp32");
  EXPECT_EQ(dp.time.count, 1);
  EXPECT_DOUBLE_EQ(dp.time.median_us, 120.0);
  EXPECT_EQ(dp.measured_group_size, 2);
  EXPECT_EQ(dp.measuredPlacement(), (Placement{2, 2, 1}));  // the run's own group (session 15)
  EXPECT_NEAR(dp.algbw_gb_s, 477184 / 120e3, 1e-9);  // bytes / us / 1e3 = GB/s
  EXPECT_NEAR(dp.busbw_gb_s, dp.algbw_gb_s, 1e-9);   // all-reduce of 2: 2 (2-1) / 2 = 1
  // The kernel whose launch is not in the trace, matched by its own args.
  const ProfileRecord& ce = record(result, "allreduce bytes=256 group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_EQ(ce.time.count, 1);
  EXPECT_DOUBLE_EQ(ce.time.median_us, 3.0);
  EXPECT_EQ(result.db.records().size(), 3u);
  EXPECT_EQ(result.matched_collectives, 4);
  EXPECT_DOUBLE_EQ(result.collective_us, 9.5 + 10.5 + 120 + 3);
  // Listed: the all-gather (full buffer 4,096 x 4 bytes), the TP-sized all-reduce over ranks 1 and
  // 3 (two nodes: no such event), the send (the plan has no pipeline).
  const KinetoUnmatched* ag = unmatchedStarting(
      result, "_allgather_base 4096xFloat group 2 [0, 1] (allgather bytes=16384 group=2)");
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->reason, "not an event of the plan");
  EXPECT_DOUBLE_EQ(ag->total_us, 5.0);
  const KinetoUnmatched* across =
      unmatchedStarting(result, "allreduce 4096xFloat group 2 [1, 3] (allreduce bytes=16384");
  ASSERT_NE(across, nullptr);
  EXPECT_DOUBLE_EQ(across->total_us, 30.0);
  const KinetoUnmatched* send =
      unmatchedStarting(result, "send 4096xFloat group 4 [0, 1, 2, 3] (p2p bytes=16384 group=2)");
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(send->reason, "not an event of the plan");
  EXPECT_EQ(result.unmatched.size(), 3u);
}

TEST(KinetoImport, WithoutGpusPerNodeACollectiveMatchesItsOnlyPlacement) {
  const KinetoImport result =
      matchKinetoTrace(loadKinetoTrace(test::dataPath("kineto/nccl_collectives_gpu.json")),
                       tinyGptTpDpPlan().events, /*gpus_per_node=*/0);
  // Ranks 1 and 3 are not placed: the plan's only 16,384-byte all-reduce takes its 30 us too.
  const ProfileRecord& tp =
      record(result, "allreduce bytes=16384 group=2 nodes=1 rpn=2 dtype=fp32");
  EXPECT_EQ(tp.time.count, 3);
  EXPECT_DOUBLE_EQ(tp.time.median_us, 10.5);
  EXPECT_EQ(result.matched_collectives, 5);
}

TEST(KinetoImport, CollectiveNamesAndTruncatedRanks) {
  // PyTorch shortens long rank lists: "[64, 65, 66, ...]" for 8 ranks is 64..71.
  const KinetoTrace trace = parseKinetoTrace(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 0,
     "dur": 5, "args": {"Collective name": "reduce_scatter_tensor_coalesced",
     "In msg nelems": 1024, "Out msg nelems": 128, "Group size": 8, "dtype": "BFloat16",
     "Process Group Ranks": "[64, 66, 68, ...]"}}]})",
                                             "t.json");
  ASSERT_TRUE(trace.ops[0].collective);
  const KinetoCollective& c = *trace.ops[0].collective;
  EXPECT_EQ(c.ranks, (std::vector<int64_t>{64, 66, 68, 70, 72, 74, 76, 78}));
  EXPECT_EQ(c.group_size, 8);
  EventTable table;
  const int rs = table.intern(
      makeCommunication(EventKind::kReduceScatter, 2048, Placement{8, 2, 4}, DType::kBf16));
  // Full buffer 1,024 x 2 bytes; ranks 64..78 step 2 on 8-GPU nodes: nodes 8 and 9, 4 each.
  const KinetoCollectiveMatch m = matchKinetoCollective(c, table, 8);
  EXPECT_EQ(m.events, std::vector<int>{rs});
  // A CPU-only trace's host time is not the collective's: listed, not matched.
  const KinetoImport cpu = matchKinetoTrace(trace, table, 8);
  EXPECT_EQ(cpu.matched_collectives, 0);
  ASSERT_EQ(cpu.unmatched.size(), 1u);
  EXPECT_EQ(cpu.unmatched[0].reason, "host time only (the trace has no GPU kernels)");
  // An "init" record (nelems 0) is no eventsim collective, said as such.
  const KinetoTrace init = parseKinetoTrace(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 0,
     "dur": 5, "args": {"Collective name": "init", "In msg nelems": 0, "Out msg nelems": 0,
     "Group size": 8, "dtype": "Byte"}}]})",
                                            "t.json");
  const KinetoImport init_result = matchKinetoTrace(init, table, 8);
  ASSERT_EQ(init_result.unmatched.size(), 1u);
  EXPECT_EQ(init_result.unmatched[0].reason, "no eventsim collective");
  // barrier is no eventsim collective.
  KinetoCollective barrier = c;
  barrier.name = "barrier";
  EXPECT_EQ(matchKinetoCollective(barrier, table, 8).reason, "no eventsim collective");
}

TEST(KinetoImport, BadTracesAreOneLineNamingTheFile) {
  EXPECT_THROW(parseKinetoTrace("{not json", "t.json"), InputError);
  try {
    parseKinetoTrace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1,
                        "dur": 1}]})",
                     "t.json");
    FAIL() << "no CPU ops accepted";
  } catch (const InputError& e) {
    EXPECT_TRUE(test::containsText(e.what(), "t.json: no CPU ops"));
  }
  try {
    parseKinetoTrace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm"}]})",
                     "t.json");
    FAIL() << "an op without ts accepted";
  } catch (const InputError& e) {
    EXPECT_TRUE(test::containsText(e.what(), "t.json: traceEvents[0] (aten::mm): no numeric 'ts'"));
  }
  EXPECT_THROW(parseKinetoTrace(R"({"events": []})", "t.json"), InputError);
}

TEST(EventprofHint, CpuMachinesGetTheCpuBackendsFlags) {
  EXPECT_EQ(eventprofCommand("--model m -o p.yaml", "/opt/es/bin/eventprof", /*has_gpu=*/true),
            "mpirun -np 4 /opt/es/bin/eventprof --model m -o p.yaml");
  EXPECT_EQ(eventprofCommand("--model m -o p.yaml", "build/profiler/eventprof", false),
            "mpirun --oversubscribe -np 4 build/profiler/eventprof --model m -o p.yaml "
            "--backend cpu --ranks-per-node 2");
  EXPECT_EQ(eventprofPath(""), "eventprof");
  EXPECT_EQ(eventprofPath("/no/such/folder"), "eventprof");
}

}  // namespace
}  // namespace evsim
