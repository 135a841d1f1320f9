// Activation recomputation, sequence parallelism and ZeRO in the op lists, against hand-computed
// op counts, FLOPs and message sizes.
//
// Tiny model: h = 256, a = 8 heads (d = 32), f = 4h = 1024, s = 64, vocabulary 1100, 2 decoder
// blocks, fp16 (e = 2); b = 2, so T = b*s = 128 tokens per micro-batch.

#include <gtest/gtest.h>

#include <string>

#include "plan/iteration_plan.h"
#include "plan/zero2_buckets.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::countOps;
using test::eventOf;
using test::findOp;

constexpr int64_t kH = 256, kHeads = 8, kF = 1024, kS = 64, kVocab = 1100, kB = 2, kLayers = 2;
constexpr int64_t kT = kB * kS;  // 128
constexpr int64_t kE = 2;        // fp16 bytes

Strategy withTechniques(const std::string& text, Recompute rc, bool sp, int zero,
                        int64_t global_batch = kB) {
  Strategy s = test::strategy(text, kB, global_batch);
  s.recompute = rc;
  s.sequence_parallel = sp;
  s.zero_stage = zero;
  return s;
}

IterationPlan plan(const Strategy& s) {
  return buildIterationPlan(test::model(kH, kHeads, kF, kS, kVocab, kLayers), test::cluster(8), s);
}

// Ops of `layer` in `ops`, optionally only the recomputed ones.
OpList layerOps(const OpList& ops, int layer, bool recomputed_only) {
  OpList out;
  for (const OpInstance& op : ops) {
    if (op.layer == layer && (!recomputed_only || op.recompute)) out.push_back(op);
  }
  return out;
}

double computeFlops(const IterationPlan& p, const OpList& ops) {
  double flops = 0;
  for (const OpInstance& op : ops) flops += eventOf(p, op).flops;
  return flops;
}

int countKind(const IterationPlan& p, const OpList& ops, EventKind kind) {
  int n = 0;
  for (const OpInstance& op : ops) n += eventOf(p, op).kind == kind;
  return n;
}

TEST(Recompute, FullReRunsEachBlockForwardInsideItsBackward) {
  for (int t : {1, 2}) {
    SCOPED_TRACE(t);
    const std::string text = std::to_string(t) + "M1P1D";
    IterationPlan base = plan(withTechniques(text, Recompute::kNone, false, 0));
    IterationPlan full = plan(withTechniques(text, Recompute::kFull, false, 0));
    const StagePlan& b = base.stages[0];
    const StagePlan& f = full.stages[0];
    EXPECT_EQ(f.forward.size(), b.forward.size());
    for (int layer = 0; layer < kLayers; ++layer) {
      OpList fwd = layerOps(b.forward, layer, false);
      OpList again = layerOps(f.backward, layer, true);
      // Exactly the block's forward ops (TP all-reduces included), same events, same order, and
      // first in the layer's backward.
      ASSERT_EQ(again.size(), fwd.size());
      for (size_t i = 0; i < fwd.size(); ++i) {
        EXPECT_EQ(again[i].event, fwd[i].event) << again[i].name;
        EXPECT_EQ(again[i].name, fwd[i].name);
      }
      EXPECT_TRUE(layerOps(f.backward, layer, false).front().recompute);
      EXPECT_EQ(layerOps(f.backward, layer, false).size(),
                layerOps(b.backward, layer, false).size() + fwd.size());
      // By hand, per block: GEMMs 2T(3h/t)h + 2T h(h/t) + 2T(f/t)h + 2T h(f/t) = 24 T h^2 / t,
      // bGEMMs 2 * 2 (b a/t) s s d = 4 b s^2 h / t, layernorms 2 * 8 T h, softmax 5 (b a/t) s^2,
      // attention dropout 2 (b a/t) s^2, GeLU 8 T f/t, dropouts 2 * 2 T h, adds 2 * T h.
      const double h = kH, T = kT, s = kS, bsz = kB, a = kHeads, ff = kF;
      const double expected = 24 * T * h * h / t + 4 * bsz * s * s * h / t + 16 * T * h +
                              7 * bsz * a * s * s / t + 8 * T * ff / t + 4 * T * h + 2 * T * h;
      EXPECT_DOUBLE_EQ(computeFlops(full, again), expected);
      EXPECT_EQ(countKind(full, again, EventKind::kAllReduce), t == 1 ? 0 : 2);
    }
    // Nothing else changes: embedding and head have no recomputation.
    EXPECT_EQ(
        f.backward.size(),
        b.backward.size() + (b.forward.size() - layerOps(b.forward, kEmbeddingLayer, false).size() -
                             layerOps(b.forward, kHeadLayer, false).size()));
  }
}

