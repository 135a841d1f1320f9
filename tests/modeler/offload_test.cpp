// Offload to host memory (issue 14): the task timing rule for ops that run beside later ones,
// traced by hand; the offload ops a plan gets and their sizes by hand; the host-link and CPU Adam
// costs of the device model by hand; the device and host memory by hand; and the simulated
// iteration moved by exactly the exposed copies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/iteration_plan.h"
#include "modeler/cost_model.h"
#include "modeler/device_model.h"
#include "modeler/memory_model.h"
#include "modeler/op_offsets.h"
#include "modeler/simulation.h"
#include "support/test_support.h"

namespace evsim {
namespace {

// --- the timing rule (op_offsets.h) --------------------------------------------------------------

// One op per entry: its time, the ops it runs beside, its stream; every host cost `host_us`.
struct TestOp {
  double time_us;
  int beside = 0;
  Stream stream = Stream::kCompute;
};

struct Traced {
  double end_us = 0;
  std::vector<double> starts;
};

Traced trace(const std::vector<TestOp>& spec, double host_us = 0,
             const std::vector<bool>& selected = {}) {
  OpList ops;
  for (size_t i = 0; i < spec.size(); ++i) {
    OpInstance op;
    op.event = static_cast<int>(i);
    op.stream = spec[i].stream;
    op.overlap_ops = spec[i].beside;
    ops.push_back(op);
  }
  Traced out;
  out.starts.assign(ops.size(), -1);
  out.end_us = opOffsets(
      ops, [&](const OpInstance& op) { return selected.empty() || selected[op.event]; },
      [&](const OpInstance& op) {
        return std::pair{host_us, spec[op.event].time_us};
      },
      [&](size_t i, double start) { out.starts[i] = start; });
  return out;
}

TEST(OffloadTiming, AnOpBesideTheNextTwoHoldsTheThird) {
  // A 0-10; X (25, beside B and C) 10-35; B 10-20; C 20-30; D waits for X: 35-40.
  const Traced t = trace({{10}, {25, 2, Stream::kHost}, {10}, {10}, {5}});
  EXPECT_EQ(t.starts, (std::vector<double>{0, 10, 10, 20, 35}));
  EXPECT_DOUBLE_EQ(t.end_us, 40);
}

TEST(OffloadTiming, CopiesOfOneStreamRunOneAtATime) {
  // A 0-10; X1 (15, beside B) 10-25; B 10-20; X1 is released at X2: the device waits for it, and
  // X2 runs on the same link after it: 25-40, beside C, which starts at 25 too: 25-35. The task
  // ends with X2 at 40. (Activation offload: layer l+2 waits for layer l's copy.)
  const Traced t = trace({{10}, {15, 1, Stream::kHost}, {10}, {15, 1, Stream::kHost}, {10}});
  EXPECT_EQ(t.starts, (std::vector<double>{0, 10, 10, 25, 25}));
  EXPECT_DOUBLE_EQ(t.end_us, 40);
}

TEST(OffloadTiming, ALayerWaitsForItsPrefetch) {
  // Backward: X 0-10 with the prefetch P (15) of the next layer beside it; P is released at the
  // next prefetch Q (beside Y), so Y waits for P: P 0-15, X 0-10, Q 15-16, Y 15-16; Z, released
  // with Q, waits for it: 16-26.
  const Traced t = trace({{15, 1, Stream::kHost}, {10}, {1, 1, Stream::kHost}, {1}, {10}});
  EXPECT_EQ(t.starts, (std::vector<double>{0, 0, 15, 15, 16}));
  EXPECT_DOUBLE_EQ(t.end_us, 26);
}

TEST(OffloadTiming, AnInOrderOpOfTheStreamWaitsForItsCopies) {
  // A 0-10; X (20, beside B) 10-30; B 10-20; Y, in order on the same link, starts at 30: 30-34.
  const Traced t = trace({{10}, {20, 1, Stream::kHost}, {10}, {4, 0, Stream::kHost}});
  EXPECT_EQ(t.starts, (std::vector<double>{0, 10, 10, 30}));
  EXPECT_DOUBLE_EQ(t.end_us, 34);
}

TEST(OffloadTiming, HostIssueAndUnselectedOps) {
  // Host 3 per op. A: issued 3, 3-13; X (25, beside B and C): issued 6, 13-38; B is not in this
  // task; C: issued 9, 13-23; D (index 4, X's release): issued 12, waits for X: 38-43.
  const Traced t =
      trace({{10}, {25, 2, Stream::kHost}, {10}, {10}, {5}}, 3, {true, true, false, true, true});
  EXPECT_EQ(t.starts, (std::vector<double>{3, 13, -1, 13, 38}));
  EXPECT_DOUBLE_EQ(t.end_us, 43);
}

TEST(OffloadTiming, ACopyOutlastingTheTaskEndsIt) {
  // A 0-10; X (50, beside B) 10-60; B 10-15: the task ends with X.
  const Traced t = trace({{10}, {50, 1, Stream::kHost}, {5}});
  EXPECT_DOUBLE_EQ(t.end_us, 60);
}

// --- configs and plans -----------------------------------------------------------------------

// h = 256, a = 8, f = 1024, s = 64, V = 1100, 2 blocks, fp16; 8 GPUs per node with a host side:
// a 10 GB/s, 4 us host link and 80 GB/s of host memory per node (10 GB/s per GPU).
ModelConfig model() { return test::model(256, 8, 1024, 64, 1100, 2, "fp16"); }

std::string hostYaml(double link_gb_s = 10, double latency_us = 4, int host_gib = 64) {
  return "  host_link: {name: PCIe, bandwidth_gb_s: " + std::to_string(link_gb_s) +
         ", latency_us: " + std::to_string(latency_us) +
         "}\n  host_memory: {gib: " + std::to_string(host_gib) + ", bandwidth_gb_s: 80}\n";
}

ClusterConfig clusterWithHost(const std::string& host = hostYaml()) {
  std::string yaml = test::clusterYaml(8, 1, test::kSlowLinks);
  yaml.insert(yaml.find("network:"), host);
  return parseClusterConfig(yaml, "test-cluster-with-host");
}

Strategy strategy(const std::string& text, Offload offload, int zero = 0, bool overlap = false) {
  Strategy s = test::strategy(text, 2, 2 * (text.find("2D") != std::string::npos ? 2 : 1));
  s.offload = offload;
  s.zero_stage = zero;
  s.dp_overlap = overlap;
  return s;
}

// The op list without its host-link copies.
OpList withoutCopies(const OpList& ops) {
  OpList out;
  for (const OpInstance& op : ops) {
    if (op.stream != Stream::kHost) out.push_back(op);
  }
  return out;
}

void expectSameOps(const IterationPlan& a, const OpList& x, const IterationPlan& b,
                   const OpList& y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].name, y[i].name) << i;
    EXPECT_EQ(x[i].layer, y[i].layer) << i;
    EXPECT_EQ(a.events[x[i].event].signature, b.events[y[i].event].signature) << i;
  }
}

