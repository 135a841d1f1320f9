#include "modeler/memory_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/units.h"
#include "modeler/schedule.h"

namespace evsim {

namespace {

constexpr int64_t kMaskBytes = 1;     // dropout masks are stored as bytes
constexpr int64_t kTokenIdBytes = 8;  // Megatron's 8*s*b for token and position ids
constexpr int64_t kLogitBytes = 4;    // logits are upcast to fp32 for the cross-entropy

}  // namespace

int64_t modelStateBytesPerParameter(DType dtype) {
  // Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter without the distributed
  // optimizer (16-bit weight 2, fp32 main grad 4, fp32 master weight 4, Adam moments 4 + 4).
  // An fp32 model keeps no master copy: weight 4, gradient 4, moments 4 + 4.
  return dtype == DType::kFp32 ? 16 : 18;
}

double modelStateBytesPerParameter(DType dtype, int zero_stage, int dp) {
  EVSIM_CHECK(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "zero {} over {}", zero_stage, dp);
  // Weight w, gradient g (kept in fp32 for 16-bit models: Megatron's main grad) and optimizer state
  // o (fp32 master copy for 16-bit models, Adam m and v): 2 + 4 + 12 or 4 + 4 + 8.
  const bool fp32 = dtype == DType::kFp32;
  const double w = fp32 ? 4 : 2, g = 4, o = fp32 ? 8 : 12, d = dp;
  switch (zero_stage) {
    case 0:
      return w + g + o;
    case 1:
      return w + g + o / d;
    case 2:
      return w + (g + o) / d;
    default:
      return (w + g + o) / d;
  }
}

int64_t blockActivationBytes(const ModelConfig& model, const TransformerBlock& block,
                             int64_t micro_batch, int tp, Recompute recompute,
                             bool sequence_parallel) {
  const double e = static_cast<double>(dtypeBytes(model.dtype));
  const double s = static_cast<double>(model.seq_length);
  const double b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(model.hidden_size);
  const double a = static_cast<double>(model.num_heads);
  const double f = static_cast<double>(model.ffn_hidden_size);
  const double t = static_cast<double>(tp);
  const double mask = static_cast<double>(kMaskBytes);
  const double sbh = s * b * h;
  // With SP the regions outside the TP-split GEMMs hold s/t tokens.
  const double unsplit = sequence_parallel ? 1 / t : 1;
  // Full recomputation keeps only the block input.
  if (recompute == Recompute::kFull) return std::llround(e * sbh * unsplit);
  // Selective recomputation rebuilds the attention scores, softmax and dropout outputs.
  const double scores = recompute == Recompute::kSelective ? 0 : 1;
  // Not split by TP: two layernorm inputs (2e), the attention and MLP inputs (2e), two dropout
  // masks (2 x 1 byte). Split by TP: Q, K, V and the output projection's input (4e); the MLP's
  // first GEMM output and GeLU output (2e * f/h). Attention scores: softmax output and dropout
  // output (2e) plus the mask (1), a*s*s*b elements each.
  double bytes = sbh * (4 * e + 2 * mask) * unsplit + sbh * (4 * e + 2 * e * f / h) / t +
                 scores * (2 * e + mask) * a * s * s * b / t;
  if (block.cross_attention) {
    // One more layernorm + attention sub-block (layernorm input, attention input, dropout mask;
    // Q, K, V and projection input split by TP; scores against the encoder sequence).
    bytes += sbh * (2 * e + mask) * unsplit + sbh * 4 * e / t +
             scores * (2 * e + mask) * a * s * s * b / t;
  }
  return std::llround(bytes);
}

MemoryEstimate estimateMemory(const IterationPlan& plan, double headroom) {
  std::vector<ChunkMemoryInput> chunks;
  chunks.reserve(plan.stages.size());
  for (const StagePlan& stage : plan.stages) {
    chunks.push_back(ChunkMemoryInput{stage.first_layer, stage.num_layers, stage.has_embedding,
                                      stage.has_head, stage.parameters});
  }
  return estimateMemory(plan.model, plan.strategy, plan.micro_batches,
                        plan.cluster.device.memoryBytes(), chunks, headroom);
}

MemoryEstimate estimateMemory(const ModelConfig& model, const Strategy& strategy,
                              int64_t micro_batches, int64_t capacity_bytes,
                              const std::vector<ChunkMemoryInput>& chunks, double headroom) {
  EVSIM_CHECK(headroom >= 0 && headroom < 1, "headroom {}", headroom);
  const int P = strategy.pp;
  EVSIM_CHECK(!chunks.empty() && chunks.size() % P == 0, "{} chunks for {} stages", chunks.size(),
              P);
  const int v = static_cast<int>(chunks.size()) / P;
  const int64_t padded_vocab = model.paddedVocab(strategy.tp);
  const int64_t e = dtypeBytes(model.dtype);
  const int64_t sb = model.seq_length * strategy.micro_batch;
  const int64_t sbh = sb * model.hidden_size;
  const bool sp = strategy.sequence_parallel;
  const int zero = strategy.dp > 1 ? strategy.zero_stage : 0;

  MemoryEstimate out;
  out.headroom = headroom;
  out.capacity_bytes = capacity_bytes;
  out.usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(out.capacity_bytes) * (1 - headroom)));
  // Blocks of a model are few kinds (self-attention, cross-attention): their bytes once.
  const int64_t self_bytes = blockActivationBytes(model, TransformerBlock{}, strategy.micro_batch,
                                                  strategy.tp, strategy.recompute, sp);
  TransformerBlock cross_block;
  cross_block.cross_attention = true;
  const int64_t cross_bytes = model.hasCrossAttention()
                                  ? blockActivationBytes(model, cross_block, strategy.micro_batch,
                                                         strategy.tp, strategy.recompute, sp)
                                  : 0;
  for (int device = 0; device < P; ++device) {
    StageMemory mem;
    mem.stage = device;
    const int64_t sbh_region = sp ? sbh / strategy.tp : sbh;  // s/t tokens with SP
    // Per chunk of the device: its parameters and its activation bytes per micro-batch.
    std::vector<int64_t> chunk_bytes;
    for (int c = 0; c < v; ++c) {
      const ChunkMemoryInput& stage = chunks[static_cast<size_t>(c) * P + device];
      mem.parameters += stage.parameters;
      int64_t per_micro_batch = 0;
      for (int layer = stage.first_layer; layer < stage.first_layer + stage.num_layers; ++layer) {
        per_micro_batch += model.blocks[layer].cross_attention ? cross_bytes : self_bytes;
      }
      if (stage.has_embedding) {
        per_micro_batch += kTokenIdBytes * sb + e * sbh_region + kMaskBytes * sbh_region;
      }
      if (stage.has_head) {
        // The final layernorm's input and the LM head's input, both regions: with SP the head
        // keeps its input's shard and re-gathers it for the weight gradient (as Megatron does).
        per_micro_batch += 2 * e * sbh_region + kLogitBytes * sb * padded_vocab / strategy.tp;
      }
      chunk_bytes.push_back(per_micro_batch);
      mem.activation_bytes_per_micro_batch += per_micro_batch;
    }
    mem.model_state_bytes =
        std::llround(static_cast<double>(mem.parameters) *
                     modelStateBytesPerParameter(model.dtype, zero, strategy.dp));
    if (v == 1 && strategy.schedule != Schedule::kInterleaved) {
      // The orders' peaks in closed form (schedule.h): GPipe holds all m, 1F1B min(P - s, m).
      const int64_t m = micro_batches;
      mem.in_flight = static_cast<int>(
          strategy.schedule == Schedule::kGpipe ? m : std::min<int64_t>(P - device, m));
      mem.activation_bytes = mem.in_flight * chunk_bytes[0];
    } else {
      const std::vector<StageTask> order =
          stageTaskOrder(strategy.schedule, device, P, micro_batches, v);
      mem.in_flight = peakActivationsInFlight(order);
      mem.activation_bytes = peakActivationBytes(order, chunk_bytes);
    }
    mem.peak_bytes = mem.model_state_bytes + mem.activation_bytes;
    if (mem.peak_bytes > out.peak_bytes) {
      out.peak_bytes = mem.peak_bytes;
      out.peak_stage = mem.stage;
    }
    out.stages.push_back(mem);
  }
  return out;
}

}  // namespace evsim