TEST(Recompute, SelectiveReRunsOnlyTheAttentionCore) {
  const int t = 2;
  IterationPlan base = plan(withTechniques("2M1P1D", Recompute::kNone, false, 0));
  IterationPlan sel = plan(withTechniques("2M1P1D", Recompute::kSelective, false, 0));
  for (int layer = 0; layer < kLayers; ++layer) {
    OpList again = layerOps(sel.stages[0].backward, layer, true);
    ASSERT_EQ(again.size(), 4u);
    EXPECT_EQ(again[0].name, "attn_scores");
    EXPECT_EQ(again[1].name, "scale_mask_softmax");
    EXPECT_EQ(again[2].name, "attn_dropout");
    EXPECT_EQ(again[3].name, "attn_values");
    EXPECT_EQ(again[0].event, findOp(base.stages[0].forward, "attn_scores", layer).event);
    // 2 (b a/t) s s d twice = 4 b s^2 h / t; softmax 5 and dropout 2 flops per score element.
    const double flops = 4.0 * kB * kS * kS * kH / t + 7.0 * kB * kHeads * kS * kS / t;
    EXPECT_DOUBLE_EQ(computeFlops(sel, again), flops);
    // Placed right before the attention core's backward (after the projection's wgrad).
    OpList all = layerOps(sel.stages[0].backward, layer, false);
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].name == "attn_values_dgrad_p") {
        ASSERT_GE(i, 5u);
        EXPECT_EQ(all[i - 1].name, "attn_values");
        EXPECT_TRUE(all[i - 1].recompute);
        EXPECT_EQ(all[i - 5].name, "attn_proj_wgrad");
      }
    }
  }
  EXPECT_EQ(sel.stages[0].backward.size(), base.stages[0].backward.size() + 4 * kLayers);
}

TEST(SequenceParallel, CollectivesBecomeReduceScatterAndAllGather) {
  const int t = 2;
  IterationPlan sp = plan(withTechniques("2M2P1D", Recompute::kNone, true, 0, 2 * kB));
  IterationPlan base = plan(withTechniques("2M2P1D", Recompute::kNone, false, 0, 2 * kB));
  const int64_t full_buffer = kT * kH * kE;  // nccl-tests convention: the unsharded s*b*h
  for (const StagePlan& stage : sp.stages) {
    for (int layer = stage.first_layer; layer < stage.first_layer + stage.num_layers; ++layer) {
      OpList fwd = layerOps(stage.forward, layer, false);
      OpList bwd = layerOps(stage.backward, layer, false);
      EXPECT_EQ(countKind(sp, fwd, EventKind::kAllReduce), 0);
      EXPECT_EQ(countKind(sp, fwd, EventKind::kReduceScatter), 2);  // after proj and fc2
      EXPECT_EQ(countKind(sp, fwd, EventKind::kAllGather), 2);      // before QKV and fc1
      // Backward: gradient all-gathers before proj and fc2, input re-gathers for the QKV and fc1
      // wgrads, input-gradient reduce-scatters after QKV and fc1.
      EXPECT_EQ(countKind(sp, bwd, EventKind::kAllGather), 4);
      EXPECT_EQ(countKind(sp, bwd, EventKind::kReduceScatter), 2);
      EXPECT_EQ(countKind(sp, bwd, EventKind::kAllReduce), 0);
      for (const OpInstance& op : fwd) {
        const Event& e = eventOf(sp, op);
        if (isCommunication(e.kind)) {
          EXPECT_EQ(e.message_bytes, full_buffer) << op.name;
          EXPECT_EQ(e.placement.group_size, t);
        }
      }
      // Element-wise regions shrink by t; GEMMs keep all T rows.
      EXPECT_EQ(eventOf(sp, findOp(fwd, "layernorm")).dim("rows"), kT / t);
      EXPECT_EQ(eventOf(sp, findOp(fwd, "dropout")).dim("elems"), kT * kH / t);
      EXPECT_EQ(eventOf(sp, findOp(fwd, "mlp_residual_add")).dim("elems"), kT * kH / t);
      EXPECT_EQ(eventOf(sp, findOp(bwd, "mlp_layernorm_bwd")).dim("rows"), kT / t);
      EXPECT_EQ(eventOf(sp, findOp(fwd, "qkv_gemm")).dim("m"), kT);
      EXPECT_EQ(
          eventOf(sp, findOp(fwd, "attn_scores")).flops,
          eventOf(base, findOp(layerOps(base.stages[0].forward, 0, false), "attn_scores")).flops);
      EXPECT_EQ(eventOf(sp, findOp(fwd, "qkv_input_allgather")).kind, EventKind::kAllGather);
      EXPECT_EQ(eventOf(sp, findOp(fwd, "fc2_reduce_scatter")).kind, EventKind::kReduceScatter);
    }
  }
  // Embedding output reduce-scattered; the head gathers before the LM head GEMM.
  EXPECT_EQ(eventOf(sp, findOp(sp.stages[0].forward, "embedding_reduce_scatter")).kind,
            EventKind::kReduceScatter);
  EXPECT_EQ(eventOf(sp, findOp(sp.stages[1].forward, "lm_head_input_allgather")).kind,
            EventKind::kAllGather);
  // Stage-to-stage activations are the s/t sequence shard.
  EXPECT_EQ(sp.stages[0].activation_bytes_out, kT * kH * kE / t);
  EXPECT_EQ(base.stages[0].activation_bytes_out, kT * kH * kE);
}

