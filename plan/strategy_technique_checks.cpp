// The per-technique strategy checks (strategy_technique_checks.h): context parallelism and its
// exchange, per-op checkpointing and xformers' SwiGLU, expert parallelism, the overlap flags and
// MoE communication. strategyViolation (strategy_validation.cpp) calls them in turn.
#include "plan/strategy_technique_checks.h"

namespace evsim {
namespace {

// Megatron's checks on --cp-comm-type (arguments.py: a2a+p2p needs
// --hierarchical-context-parallel-sizes whose product is C) and Transformer Engine's
// (context_parallel.py: a2a "requires num_heads % cp_size == 0 for Q, K, V", per rank after TP;
// a2a+p2p the same over its a2a group).
template <typename Report>
std::optional<typename Report::Value> cpCommCheck(const ModelConfig& model, const Strategy& s,
                                                  const Report& report) {
  const CpFlag flag{s};
  if (s.cp_comm != CpComm::kA2aP2p && s.cp_a2a != 0) {
    return report(StrategyRule::kCpHierarchicalOnlyA2aP2p,
                  "{} --hierarchical-context-parallel-sizes: only with --cp-comm-type a2a+p2p",
                  flag);
  }
  if (s.cp_comm == CpComm::kA2aP2p && (s.cp_a2a < 1 || s.cp % s.cp_a2a != 0)) {
    return report(StrategyRule::kCpA2aP2pSizes,
                  "{}: needs --hierarchical-context-parallel-sizes A,R with A x R = C (Megatron's "
                  "check; got a2a size {})",
                  flag, s.cp_a2a);
  }
  if (s.cp_comm != CpComm::kP2p && model.mla.enabled()) {
    return report(StrategyRule::kCpMlaOnlyP2p,
                  "{}: with multi-latent attention ({}) only p2p is modelled", flag, model.name);
  }
  if (s.cp_comm == CpComm::kP2p || s.cp_comm == CpComm::kAllGather) return std::nullopt;
  const int a2a = s.cpA2aSize();
  const int64_t heads = model.num_heads / s.tp, groups = model.queryGroups() / s.tp;
  if (heads % a2a != 0 || groups % a2a != 0) {
    return report(StrategyRule::kCpA2aHeads,
                  "{}: the a2a over {} ranks needs the rank's query heads ({}/M = {}) and "
                  "key/value heads ({}/M = {}) divisible by {} (Transformer Engine's num_heads % "
                  "cp_size check)",
                  flag, a2a, model.num_heads, heads, model.queryGroups(), groups, a2a);
  }
  return std::nullopt;
}

}  // namespace

template <typename Report>
std::optional<typename Report::Value> contextParallelCheck(const ModelConfig& model,
                                                           const Strategy& s,
                                                           const Report& report) {
  if (s.cp < 1) return report(StrategyRule::kCpBelowOne, "--cp {}: must be >= 1", s.cp);
  if (s.cp == 1) return std::nullopt;
  if (!model.spec.flash_attention) {
    return report(StrategyRule::kCpNeedsFlashAttention,
                  "--cp {}: context parallelism needs flash_attention: true in {} (Megatron runs "
                  "ring attention only with fused attention)",
                  s.cp, model.name);
  }
  // Megatron's load-balanced causal split: each CP rank holds 2 of 2C sequence chunks.
  if (model.seq_length % (2 * int64_t{s.cp}) != 0) {
    return report(StrategyRule::kCpSplitsSequence,
                  "--cp {}: 2 x C = {} does not divide seq_length={} of {}", s.cp, 2 * s.cp,
                  model.seq_length, model.name);
  }
  if (s.sequence_parallel && model.seq_length % (int64_t{s.cp} * s.tp) != 0) {
    return report(StrategyRule::kCpSpSplitsSequence,
                  "--cp {} --sequence-parallel: C x M = {} does not divide seq_length={}", s.cp,
                  s.cp * s.tp, model.seq_length);
  }
  return cpCommCheck(model, s, report);
}

// torchtitan's per-op checkpointing policy is modelled for its dense Llama-style blocks (one
// self-attention with flash attention, one MLP): its matmul count decides what is saved.
template <typename Report>
std::optional<typename Report::Value> opCheckpointCheck(const ModelConfig& model, const Strategy& s,
                                                        const Report& report) {
  if (s.recompute_every < 0) {
    return report(StrategyRule::kRecomputeEveryBelowOne, "--recompute-every {}: must be >= 1",
                  s.recompute_every);
  }
  if (s.recompute_every > kMaxLayers) {  // no model has more blocks to step over
    return report(StrategyRule::kRecomputeEveryOverLayers,
                  "--recompute-every {}: at most {}, the most blocks a model may have",
                  s.recompute_every, kMaxLayers);
  }
  if (s.recompute_every > 1 && s.recompute != Recompute::kFull) {
    return report(StrategyRule::kRecomputeEveryNeedsFull,
                  "--recompute-every {}: checkpoints every N-th block in full (torchtitan's "
                  "per-layer selective_ac_option); it needs --recompute full, not {}",
                  s.recompute_every, recomputeName(s.recompute));
  }
  if (s.swiglu_recompute_product) {
    bool dense_swiglu = model.spec.mlp == MlpKind::kSwiGlu;
    for (const TransformerBlock& block : model.blocks) dense_swiglu = dense_swiglu && !block.moe;
    if (!dense_swiglu) {
      const bool swiglu = model.spec.mlp == MlpKind::kSwiGlu;
      return report(StrategyRule::kXformersNeedsDenseSwiGlu,
                    "--swiglu-kernel xformers: xformers' fused SwiGLU is modelled for dense "
                    "SwiGLU MLPs; {} has {}",
                    model.name, swiglu ? "mixture-of-experts blocks" : "no SwiGLU MLP");
    }
    if (s.tp_comm_overlap) {
      return report(StrategyRule::kXformersTpOverlap,
                    "--swiglu-kernel xformers --tp-comm-overlap: Transformer Engine's userbuffer "
                    "GEMMs are Megatron's kernels; not modelled with xformers' fused SwiGLU");
    }
    if (s.recompute == Recompute::kSelectiveOp) {
      return report(StrategyRule::kXformersSelectiveOp,
                    "--swiglu-kernel xformers --recompute selective-op: torchtitan's per-op "
                    "policy is modelled for its own (unfused) MLP, not with xformers' fused "
                    "SwiGLU");
    }
  }
  if (s.recompute != Recompute::kSelectiveOp) return std::nullopt;
  const char* why = nullptr;
  if (!model.spec.flash_attention) why = "flash_attention: false";
  if (model.mla.enabled()) why = "multi-latent attention";
  for (const TransformerBlock& block : model.blocks) {
    if (block.moe) why = "mixture-of-experts blocks";
    if (block.cross_attention) why = "cross-attention blocks";
  }
  if (!why) return std::nullopt;
  return report(StrategyRule::kSelectiveOpBlocks,
                "--recompute selective-op: modelled for dense self-attention + MLP blocks with "
                "flash attention (torchtitan's Llama); {} has {}",
                model.name, why);
}

template <typename Report>
std::optional<typename Report::Value> expertParallelCheck(const ModelConfig& model,
                                                          const Strategy& s, const Report& report) {
  if (s.ep < 1) return report(StrategyRule::kEpBelowOne, "--ep {}: must be >= 1", s.ep);
  const int64_t experts = model.moe.num_experts;
  if (experts > 0 && s.tp > 1 && !s.sequence_parallel) {
    return report(StrategyRule::kExpertsNeedSp,
                  "{}: {} has experts and M={} > 1, which Megatron runs only with "
                  "--sequence-parallel",
                  StrategyLabel{s}, model.name, s.tp);
  }
  if (s.etp < 0) return report(StrategyRule::kEtpBelowOne, "--etp {}: must be >= 1", s.etp);
  const int etp = s.expertTp();
  if (s.etp > 0 && s.etp != s.tp) {
    if (experts == 0) {
      return report(StrategyRule::kEtpNoExperts, "--etp {}: {} has no experts (num_experts)", s.etp,
                    model.name);
    }
    if (model.moe.expert_ffn % s.etp != 0) {
      return report(StrategyRule::kEtpExpertFfn,
                    "--etp {}: does not divide moe_ffn_hidden_size={} of {}", s.etp,
                    model.moe.expert_ffn, model.name);
    }
  }
  if (s.ep == 1 && etp == s.tp) return std::nullopt;
  if (experts == 0) {
    return report(StrategyRule::kEpNoExperts, "--ep {}: {} has no experts (num_experts)", s.ep,
                  model.name);
  }
  if (experts % s.ep != 0) {
    return report(StrategyRule::kEpExperts, "--ep {}: does not divide num_experts={} of {}", s.ep,
                  experts, model.name);
  }
  // Megatron's parallel_state: the expert ranks ETP x EP x expert-DP tile the M x D ranks of a
  // stage (and CP rank: eventsim keeps the EP group inside one CP rank).
  if ((int64_t{s.tp} * s.dp) % (int64_t{etp} * s.ep) != 0) {
    if (etp == s.tp) {
      return report(StrategyRule::kEpDividesD,
                    "--ep {}: does not divide D={} (experts are sharded inside the DP group)", s.ep,
                    s.dp);
    }
    return report(StrategyRule::kEtpEpDividesMD,
                  "--etp {} --ep {}: ETP x E = {} does not divide M x D = {} (Megatron's "
                  "expert-data-parallel size)",
                  etp, s.ep, int64_t{etp} * s.ep, int64_t{s.tp} * s.dp);
  }
  return std::nullopt;
}

// Megatron-LM's own checks (megatron/training/arguments.py) on the two overlap flags, and what
// the models of them need (docs/TECHNIQUES.md).
template <typename Report>
std::optional<typename Report::Value> overlapCheck(const ModelConfig& model,
                                                   const ClusterConfig& cluster, const Strategy& s,
                                                   const Report& report) {
  const StrategyLabel label{s};
  if (s.tp_comm_overlap) {
    if (!s.sequence_parallel) {
      return report(StrategyRule::kTpOverlapNeedsSp,
                    "{} --tp-comm-overlap: Tensor parallel communication/GEMM overlap can happen "
                    "only when sequence parallelism is enabled (--sequence-parallel, M >= 2)",
                    label);
    }
    if (s.framework != Framework::kMegatron) {
      return report(StrategyRule::kTpOverlapFramework,
                    "{} --tp-comm-overlap: Megatron-LM's (Transformer Engine's userbuffers); "
                    "not with --framework {}",
                    label, frameworkName(s.framework));
    }
    if (cluster.gpus_per_node % s.tp != 0) {
      return report(StrategyRule::kTpOverlapAcrossNodes,
                    "{} --tp-comm-overlap: userbuffers need the TP group inside one node (M={} "
                    "does not divide the {} GPUs of a node)",
                    label, s.tp, cluster.gpus_per_node);
    }
    // The ring exchange runs M chunks of the gathered tokens, the pipelined reduce-scatter 4
    // (Transformer Engine's default num_splits).
    const int64_t tokens = s.micro_batch * model.seq_length / s.cp;
    if (tokens % (int64_t{4} * s.tp) != 0) {
      return report(StrategyRule::kTpOverlapTokens,
                    "{} --tp-comm-overlap: the {} tokens of a micro-batch (b x s / C) do not "
                    "split into M x 4 = {} chunks (ring exchange over M, reduce-scatter in 4)",
                    label, tokens, 4 * s.tp);
    }
  }
  if (s.grad_reduce_in_bf16 && s.framework != Framework::kMegatron) {
    return report(StrategyRule::kBf16ReduceFramework,
                  "{} --grad-reduce-in-bf16: Megatron's option; FSDP reduces gradients in its "
                  "reduce_dtype (fp32, as torchtitan sets it)",
                  label);
  }
  // ZeRO-0/1 with --dp-overlap already reduce once, at the last backward, and wait only before
  // the step; without it they reduce after the pipeline: kStep changes ZeRO-2's reductions only.
  if (s.reducesAtStep() && (s.zero_stage != 2 || s.gradGroupSize() < 2)) {
    return report(StrategyRule::kGradReduceSyncNeedsZero2,
                  "{} --grad-reduce-sync step: needs --zero 2 over D x C >= 2 (ZeRO-0/1 reduce "
                  "once a step; --dp-overlap already waits for their buckets only at the step)",
                  label);
  }
  // The activation copies' prefetch windows are counted in backward ops before the reductions
  // leave the op list (plan_core.cpp): with them gone each window would reach further than the
  // plan meant. Refused rather than costed wrongly.
  if (s.reducesAtStep() && offloadsActivations(s.offload)) {
    return report(StrategyRule::kGradReduceSyncOffload,
                  "{} --grad-reduce-sync step: not modelled with --offload activations or both "
                  "(the copies' prefetch windows assume the reductions in the backward)",
                  label);
  }
  if (s.grad_reduce_queue < 0 || (s.grad_reduce_queue > 0 && !s.reducesAtStep())) {
    return report(StrategyRule::kGradReduceQueue,
                  "{} --grad-reduce-queue {}: must be >= 0, and above 0 only with "
                  "--grad-reduce-sync step",
                  label, s.grad_reduce_queue);
  }
  if (s.overlap_param_gather) {
    if (s.framework != Framework::kMegatron || s.zero_stage < 1 || s.zero_stage > 2) {
      return report(StrategyRule::kParamGatherNeedsDistributedOptimizer,
                    "{} --overlap-param-gather: only supported with distributed optimizer "
                    "(--use-distributed-optimizer, --zero 1 or 2)",
                    label);
    }
    if (!s.dp_overlap) {
      return report(StrategyRule::kParamGatherNeedsGradOverlap,
                    "{} --overlap-param-gather: Must use --overlap-param-gather with "
                    "--overlap-grad-reduce",
                    label);
    }
  }
  return std::nullopt;
}

// The MoE communication flags: DeepEP's dispatcher and the all-to-all / compute overlap, with
// Megatron-LM's own checks on --overlap-moe-expert-parallel-comm (arguments.py) and what their
// models need (docs/TECHNIQUES.md).
template <typename Report>
std::optional<typename Report::Value> moeCommCheck(const ClusterConfig& cluster, const Strategy& s,
                                                   const Report& report) {
  const StrategyLabel label{s};
  if (s.moe_dispatcher == MoeDispatcher::kDeepEp) {
    if (s.ep < 2) {
      return report(StrategyRule::kDeepEpNeedsEp,
                    "{} --moe-enable-deepep: DeepEP dispatches over the EP group; needs --ep > 1 "
                    "(here {})",
                    label, s.ep);
    }
    if (s.expertTp() != 1) {
      return report(StrategyRule::kDeepEpExpertTp,
                    "{} --moe-enable-deepep with expert TP {}: not modelled (eventsim's DeepEP "
                    "sends whole tokens to whole experts: --etp 1)",
                    label, s.expertTp());
    }
    const int g = cluster.gpus_per_node;
    if (s.ep % g != 0 && g % s.ep != 0) {
      return report(StrategyRule::kDeepEpNodes,
                    "{} --moe-enable-deepep --ep {}: the EP group must be whole nodes of {} GPUs "
                    "or lie inside one (DeepEP's RDMA hop goes to the same local rank of every "
                    "node)",
                    label, s.ep, g);
    }
  }
  if (s.moe_a2a_overlap) {
    if (s.ep < 2) {
      return report(StrategyRule::kMoeA2aOverlapNeedsEp,
                    "{} --overlap-moe-expert-parallel-comm: expert_model_parallel_size must be > "
                    "1 (here --ep {})",
                    label, s.ep);
    }
    if (s.schedule != Schedule::kInterleaved) {
      return report(StrategyRule::kMoeA2aOverlapSchedule,
                    "{} --overlap-moe-expert-parallel-comm: modelled in the interleaved schedule "
                    "(Megatron's combined 1F1B with virtual stages); not with --schedule {}",
                    label, scheduleName(s.schedule));
    }
    if (s.recompute == Recompute::kFull) {
      return report(StrategyRule::kMoeA2aOverlapFullRecompute,
                    "{} --overlap-moe-expert-parallel-comm: not with full recomputation "
                    "(Megatron's check)",
                    label);
    }
  }
  return std::nullopt;
}

#define EVSIM_TECHNIQUE_CHECKS(Report)                                                            \
  template std::optional<Report::Value> contextParallelCheck(const ModelConfig&, const Strategy&, \
                                                             const Report&);                      \
  template std::optional<Report::Value> opCheckpointCheck(const ModelConfig&, const Strategy&,    \
                                                          const Report&);                         \
  template std::optional<Report::Value> expertParallelCheck(const ModelConfig&, const Strategy&,  \
                                                            const Report&);                       \
  template std::optional<Report::Value> overlapCheck(const ModelConfig&, const ClusterConfig&,    \
                                                     const Strategy&, const Report&);             \
  template std::optional<Report::Value> moeCommCheck(const ClusterConfig&, const Strategy&,       \
                                                     const Report&);
EVSIM_TECHNIQUE_CHECKS(ViolationReport)
EVSIM_TECHNIQUE_CHECKS(MessageReport)
#undef EVSIM_TECHNIQUE_CHECKS

}  // namespace evsim