TEST(OffloadConfig, HostSideIsReadAndRequiredForOffload) {
  const ClusterConfig c = clusterWithHost();
  ASSERT_TRUE(c.host_link && c.host_memory);
  EXPECT_DOUBLE_EQ(c.host_link->bandwidth_gb_s, 10);
  EXPECT_DOUBLE_EQ(c.host_memory->gib, 64);
  EXPECT_CONTAINS(test::inputErrorOf([] { clusterWithHost("  host_memory: {gib: 1, tb: 2}\n"); }),
                  "tb");
  // A cluster without a host side refuses offload with the rule, and names the keys.
  const ClusterConfig bare = test::cluster(8, 1, test::kSlowLinks);
  const std::optional<std::string> why =
      strategyViolation(model(), bare, strategy("1M1P1D", Offload::kOptimizer));
  ASSERT_TRUE(why);
  EXPECT_CONTAINS(*why, "--offload optimizer: cluster test-cluster has no host side");
  EXPECT_CONTAINS(*why, "host_link and host_memory");
  // Activation offload with a split backward is not modelled.
  Strategy zb = strategy("1M2P1D", Offload::kActivations);
  zb.schedule = Schedule::kZbh1;
  zb.global_batch = 4;  // m = 2 >= P
  ASSERT_TRUE(strategyViolation(model(), c, zb));
  EXPECT_CONTAINS(*strategyViolation(model(), c, zb), "not modelled");
  EXPECT_EQ(parseOffload("Both"), Offload::kBoth);
  EXPECT_CONTAINS(test::inputErrorOf([] { parseOffload("gpu"); }), "--offload 'gpu'");
}

