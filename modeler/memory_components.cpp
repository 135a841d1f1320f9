#include "modeler/memory_components.h"

#include <algorithm>
#include <tuple>

#include "common/checked.h"
#include "common/error.h"
#include "plan/optimizer_step.h"
#include "plan/zero2_buckets.h"

namespace evsim {

namespace {

// Products in double: beyond int64 is out of memory, not an error (the caller rounds, saturating).
double tokens(const ModelConfig& model, const Strategy& s) {
  return static_cast<double>(s.micro_batch) * static_cast<double>(model.seq_length / s.cp);
}
// The tokens of the layernorm/dropout regions on the rank: split by t with SP.
double regionTokens(const ModelConfig& model, const Strategy& s) {
  return tokens(model, s) / (s.sequence_parallel ? s.tp : 1);
}
int64_t rounded(double bytes) {
  return bytes < 9.2e18 ? static_cast<int64_t>(bytes + 0.5) : INT64_MAX;
}

// FSDP2's groups beside the blocks (Strategy::fsdp_wrap, memory_components.h), in parameters.
struct EdgeGroups {
  double edge = 0;       // one group kept gathered through the step (the root's, or tied)
  double embedding = 0;  // the embedding's own group
  double head = 0;       // [final norm, output]'s own group
};
EdgeGroups edgeGroups(const ModelConfig& model, const Strategy& s, const StageLayerFacts& f) {
  const bool tied_both = s.pp == 1 && f.has_embedding && f.has_head && !model.spec.untied_output;
  if (s.fsdp_wrap == FsdpWrap::kRoot || tied_both) {
    return {static_cast<double>(f.root_parameters), 0, 0};
  }
  return {0, static_cast<double>(f.embedding_parameters),
          static_cast<double>(f.head_parameters)};
}

}  // namespace

StateBytesPerParameter stateBytesPerParameter(Framework framework, DType dtype, int zero, int group,
                                              bool offload_optimizer) {
  EVSIM_CHECK(zero >= 0 && zero <= 3 && group >= 1, "zero {} over {}", zero, group);
  const double g = group;
  if (framework == Framework::kFsdp) {
    // fp32 sharded parameters, fp32 sharded gradients, Adam's two fp32 moments (16 / G).
    const double shard = zero == 3 ? g : 1;
    return {4 / shard, 4 / shard, 8 / shard};
  }
  const bool fp32 = dtype == DType::kFp32;
  StateBytesPerParameter out{fp32 ? 4.0 : 2.0, 4.0, offload_optimizer ? 0.0 : (fp32 ? 8.0 : 12.0)};
  if (zero >= 1) out.optimizer /= g;
  // ZeRO-2 as DeepSpeed runs it (memory_components.h): the partition's gradients in the model
  // dtype (grads_in_partition), not an fp32 main gradient. With the optimizer offloaded eventsim's
  // offload step copies an fp32 gradient shard to the host (offload_d2h), so that path keeps its
  // 4 bytes over G; DeepSpeed's cpu_offload, which moves each partition to pinned host memory as
  // it is reduced, is not modelled.
  if (zero == 2 && !offload_optimizer) out.gradients = out.weights;
  if (zero >= 2) out.gradients /= g;
  if (zero >= 3) out.weights /= g;
  return out;
}

int64_t dataParallelBufferBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                                const StageLayerFacts& facts) {
  const double e = dtypeBytes(model.dtype);
  // DeepSpeed's IPG buckets (plan/zero2_buckets.h): one of reduce_bucket_size elements in the
  // model dtype, two with overlap_comm (--dp-overlap).
  if (zero == 2) {
    const DType wire =
        dataParallelGradDtype(strategy.framework, model.dtype, strategy.grad_reduce_in_bf16);
    return zero2BufferBytes(strategy, dtypeBytes(wire), dtypeBytes(model.dtype));
  }
  if (zero != 3) return 0;
  const bool fsdp = strategy.framework == Framework::kFsdp;
  // Linear weights are gathered in fp8 with FSDP's Float8 all-gather; norms stay in e (small).
  const double gathered = fsdp && model.fp8WeightGather() ? 1 : e;
  const double reduce = fsdp ? kFsdpReduceBytes : e;
  const double L = static_cast<double>(facts.largest_layer_parameters);
  const double S = static_cast<double>(facts.parameters);
  // Under PP the chunk stays gathered; its fp32 accumulated gradients (reduce x S) are placed
  // over time by the order walk (accumulated_gradients.h), not here. What is here besides: the
  // autograd gradients of the group being back-propagated, in e bytes, until post_backward adds
  // them into the fp32 ones (accumulate_unsharded_grad_if_needed; on the chunk's first backward
  // to_accumulated_grad_if_needed casts them, e + 4 for the group, the fp32 part then counted
  // among the accumulated ones).
  if (fsdp && strategy.pp > 1) return rounded(gathered * S + e * L);
  if (!fsdp) {
    if (strategy.reshardsAfterForward()) return rounded((2 * gathered + e + reduce) * L);
    return rounded(gathered * S + (e + reduce) * L);
  }
  // FSDP2 without PP, at a block's backward: an edge group gathered since its first forward
  // (never resharded) and the head's gradient (reduce-scattered only by the group's post-backward
  // at the end), beside the block's own buffers. The head's own group (separate wrapping) was
  // resharded after its backward, but its reduce-scatter input is kept until the next group's
  // post-backward: through the last block's backward, in place of a block's.
  const double B = static_cast<double>(facts.largest_block_parameters);
  const EdgeGroups groups = edgeGroups(model, strategy, facts);
  const double root =
      groups.edge > 0 ? e * groups.edge + e * static_cast<double>(facts.head_gradient_parameters)
                      : 0;
  const double own = e * B + reduce * std::max(B, groups.head);
  if (strategy.reshardsAfterForward()) return rounded(root + 2 * gathered * B + own);
  // Never resharded: every block and the embedding's own group gathered.
  const double blocks = S - groups.edge - groups.embedding - groups.head;
  return rounded(root + e * groups.embedding + gathered * blocks + own);
}