TEST(Zero, StageOneAndTwoReduceScatterThenGatherParameters) {
  for (int zero : {1, 2}) {
    for (bool overlap : {false, true}) {
      SCOPED_TRACE(std::to_string(zero) + (overlap ? " overlap" : ""));
      Strategy s = withTechniques("1M1P4D", Recompute::kNone, false, zero, 4 * kB);
      s.dp_overlap = overlap;
      s.dp_bucket_bytes = 1;  // a bucket per gradient (ZeRO-2), per layer (DDP)
      IterationPlan p = plan(s);
      const StagePlan& st = p.stages[0];
      EXPECT_EQ(st.dp_allreduce, -1);
      ASSERT_GE(st.dp_allgather, 0);
      const Event& gather = p.events[st.dp_allgather].event;
      EXPECT_EQ(gather.kind, EventKind::kAllGather);
      EXPECT_EQ(gather.message_bytes, st.parameters * kE);  // full buffer
      EXPECT_EQ(gather.placement.group_size, 4);
      if (zero == 2) {
        // DeepSpeed's stage 2 (plan/zero2_buckets.h): each bucket reduce-scattered in the
        // backward's op list, every micro-batch; nothing at the step but the gather. A bucket of
        // one element is reduced at every next gradient: per block its four wgrad GEMMs' weights
        // (FC2, FC1, projection, QKV) and its rest (biases, norms) after its last op, the head's
        // norm (whole: the tied output weight's wgrad is the embedding's), the embedding; the last
        // bucket by the epilogue: 5 per block + 2. Beside the backward until the next bucket with
        // overlap_comm, but the two after the backward's last op (the embedding's, the
        // epilogue's).
        EXPECT_EQ(st.dp_reduce_scatter, -1);
        EXPECT_TRUE(st.dp_buckets.empty());
        int64_t bytes = 0;
        int reductions = 0, beside = 0;
        for (const OpInstance& op : st.backward) {
          if (op.name != kZero2ReduceName) continue;
          ++reductions;
          beside += op.overlap_ops > 0;
          EXPECT_EQ(p.events[op.event].event.kind, EventKind::kReduceScatter);
          bytes += p.events[op.event].event.message_bytes;
        }
        EXPECT_EQ(reductions, 5 * kLayers + 2);
        EXPECT_EQ(bytes, st.parameters * kE);
        EXPECT_EQ(beside, overlap ? 5 * kLayers : 0);
      } else if (overlap) {
        EXPECT_EQ(st.dp_reduce_scatter, -1);
        ASSERT_EQ(st.dp_buckets.size(), static_cast<size_t>(kLayers + 2));
        int64_t bytes = 0;
        for (const GradBucket& b : st.dp_buckets) {
          EXPECT_EQ(p.events[b.event].event.kind, EventKind::kReduceScatter);
          bytes += p.events[b.event].event.message_bytes;
        }
        EXPECT_EQ(bytes, st.parameters * kE);
      } else {
        ASSERT_GE(st.dp_reduce_scatter, 0);
        EXPECT_EQ(st.gradSyncEvent(), st.dp_reduce_scatter);
        EXPECT_EQ(p.events[st.dp_reduce_scatter].event.kind, EventKind::kReduceScatter);
        EXPECT_EQ(p.events[st.dp_reduce_scatter].event.message_bytes, st.parameters * kE);
      }
      // The optimizer steps on a quarter of the parameters (rounded up).
      EXPECT_EQ(eventOf(p, st.optimizer[0]).dim("params"), (st.parameters + 3) / 4);
      EXPECT_EQ(test::countOf(p.events, gather.signature()), 4);  // once per DP rank
    }
  }
}