TEST(OffloadPlan, ActivationCopiesFollowEachLayerAndPrefetchBeforeIt) {
  const ModelConfig m = model();
  const ClusterConfig c = clusterWithHost();
  const IterationPlan none = buildIterationPlan(m, c, strategy("1M1P1D", Offload::kNone));
  const IterationPlan off = buildIterationPlan(m, c, strategy("1M1P1D", Offload::kActivations));
  const StagePlan& a = none.stages[0];
  const StagePlan& b = off.stages[0];
  // Nothing else changes.
  expectSameOps(none, a.forward, off, withoutCopies(b.forward));
  expectSameOps(none, a.backward, off, withoutCopies(b.backward));
  // Layers in forward order: embedding, block 0, block 1, head; each one's ops in the plain list.
  const std::vector<int> layers = {kEmbeddingLayer, 0, 1, kHeadLayer};
  std::map<int, int> forward_ops, backward_ops;
  std::map<int, int64_t> saved;
  for (const OpInstance& op : a.forward) ++forward_ops[op.layer], saved[op.layer] += op.saved_bytes;
  for (const OpInstance& op : a.backward) ++backward_ops[op.layer];
  // A block keeps s*b*h*(34 + 5as/h) = 32768 * 44 bytes (Korthikanti, t = 1): 720896 fp16 elements.
  EXPECT_EQ(saved[0], 32768 * 44);
  // Forward: after each layer's ops, its copy beside the next layer's ops (the head's: none).
  size_t i = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    i += forward_ops[layers[l]];
    ASSERT_LT(i, b.forward.size());
    const OpInstance& copy = b.forward[i++];
    EXPECT_EQ(copy.name, "activation_offload");
    EXPECT_EQ(copy.layer, layers[l]);
    EXPECT_EQ(copy.overlap_ops, l + 1 < layers.size() ? forward_ops[layers[l + 1]] : 0);
    EXPECT_EQ(off.events[copy.event].signature,
              "offload_d2h elems=" + std::to_string((saved[layers[l]] + 1) / 2) + " dtype=fp16");
  }
  EXPECT_EQ(i, b.forward.size());
  // Backward (head, block 1, block 0, embedding): the head's prefetch first, in order; then each
  // layer's prefetch beside the backward of the layer before it.
  EXPECT_EQ(b.backward[0].name, "activation_prefetch");
  EXPECT_EQ(b.backward[0].layer, kHeadLayer);
  EXPECT_EQ(b.backward[0].overlap_ops, 0);
  i = 1;
  for (size_t l = layers.size(); l-- > 0;) {
    if (l > 0) {
      const OpInstance& prefetch = b.backward[i++];
      EXPECT_EQ(prefetch.name, "activation_prefetch");
      EXPECT_EQ(prefetch.layer, layers[l - 1]);
      EXPECT_EQ(prefetch.overlap_ops, backward_ops[layers[l]]);
      EXPECT_EQ(
          off.events[prefetch.event].signature,
          "offload_h2d elems=" + std::to_string((saved[layers[l - 1]] + 1) / 2) + " dtype=fp16");
    }
    i += backward_ops[layers[l]];
  }
  EXPECT_EQ(i, b.backward.size());
}

TEST(OffloadPlan, BucketsStillCloseAfterTheSameOps) {
  const ModelConfig m = model();
  const ClusterConfig c = clusterWithHost();
  const IterationPlan none =
      buildIterationPlan(m, c, strategy("1M1P2D", Offload::kNone, 0, /*overlap=*/true));
  const IterationPlan off =
      buildIterationPlan(m, c, strategy("1M1P2D", Offload::kActivations, 0, true));
  const StagePlan& a = none.stages[0];
  const StagePlan& b = off.stages[0];
  ASSERT_EQ(a.dp_buckets.size(), b.dp_buckets.size());
  ASSERT_FALSE(a.dp_buckets.empty());
  for (size_t k = 0; k < a.dp_buckets.size(); ++k) {
    const OpInstance& x = a.backward[a.dp_buckets[k].ready_after_op];
    const OpInstance& y = b.backward[b.dp_buckets[k].ready_after_op];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.layer, y.layer);
  }
}

TEST(OffloadPlan, OptimizerStepGoesThroughTheHost) {
  const ModelConfig m = model();
  const IterationPlan plan =
      buildIterationPlan(m, clusterWithHost(), strategy("1M1P2D", Offload::kOptimizer, 1));
  const StagePlan& stage = plan.stages[0];
  // ZeRO-1 over D = 2: the rank's shard is ceil(parameters / 2).
  const int64_t shard = (stage.parameters + 1) / 2;
  ASSERT_EQ(stage.optimizer.size(), 3u);
  for (const OpInstance& op : stage.optimizer) EXPECT_EQ(op.stream, Stream::kHost);
  EXPECT_EQ(plan.events[stage.optimizer[0].event].signature,
            "offload_d2h elems=" + std::to_string(shard) + " dtype=fp32");
  EXPECT_EQ(plan.events[stage.optimizer[1].event].signature,
            "cpu_adam params=" + std::to_string(shard) + " dtype=fp32");
  EXPECT_EQ(plan.events[stage.optimizer[2].event].signature,
            "offload_h2d elems=" + std::to_string(shard) + " dtype=fp16");
}