int64_t fsdpLossBufferBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                            const StageLayerFacts& facts) {
  if (zero != 3 || strategy.framework != Framework::kFsdp || strategy.pp > 1) {
    return dataParallelBufferBytes(model, strategy, zero, facts);
  }
  const double e = dtypeBytes(model.dtype);
  const double gathered = model.fp8WeightGather() ? 1 : e;
  const EdgeGroups groups = edgeGroups(model, strategy, facts);
  const double B = static_cast<double>(facts.largest_block_parameters);
  const double S = static_cast<double>(facts.parameters);
  // No block's backward has begun (the last block's pre-backward comes after the loss): an edge
  // group, the head's own group unless resharded after the forward ("always"), and what the
  // forward left gathered: every block and the embedding's group (never), the last block (the
  // root wrapping's default: 9dec370 does not reshard it), none (otherwise). The tied group of
  // the separate wrapping is resharded after the forward under "always" (gathered again for the
  // head's backward); the root's never.
  const bool edge_resharded =
      strategy.fsdp_wrap == FsdpWrap::kSeparate && strategy.reshard == Reshard::kAlways;
  double bytes = edge_resharded ? 0 : e * groups.edge;
  if (!strategy.reshardsHeadAfterForward()) bytes += e * groups.head;
  if (!strategy.reshardsAfterForward()) {
    bytes += e * groups.embedding + gathered * (S - groups.edge - groups.embedding - groups.head);
  } else if (!strategy.reshardsLastBlockAfterForward()) {
    bytes += gathered * B;
  }
  return rounded(bytes);
}