TEST(Zero, StageThreeGathersParametersPerLayerInsideTheTasks) {
  IterationPlan p = plan(withTechniques("1M1P2D", Recompute::kFull, false, 3, 2 * kB));
  IterationPlan base = plan(withTechniques("1M1P2D", Recompute::kFull, false, 0, 2 * kB));
  const StagePlan& st = p.stages[0];
  EXPECT_EQ(st.dp_allreduce, -1);
  EXPECT_EQ(st.dp_reduce_scatter, -1);
  EXPECT_EQ(st.dp_allgather, -1);
  EXPECT_TRUE(st.dp_buckets.empty());
  // Embedding, 2 blocks and the head: one gather each before forward, one gather before and one
  // reduce-scatter after each backward, all on the dp-comm stream.
  const int parts = kLayers + 2;
  EXPECT_EQ(countOps(st.forward, "zero3_param_allgather"), parts);
  EXPECT_EQ(countOps(st.backward, "zero3_param_allgather"), parts);
  EXPECT_EQ(countOps(st.backward, "zero3_grad_reduce_scatter"), parts);
  EXPECT_EQ(st.forward.size(), base.stages[0].forward.size() + parts);
  EXPECT_EQ(st.backward.size(), base.stages[0].backward.size() + 2 * parts);
  for (int layer = 0; layer < kLayers; ++layer) {
    OpList fwd = layerOps(st.forward, layer, false);
    OpList bwd = layerOps(st.backward, layer, false);
    EXPECT_EQ(fwd.front().name, "zero3_param_allgather");
    EXPECT_EQ(fwd.front().stream, Stream::kDpComm);
    // The gather precedes the recomputed forward; the gradient scatter closes the layer.
    EXPECT_EQ(bwd.front().name, "zero3_param_allgather");
    EXPECT_TRUE(bwd[1].recompute);
    EXPECT_EQ(bwd.back().name, "zero3_grad_reduce_scatter");
    // Block parameters per rank at t = 1: 4h^2 + 3h + h + 2hf + f + h + 4h.
    const int64_t params = 4 * kH * kH + 3 * kH + kH + 2 * kH * kF + kF + kH + 4 * kH;
    EXPECT_EQ(eventOf(p, fwd.front()).message_bytes, params * kE);
    EXPECT_EQ(eventOf(p, bwd.back()).kind, EventKind::kReduceScatter);
    EXPECT_EQ(eventOf(p, bwd.back()).message_bytes, params * kE);
  }
  // P = 1: one chunk holds both ends, so the LM head gathers the tied embedding matrix again
  // (with the final layernorm's 2h); its gradient reduce-scatter covers the layernorm only.
  const int64_t head_params = 2 * kH + p.padded_vocab * kH;
  OpList head_fwd = layerOps(st.forward, kHeadLayer, false);
  OpList head_bwd = layerOps(st.backward, kHeadLayer, false);
  ASSERT_FALSE(head_fwd.empty());
  ASSERT_FALSE(head_bwd.empty());
  EXPECT_EQ(head_fwd.front().name, "zero3_param_allgather");
  EXPECT_EQ(eventOf(p, head_fwd.front()).message_bytes, head_params * kE);
  EXPECT_EQ(eventOf(p, head_bwd.front()).message_bytes, head_params * kE);
  EXPECT_EQ(head_bwd.back().name, "zero3_grad_reduce_scatter");
  EXPECT_EQ(eventOf(p, head_bwd.back()).message_bytes, 2 * kH * kE);
  EXPECT_EQ(eventOf(p, st.optimizer[0]).dim("params"), (st.parameters + 1) / 2);
  // Prefetched (plan/sharded_prefetch.h): block 1's gather stands right before block 0's ops and
  // runs beside all of them; block 0's gradient scatter runs beside the embedding's backward.
  const OpList block0 = layerOps(st.forward, 0, false);
  for (size_t i = 0; i < st.forward.size(); ++i) {
    const OpInstance& op = st.forward[i];
    if (op.stream != Stream::kDpComm || op.layer != 1) continue;
    ASSERT_LT(i + 1, st.forward.size());
    EXPECT_EQ(st.forward[i + 1].layer, 0);
    EXPECT_EQ(op.overlap_ops, static_cast<int>(block0.size()) - 1);  // block 0 less its gather
  }
  const OpList embedding_bwd = layerOps(st.backward, kEmbeddingLayer, false);
  for (size_t i = 0; i < st.backward.size(); ++i) {
    const OpInstance& op = st.backward[i];
    if (op.name != "zero3_grad_reduce_scatter" || op.layer != 0) continue;
    // Beside the embedding's backward ops: less its regather (beside block 0's backward, before
    // this scatter) and its own scatter (exposed, last).
    EXPECT_EQ(op.overlap_ops, static_cast<int>(embedding_bwd.size()) - 2);
  }
}

}  // namespace
}  // namespace evsim