// --- costs -----------------------------------------------------------------------------------

TEST(OffloadCosts, HostLinkCopyAndHostAdamByHand) {
  const ClusterConfig c = clusterWithHost();
  const DeviceModel dm(c);
  // 10^6 fp16 elements = 2 MB over 10 GB/s (10^4 bytes/us) after 4 us: 204 us.
  EXPECT_DOUBLE_EQ(
      dm.estimateUs(makeCompute("offload_d2h", {{"elems", 1000000}}, "", DType::kFp16)), 204);
  // CPU Adam moves 7 fp32 words per parameter (28 MB for 10^6) through the node's 80 GB/s shared
  // by 8 GPUs (10 GB/s each): 2800 us.
  EXPECT_DOUBLE_EQ(dm.estimateUs(makeCompute("cpu_adam", {{"params", 1000000}}, "", DType::kFp32)),
                   2800);
  const ClusterConfig no_host = test::cluster(8);
  const DeviceModel bare(no_host);
  EXPECT_CONTAINS(test::inputErrorOf([&] {
                    bare.estimateUs(makeCompute("offload_h2d", {{"elems", 8}}, "", DType::kFp16));
                  }),
                  "has no node.host_link");
}

// --- memory ----------------------------------------------------------------------------------

TEST(OffloadMemory, StateBytesPerParameterByHand) {
  // Mixed precision, D = 4: the device keeps w + g = 6 (ZeRO 0/1), 2 + 4/4 = 3 (ZeRO-2),
  // 6/4 = 1.5 (ZeRO-3); the host o + 4 = 16, sharded under ZeRO >= 1: 4.
  const double device[] = {6, 6, 3, 1.5}, host[] = {16, 4, 4, 4};
  for (int z = 0; z <= 3; ++z) {
    EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kBf16, z, 4, true), device[z]) << z;
    EXPECT_DOUBLE_EQ(hostStateBytesPerParameter(DType::kBf16, z, 4), host[z]) << z;
  }
  // fp32: 4 + 4 on the device, 8 + 4 on the host.
  EXPECT_DOUBLE_EQ(modelStateBytesPerParameter(DType::kFp32, 0, 1, true), 8);
  EXPECT_DOUBLE_EQ(hostStateBytesPerParameter(DType::kFp32, 0, 1), 12);
}

TEST(OffloadMemory, DeviceAndHostBytesByHand) {
  // One stage, GPipe, m = 8 micro-batches in flight; 1000 parameters, 100 activation bytes per
  // micro-batch of which the largest layer holds 30; 8 GPUs per node; no headroom.
  const ModelConfig m = model();
  auto estimate = [&](Offload offload, int64_t host_bytes) {
    Strategy s = test::strategy("1M1P1D", 1, 8);
    s.schedule = Schedule::kGpipe;
    s.offload = offload;
    ChunkMemoryInput chunk;
    chunk.parameters = 1000;
    chunk.activation_bytes = 100;
    chunk.largest_layer_bytes = 30;
    MemoryOverheads none;  // no workspace, context, NCCL or fragmentation: the sums below
    for (SourcedValue* v : {&none.cuda_context_mib, &none.cublas_workspace_mib,
                            &none.nccl_mib_per_communicator, &none.allocator_fragmentation}) {
      v->value = 0;
    }
    return estimateMemory(m, s, 8, 1 << 20, {chunk}, 0.0, HostCapacity{host_bytes, 8}, none);
  };
  // Beside states and activations, the one stage holds the word embedding's fp16 gradient at its
  // backward, 2 x V x h = 2 x 1152 (1100 padded to 128) x 256 (memory_components.h), larger than
  // the loss's 2 x s x V = 147,456.
  const int64_t grad = 2 * 1152 * 256;
  MemoryEstimate none = estimate(Offload::kNone, 0);
  EXPECT_EQ(none.peak_bytes, 18 * 1000 + 8 * 100 + grad);
  EXPECT_EQ(none.host_peak_bytes, 0);
  EXPECT_TRUE(none.fits());
  // Activations: two of the largest layer's on the device, the 8 micro-batches' on the host (x 8
  // GPUs per node).
  MemoryEstimate act = estimate(Offload::kActivations, 1 << 20);
  EXPECT_EQ(act.peak_bytes, 18 * 1000 + 2 * 30 + grad);
  EXPECT_EQ(act.stages[0].host_activation_bytes, 800);
  EXPECT_EQ(act.host_peak_bytes, 8 * 800);
  // Optimizer (ZeRO 0): 6 bytes per parameter on the device, 16 on the host.
  MemoryEstimate opt = estimate(Offload::kOptimizer, 1 << 20);
  EXPECT_EQ(opt.peak_bytes, 6 * 1000 + 800 + grad);
  EXPECT_EQ(opt.stages[0].host_state_bytes, 16 * 1000);
  EXPECT_EQ(opt.host_peak_bytes, 8 * 16000);
  // Both, against 100,000 bytes of host memory: the device fits, the node's host does not.
  MemoryEstimate both = estimate(Offload::kBoth, 100000);
  EXPECT_EQ(both.peak_bytes, 6 * 1000 + 60 + grad);
  EXPECT_EQ(both.host_peak_bytes, 8 * (16000 + 800));
  EXPECT_TRUE(both.fitsDevice());
  EXPECT_FALSE(both.fitsHost());
  EXPECT_FALSE(both.fits());
}