int64_t allGatherStreamPoolBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                                 const StageLayerFacts& facts, bool gather_in_flight) {
  if (zero != 3 || strategy.framework != Framework::kFsdp) return 0;
  const double e = dtypeBytes(model.dtype);
  const double gathered = model.fp8WeightGather() ? 1 : e;
  const double block = gathered * static_cast<double>(facts.largest_block_parameters);
  // A part's pool: its first group's output and the first block's at once; every later block's
  // output fits a freed block (the first group's, split, when it is at least a block's;
  // otherwise a second block's); a last group larger than a block (the head's own) fits none of
  // them with a block's output in use (the pool's other large block may hold it: not counted),
  // so it adds its own.
  auto part_pool = [&](double first_parameters, double last_parameters) {
    const double first = e * first_parameters, last = e * last_parameters;
    return first + block + (first >= block ? 0 : block) + (last > block ? last : 0);
  };
  // One pool per model part on the rank (each its own root with its own streams).
  const EdgeGroups groups = edgeGroups(model, strategy, facts);
  double total = 0;
  if (groups.edge > 0 || strategy.fsdp_wrap == FsdpWrap::kRoot) {
    total = part_pool(static_cast<double>(facts.root_parameters), 0);
    if (facts.model_parts > 1) {
      total += part_pool(static_cast<double>(facts.other_root_parameters), 0) +
               static_cast<double>(facts.model_parts - 2) * part_pool(0, 0);
    }
  } else if (facts.model_parts == 1) {
    total = part_pool(groups.embedding, groups.head);
  } else {
    // The embedding's part and the head's are different parts of the rank (a V layout's rank 0).
    total = part_pool(groups.embedding, 0) + part_pool(0, groups.head) +
            static_cast<double>(facts.model_parts - 2) * part_pool(0, 0);
  }
  // One block's output in use at the peak only where the backward gathers again (reshard after
  // the forward, no PP, at a block's backward); otherwise every cached block is idle.
  return rounded(total - (gather_in_flight ? block : 0));
}

int64_t optimizerStepTransientBytes(const Strategy& strategy, double part_optimizer_bytes) {
  const bool foreach = strategy.optimizer_impl == OptimizerImpl::kForeach;
  if (strategy.framework != Framework::kFsdp || !foreach) return 0;
  // exp_avg_sq_sqrt is shaped like exp_avg_sq, one of Adam's two equal moments.
  return rounded(part_optimizer_bytes / 2);
}

int64_t zero2LaterBackwardPartitionBytes(const ModelConfig& model, const Strategy& strategy,
                                         int zero, double partition_parameters,
                                         int64_t micro_batches) {
  if (zero != 2 || offloadsOptimizer(strategy.offload) || micro_batches < 2) return 0;
  // A fresh grads_in_partition, e bytes per parameter of the rank's partition.
  return rounded(dtypeBytes(model.dtype) * partition_parameters);
}

int64_t zero2StepGradientBytes(const ModelConfig& model, const Strategy& strategy, int zero,
                               double partition_parameters) {
  if (zero != 2 || offloadsOptimizer(strategy.offload)) return 0;
  // flatten(averaged_gradients) (e bytes) and its .to(fp32) (4 bytes; the same tensor, nothing
  // new, when the model is fp32), both alive at the cast.
  const double e = dtypeBytes(model.dtype);
  return rounded((e + (e == 4 ? 0 : 4)) * partition_parameters);
}

PendingReductionPeak pendingReductionPeak(const std::vector<HeldBytes>& activations,
                                          const std::vector<HeldBytes>& pending) {
  // (time, order at that time: 0 frees, 1 allocations, 2 frees after them; activation delta,
  // bucket delta)
  std::vector<std::tuple<double, int, int64_t, int64_t>> events;
  events.reserve(2 * (activations.size() + pending.size()));
  for (const HeldBytes& a : activations) {
    events.emplace_back(a.start_us, 1, a.bytes, 0);
    events.emplace_back(a.end_us, a.freed_after_allocations ? 2 : 0, -a.bytes, 0);
  }
  for (const HeldBytes& p : pending) {
    events.emplace_back(p.start_us, 1, 0, p.bytes);
    events.emplace_back(p.end_us, p.freed_after_allocations ? 2 : 0, 0, -p.bytes);
  }
  std::sort(events.begin(), events.end());
  // Per instant: frees and allocations only lower, then only raise the bytes, so its highest
  // point is after its allocations; with frees after them (a cast) that point is the cast
  // instant's and what follows them the plateau's, otherwise it is the plateau's.
  int64_t held = 0, buckets = 0, plateau = 0, cast = 0, best_held = 0;
  bool any_cast = false;
  for (size_t i = 0; i < events.size();) {
    const double t = std::get<0>(events[i]);
    for (; i < events.size() && std::get<0>(events[i]) == t && std::get<1>(events[i]) < 2; ++i) {
      held += std::get<2>(events[i]);
      buckets += std::get<3>(events[i]);
    }
    best_held = std::max(best_held, held);
    if (i < events.size() && std::get<0>(events[i]) == t) {
      cast = std::max(cast, held + buckets);
      any_cast = true;
      for (; i < events.size() && std::get<0>(events[i]) == t; ++i) {
        held += std::get<2>(events[i]);
        buckets += std::get<3>(events[i]);
      }
    }
    plateau = std::max(plateau, held + buckets);
  }
  return {std::max<int64_t>(0, plateau - best_held),
          any_cast ? std::max<int64_t>(0, cast - best_held) : 0};
}

int64_t sequenceParallelGradInputBytes(const ModelConfig& model, const Strategy& strategy) {
  if (!strategy.sequence_parallel || strategy.tp_comm_overlap) return 0;
  return rounded(dtypeBytes(model.dtype) * tokens(model, strategy) *
                 static_cast<double>(model.hidden_size));
}

BucketMoment bucketMoment(int64_t comm, int64_t comm_at_cast, const PendingReductionPeak& pending) {
  const int64_t at_plateau = saturatingAdd(comm, pending.plateau_bytes);
  const int64_t at_cast = saturatingAdd(comm_at_cast, pending.cast_bytes);
  if (at_cast > at_plateau) return {comm_at_cast, pending.cast_bytes, true};
  return {comm, pending.plateau_bytes, false};
}

int64_t megatronGradientCopyBytes(const Strategy& strategy, bool bf16_main_grad,
                                  double optimizer_parameters) {
  if (strategy.framework != Framework::kMegatron || !bf16_main_grad) return 0;
  if (offloadsOptimizer(strategy.offload)) return 0;
  // shard_main_param.grad = shard_model_grad.float(): a new fp32 tensor per parameter stepped.
  return rounded(4 * optimizer_parameters);
}

int64_t pipelineOutputMergeBytes(const ModelConfig& model, const Strategy& strategy,
                                 int64_t micro_batches, bool has_head) {
  if (strategy.framework != Framework::kFsdp || strategy.pp < 2 || !has_head) return 0;
  // torch.cat of every micro-batch's e-byte logits (output_chunks) along the batch dimension.
  return rounded(static_cast<double>(micro_batches) * dtypeBytes(model.dtype) *
                 tokens(model, strategy) *
                 static_cast<double>(model.paddedVocab(strategy.tp) / strategy.tp));
}