// --- the simulated iteration -----------------------------------------------------------------

Simulation simulated(const ClusterConfig& c, const Strategy& s) {
  IterationPlan plan = buildIterationPlan(model(), c, s);
  CostModel costs(c, nullptr, true);
  std::vector<EventCost> event_costs = costs.costAll(plan.events);
  return simulate(std::move(plan), std::move(event_costs));
}

double issuedSum(const Simulation& sim, const OpList& ops) {
  double t = 0;
  for (const OpInstance& op : ops) t += sim.costs[op.event].host_us + sim.costs[op.event].time_us;
  return t;
}

TEST(OffloadSimulation, OptimizerOffloadAddsItsStepAfterThePipeline) {
  // One stage, one replica: the optimizer step follows the pipeline, so the iteration moves by
  // the new step (copy out, CPU Adam, copy back) less the GPU's Adam.
  const ClusterConfig c = clusterWithHost();
  const Simulation none = simulated(c, strategy("1M1P1D", Offload::kNone));
  const Simulation off = simulated(c, strategy("1M1P1D", Offload::kOptimizer));
  const double gpu_step = issuedSum(none, none.plan.stages[0].optimizer);
  const double host_step = issuedSum(off, off.plan.stages[0].optimizer);
  EXPECT_NEAR(off.summary.iteration_us - none.summary.iteration_us, host_step - gpu_step, 1e-6);
  // All of the step is off the GPU: exposed offload time, not compute.
  EXPECT_NEAR(off.summary.max_device.exposed_offload_us, host_step, 1e-6);
  EXPECT_NEAR(off.summary.max_device.compute_us, none.summary.max_device.compute_us - gpu_step,
              1e-6);
}

TEST(OffloadSimulation, HiddenActivationCopiesCostOnlyTheHeadsRoundTrip) {
  // On a link fast enough that each block's copy hides behind the next layer, only the head's
  // copy out (last in its forward) and back (first in its backward) are exposed.
  const ClusterConfig c = clusterWithHost(hostYaml(1e6, 0));
  const Simulation none = simulated(c, strategy("1M1P1D", Offload::kNone));
  const Simulation off = simulated(c, strategy("1M1P1D", Offload::kActivations));
  const StagePlan& stage = off.plan.stages[0];
  const double head_out = off.costs[stage.forward.back().event].time_us;
  const double head_in = off.costs[stage.backward.front().event].time_us;
  ASSERT_EQ(stage.forward.back().layer, kHeadLayer);
  ASSERT_EQ(stage.backward.front().layer, kHeadLayer);
  EXPECT_GT(head_out, 0);
  EXPECT_NEAR(off.summary.iteration_us - none.summary.iteration_us, head_out + head_in, 1e-6);
  EXPECT_NEAR(off.summary.max_device.exposed_offload_us, head_out + head_in, 1e-6);
  // Offloading moves the activations to the host: less device memory.
  EXPECT_LT(estimateMemory(off.plan).peak_bytes, estimateMemory(none.plan).peak_bytes);
}

}  // namespace
}  // namespace evsim