int64_t lossTransientBytes(const ModelConfig& model, const Strategy& strategy, bool has_head) {
  if (!has_head) return 0;
  const double e = dtypeBytes(model.dtype);
  const double logits =
      tokens(model, strategy) * static_cast<double>(model.paddedVocab(strategy.tp) / strategy.tp);
  if (strategy.framework != Framework::kFsdp) return rounded(e * logits);
  // PyTorch's cross_entropy(pred.float()) beside the held fp32 log-softmax output (4 per logit):
  // forward, the e-byte logits and their fp32 copy (e + 4); backward, nll_loss's fp32 gradient
  // (zeros, then the targets scattered) and log_softmax_backward's fp32 output (4 + 4), then the
  // cast back (4 + e). Under TP torchtitan's loss_parallel runs DTensor's own decomposition: its
  // forward keeps x, x - max and exp(x - max) at once (e + 4 + 4 + 4, the output not yet made),
  // its backward zeros_like(x), exp(x) and their sum (4 + 4 + 4) beside the held output.
  const double plain = std::max(e + 4, 8.0);
  const double loss_parallel = std::max(e + 12 - 4, 12.0);
  return rounded((strategy.tp > 1 ? loss_parallel : plain) * logits);
}

int64_t embeddingGradientBytes(const ModelConfig& model, const Strategy& strategy,
                               bool has_embedding) {
  if (!has_embedding || strategy.framework == Framework::kFsdp) return 0;
  return rounded(static_cast<double>(dtypeBytes(model.dtype)) *
                 static_cast<double>(model.paddedVocab(strategy.tp) / strategy.tp) *
                 static_cast<double>(model.hidden_size));
}

int64_t tensorContextBufferBytes(const ModelConfig& model, const Strategy& strategy) {
  const double e = dtypeBytes(model.dtype);
  const double T = tokens(model, strategy);
  double bytes = 0;
  if (strategy.sequence_parallel && !strategy.tp_comm_overlap) {
    // Megatron: the gathered input and its gradient, global buffers. DTensor TP (FSDP) saves the
    // gathered input as the linear's activation (LayerShape::saves_gathered_input, counted
    // there): only the backward's gathered gradient is a buffer of its own.
    const double tensors = strategy.framework == Framework::kFsdp ? 1 : 2;
    bytes += tensors * e * T * static_cast<double>(model.hidden_size);
  }
  if (strategy.cp > 1) {
    const double kv_width = static_cast<double>(model.queryGroups()) *
                            static_cast<double>(model.headDim()) / strategy.tp;
    const double q_width = static_cast<double>(model.num_heads) *
                           static_cast<double>(model.headDim()) / strategy.tp;
    if (strategy.framework == Framework::kFsdp) {
      bytes += torchContextParallelBytes(e * T * q_width, strategy);
      return rounded(bytes);
    }
    const double kv = e * T * kv_width;  // the rank's K (or V)
    // Ring: K/V being received beside the pair in use; backward with their gradients.
    const double ring = strategy.cpRingSize() > 1 ? 2 * 2 * 2 * kv : 0;
    // a2a: the send copy and the receive buffer of Q, K and V (backward: of dQ, dK, dV).
    const double a2a = strategy.cpA2aSize() > 1 ? 2 * (e * T * q_width + 2 * kv) : 0;
    // allgather, backward: the gathered K and V and their full-length gradients, C x each.
    const double gathered =
        strategy.cp_comm == CpComm::kAllGather ? 4 * static_cast<double>(strategy.cp) * kv : 0;
    bytes += std::max({ring, a2a, gathered});
  }
  return rounded(bytes);
}

double torchContextParallelBytes(double k, const Strategy& strategy) {
  if (strategy.cp < 2) return 0;
  // torch.distributed.tensor.experimental's ring attention backward (_templated_ring_attention_
  // backward, convert_to_f32): fp32 accumulators for dQ, dK, dV (3 x 2k), the fp32 dK and dV
  // concatenated and permuted to the next rank (send and receive, 2 x 4k), one step's 16-bit dQ,
  // dK, dV from the flash backward (3k), and the K/V it attends to: all C ranks' K and V
  // gathered once (ALL_GATHER, the rotater's default, 2 C k), or the ring's concatenated pair
  // being sent and the one received (ALL_TO_ALL, 2 x 2k).
  const double gathered = strategy.cp_comm == CpComm::kAllGather
                              ? 2 * static_cast<double>(strategy.cp) * k
                              : 2 * 2 * k;
  return 6 * k + 8 * k + 3 * k + gathered;
}

int64_t userBufferBytes(const ModelConfig& model, const Strategy& strategy) {
  if (!strategy.tp_comm_overlap) return 0;
  constexpr double kAllGatherBuffers = 8, kReduceScatterBuffers = 4;  // TE's initialize_ub
  const double e = dtypeBytes(model.dtype);
  const double gather_e = isFp8(model.gemmDtype()) ? 1 : e;
  return rounded((kAllGatherBuffers * gather_e + kReduceScatterBuffers * e) *
                 tokens(model, strategy) * static_cast<double>(model.hidden_size));
}

int64_t moeDispatchBytes(const ModelConfig& model, const Strategy& strategy, bool has_moe) {
  if (!has_moe || model.moe.num_experts == 0) return 0;
  const double e = dtypeBytes(model.dtype);
  return rounded(2 * e * regionTokens(model, strategy) * static_cast<double>(model.moe.top_k) *
                 model.moe.tokenFactor() * static_cast<double>(model.hidden_size));
}

int64_t pipelineBufferBytes(const ModelConfig& model, const Strategy& strategy) {
  if (strategy.pp < 2) return 0;
  const double e = dtypeBytes(model.dtype);
  return rounded(2 * e * regionTokens(model, strategy) * static_cast<double>(model.hidden_size));
}

int64_t torchPipelineBufferBytes(const ModelConfig& model, const Strategy& strategy,
                                 const TorchPipelineDevice& device) {
  if (strategy.pp < 2) return 0;
  const double e = dtypeBytes(model.dtype);
  // One micro-batch's stage input or output: the region's tokens (a local shard under SP).
  const double a = e * regionTokens(model, strategy) * static_cast<double>(model.hidden_size);
  const double m = static_cast<double>(device.micro_batches);
  const double chunks = device.chunks;
  const double receiving = chunks - (device.has_first_chunk ? 1 : 0);
  const double sending = chunks - (device.has_last_chunk ? 1 : 0);
  const double in_flight = device.in_flight;
  // Receive buffers, m per receiving chunk, made once and kept; the in-flight ones are the first
  // layers' saved inputs, already held activations. Their .grad, the input gradients sent back,
  // stay until the next step clears them: by the last time the peak is held, m - in_flight.
  const double idle_receives = std::max(0.0, receiving * m - in_flight);
  double bytes = 2 * idle_receives * a;
  // Gradient receive buffers, m per sending chunk; the outputs of the in-flight micro-batches,
  // kept in fwd_cache for their backward (Megatron frees them after the send).
  bytes += sending * m * a + in_flight * (sending / chunks) * a;
  // The last stage keeps every micro-batch's logits (output_chunks) until the step ends.
  if (device.has_last_chunk) {
    bytes += m * e * tokens(model, strategy) *
             static_cast<double>(model.paddedVocab(strategy.tp) / strategy.tp);
  }
  return rounded(bytes);
}

int64_t fp8WeightBytes(const ModelConfig& model, const Strategy& strategy,
                       const StageLayerFacts& facts) {
  if (!model.spec.fp8) return 0;
  if (strategy.framework == Framework::kFsdp) return facts.largest_layer_parameters;
  return 2 * facts.block_parameters;
}

int communicatorCount(const Strategy& s) {
  int n = 0;
  n += s.tp > 1;
  n += s.cp > 1;
  n += s.pp > 1;
  n += s.gradGroupSize() > 1;
  n += s.ep > 1;
  n += s.expertsSyncApart() && s.expertTp() > 1 && s.expertTp() != s.tp;  // the expert-TP group
  n += s.expertsSyncApart() && s.expertGradGroupSize() > 1;
  return n;
}

}  // namespace evsim
