#include "plan/strategy.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "common/strings.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"
#include "plan/schedules/schedule_file.h"

namespace evsim {
namespace {

// "--strategy 2M4P2D", formatted only when a message needs it: a search checks every candidate
// and most pass, and formatting the label for each was a tenth of a search's enumeration.
struct StrategyLabel {
  const Strategy& strategy;
};

}  // namespace
}  // namespace evsim

template <>
struct fmt::formatter<evsim::StrategyLabel> : fmt::formatter<std::string_view> {
  auto format(const evsim::StrategyLabel& label, format_context& ctx) const {
    return fmt::format_to(ctx.out(), "--strategy {}", label.strategy.name());
  }
};

namespace evsim {

std::string_view scheduleName(Schedule schedule) {
  switch (schedule) {
    case Schedule::kGpipe:
      return "gpipe";
    case Schedule::kDapple:
      return "dapple";
    case Schedule::kInterleaved:
      return "interleaved";
    case Schedule::kZbh1:
      return "zbh1";
    case Schedule::kZbh2:
      return "zbh2";
    case Schedule::kZbv:
      return "zbv";
    case Schedule::kDualPipeV:
      return "dualpipev";
    case Schedule::kFile: {
      // The path stays alive with the installed file (replaced only by another --schedule).
      static thread_local std::shared_ptr<const ScheduleFile> named;
      named = installedScheduleFile();
      return named ? std::string_view(named->path) : std::string_view("file");
    }
  }
  return "?";
}

std::string_view offloadName(Offload offload) {
  switch (offload) {
    case Offload::kNone:
      return "none";
    case Offload::kOptimizer:
      return "optimizer";
    case Offload::kActivations:
      return "activations";
    case Offload::kBoth:
      return "both";
  }
  return "?";
}

Offload parseOffload(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  for (Offload o : {Offload::kNone, Offload::kOptimizer, Offload::kActivations, Offload::kBoth}) {
    if (lower == offloadName(o)) return o;
  }
  EVSIM_THROW(InputError, "{} '{}': unknown offload (none, optimizer, activations or both)", flag,
              text);
}

std::string_view frameworkName(Framework framework) {
  return framework == Framework::kFsdp ? "fsdp" : "megatron";
}

Framework parseFramework(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "megatron") return Framework::kMegatron;
  if (lower == "fsdp") return Framework::kFsdp;
  EVSIM_THROW(InputError, "{} '{}': unknown framework (megatron or fsdp)", flag, text);
}

std::string_view reshardName(Reshard reshard) {
  switch (reshard) {
    case Reshard::kDefault:
      return "default";
    case Reshard::kAlways:
      return "always";
    case Reshard::kNever:
      return "never";
  }
  return "?";
}

Reshard parseReshard(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "default") return Reshard::kDefault;
  if (lower == "always") return Reshard::kAlways;
  if (lower == "never") return Reshard::kNever;
  EVSIM_THROW(InputError, "{} '{}': unknown policy (default, always or never)", flag, text);
}

std::string_view torchCompileName(TorchCompile compile) {
  switch (compile) {
    case TorchCompile::kDefault:
      return "default";
    case TorchCompile::kOn:
      return "on";
    case TorchCompile::kOff:
      return "off";
    case TorchCompile::kBlocks:
      return "blocks";
  }
  return "?";
}

TorchCompile parseTorchCompile(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "default") return TorchCompile::kDefault;
  if (lower == "on") return TorchCompile::kOn;
  if (lower == "off") return TorchCompile::kOff;
  if (lower == "blocks") return TorchCompile::kBlocks;
  EVSIM_THROW(InputError, "{} '{}': unknown setting (on, off, blocks or default)", flag, text);
}

std::string_view optimizerImplName(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kFused:
      return "fused";
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kForLoop:
      return "for-loop";
  }
  return "?";
}

OptimizerImpl parseOptimizerImpl(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "fused") return OptimizerImpl::kFused;
  if (lower == "foreach") return OptimizerImpl::kForeach;
  if (lower == "for-loop") return OptimizerImpl::kForLoop;
  EVSIM_THROW(InputError, "{} '{}': unknown implementation (fused, foreach or for-loop)", flag,
              text);
}

Schedule parseSchedule(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower.size() > 4 && lower.ends_with(".csv")) {
    installScheduleFile(loadScheduleCsv(trim(text)));
    return Schedule::kFile;
  }
  if (lower == "gpipe") return Schedule::kGpipe;
  if (lower == "dapple" || lower == "1f1b") return Schedule::kDapple;
  if (lower == "interleaved") return Schedule::kInterleaved;
  if (lower == "zbh1") return Schedule::kZbh1;
  if (lower == "zbh2") return Schedule::kZbh2;
  if (lower == "zbv") return Schedule::kZbv;
  if (lower == "dualpipev") return Schedule::kDualPipeV;
  // DualPipe proper runs two copies of every stage in two directions: a micro-batch's stage
  // depends on its direction, which the pipeline layout (one device per virtual stage) cannot say.
  if (lower == "dualpipe") {
    EVSIM_THROW(InputError,
                "{} '{}': the two-direction DualPipe is not modelled (its cut-in-half form is: "
                "dualpipev)",
                flag, text);
  }
  EVSIM_THROW(InputError,
              "{} '{}': unknown schedule (gpipe, dapple, 1f1b, interleaved, zbh1, zbh2, zbv, "
              "dualpipev or a FILE.csv)",
              flag, text);
}

std::string Strategy::name() const { return fmt::format("{}M{}P{}D", tp, pp, dp); }

std::string Strategy::techniques(TechniqueStyle style) const {
  const bool brief = style == TechniqueStyle::kShort;
  std::string out;
  if (dp_overlap) out += brief ? " ov" : " dp-overlap";
  if (overlap_param_gather) out += brief ? " pg" : " param-gather-overlap";
  if (tp_comm_overlap) out += brief ? " tpo" : " tp-comm-overlap";
  if (grad_reduce_in_bf16) out += brief ? " gbf16" : " grad-reduce-bf16";
  if (cp > 1) out += fmt::format(" cp{}", cp);
  if (cp > 1 && cp_comm == CpComm::kA2aP2p) {
    out += fmt::format("(a2a{}+p2p)", cp_a2a);
  } else if (cp > 1 && cp_comm != CpComm::kP2p) {
    out += fmt::format("({})", brief && cp_comm == CpComm::kAllGather ? "ag" : cpCommName(cp_comm));
  }
  if (ep > 1) out += fmt::format(" ep{}", ep);
  if (etp > 0 && etp != tp) out += fmt::format(" etp{}", etp);
  if (moe_dispatcher == MoeDispatcher::kDeepEp) out += brief ? " dep" : " deepep";
  if (moe_a2a_overlap) out += brief ? " a2o" : " a2a-overlap";
  if (virtual_stages > 1) out += fmt::format(" v{}", virtual_stages);
  if (microbatch_group > 0) out += fmt::format(" n{}", microbatch_group);
  if (recompute != Recompute::kNone) {
    std::string_view name = recomputeName(recompute);
    if (brief && recompute == Recompute::kSelective) name = "sel";
    if (brief && recompute == Recompute::kSelectiveOp) name = "op";
    out += fmt::format(" rc={}", name);
    if (recompute_every > 1) out += fmt::format("/{}", recompute_every);
  }
  if (swiglu_recompute_product) out += brief ? " xsw" : " xformers-swiglu";
  if (sequence_parallel) out += " sp";
  if (framework == Framework::kFsdp) {
    out += " fsdp";
    if (reshard != Reshard::kDefault) out += fmt::format(" reshard={}", reshardName(reshard));
    if (torch_compile != TorchCompile::kDefault) {
      out += fmt::format(" compile={}", torchCompileName(torch_compile));
    }
    if (optimizer_impl != OptimizerImpl::kFused) {
      out += fmt::format(" adamw={}", optimizerImplName(optimizer_impl));
    }
  } else if (zero_stage > 0) {
    out += fmt::format(" {}{}", brief ? "z" : "zero", zero_stage);
  }
  if (offload != Offload::kNone) {
    out += fmt::format(" {}={}", brief ? "off" : "offload", offloadName(offload));
  }
  if (!stage_layers.empty()) out += fmt::format(" layers={}", fmt::join(stage_layers, ","));
  return out;
}

void parseStrategyText(std::string_view text, Strategy& strategy, std::string_view flag) {
  std::string upper = toLower(trim(text));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int values[3] = {0, 0, 0};  // M, P, D
  const std::string letters = "MPD";
  size_t pos = 0;
  while (pos < upper.size()) {
    size_t digits = pos;
    while (digits < upper.size() && std::isdigit(static_cast<unsigned char>(upper[digits])))
      ++digits;
    if (digits == pos || digits >= upper.size() ||
        letters.find(upper[digits]) == std::string::npos || digits - pos > 6) {
      EVSIM_THROW(InputError, "{} '{}': expected the form 2M4P2D (a number before each of M, P, D)",
                  flag, text);
    }
    int slot = static_cast<int>(letters.find(upper[digits]));
    if (values[slot] != 0)
      EVSIM_THROW(InputError, "{} '{}': {} given twice", flag, text, upper[digits]);
    values[slot] = std::stoi(upper.substr(pos, digits - pos));
    if (values[slot] <= 0) {
      EVSIM_THROW(InputError, "{} '{}': {} must be > 0", flag, text, upper[digits]);
    }
    pos = digits + 1;
  }
  for (int slot = 0; slot < 3; ++slot) {
    if (values[slot] == 0) {
      EVSIM_THROW(InputError, "{} '{}': missing the {} part (form 2M4P2D)", flag, text,
                  letters[slot]);
    }
  }
  strategy.tp = values[0];
  strategy.pp = values[1];
  strategy.dp = values[2];
}

namespace {

// Megatron's checks on --cp-comm-type (arguments.py: a2a+p2p needs
// --hierarchical-context-parallel-sizes whose product is C) and Transformer Engine's
// (context_parallel.py: a2a "requires num_heads % cp_size == 0 for Q, K, V", per rank after TP;
// a2a+p2p the same over its a2a group).
std::optional<std::string> cpCommViolation(const ModelConfig& model, const Strategy& s) {
  const std::string flag = fmt::format("--cp {} --cp-comm-type {}", s.cp, cpCommName(s.cp_comm));
  if (s.cp_comm != CpComm::kA2aP2p && s.cp_a2a != 0) {
    return fmt::format("{} --hierarchical-context-parallel-sizes: only with --cp-comm-type a2a+p2p",
                       flag);
  }
  if (s.cp_comm == CpComm::kA2aP2p &&
      (s.cp_a2a < 1 || s.cp % s.cp_a2a != 0)) {
    return fmt::format(
        "{}: needs --hierarchical-context-parallel-sizes A,R with A x R = C (Megatron's check; "
        "got a2a size {})",
        flag, s.cp_a2a);
  }
  if (s.cp_comm != CpComm::kP2p && model.mla.enabled()) {
    return fmt::format("{}: with multi-latent attention ({}) only p2p is modelled", flag,
                       model.name);
  }
  if (s.cp_comm == CpComm::kP2p || s.cp_comm == CpComm::kAllGather) return std::nullopt;
  const int a2a = s.cpA2aSize();
  const int64_t heads = model.num_heads / s.tp, groups = model.queryGroups() / s.tp;
  if (heads % a2a != 0 || groups % a2a != 0) {
    return fmt::format(
        "{}: the a2a over {} ranks needs the rank's query heads ({}/M = {}) and key/value heads "
        "({}/M = {}) divisible by {} (Transformer Engine's num_heads % cp_size check)",
        flag, a2a, model.num_heads, heads, model.queryGroups(), groups, a2a);
  }
  return std::nullopt;
}

std::optional<std::string> contextParallelViolation(const ModelConfig& model, const Strategy& s) {
  if (s.cp < 1) return fmt::format("--cp {}: must be >= 1", s.cp);
  if (s.cp == 1) return std::nullopt;
  if (!model.spec.flash_attention) {
    return fmt::format(
        "--cp {}: context parallelism needs flash_attention: true in {} (Megatron runs ring "
        "attention only with fused attention)",
        s.cp, model.name);
  }
  // Megatron's load-balanced causal split: each CP rank holds 2 of 2C sequence chunks.
  if (model.seq_length % (2 * int64_t{s.cp}) != 0) {
    return fmt::format("--cp {}: 2 x C = {} does not divide seq_length={} of {}", s.cp, 2 * s.cp,
                       model.seq_length, model.name);
  }
  if (s.sequence_parallel && model.seq_length % (int64_t{s.cp} * s.tp) != 0) {
    return fmt::format("--cp {} --sequence-parallel: C x M = {} does not divide seq_length={}",
                       s.cp, s.cp * s.tp, model.seq_length);
  }
  return cpCommViolation(model, s);
}

// torchtitan's per-op checkpointing policy is modelled for its dense Llama-style blocks (one
// self-attention with flash attention, one MLP): its matmul count decides what is saved.
std::optional<std::string> opCheckpointViolation(const ModelConfig& model, const Strategy& s) {
  if (s.recompute_every < 0) {
    return fmt::format("--recompute-every {}: must be >= 1", s.recompute_every);
  }
  if (s.recompute_every > kMaxLayers) {  // no model has more blocks to step over
    return fmt::format("--recompute-every {}: at most {}, the most blocks a model may have",
                       s.recompute_every, kMaxLayers);
  }
  if (s.recompute_every > 1 && s.recompute != Recompute::kFull) {
    return fmt::format(
        "--recompute-every {}: checkpoints every N-th block in full (torchtitan's per-layer "
        "selective_ac_option); it needs --recompute full, not {}",
        s.recompute_every, recomputeName(s.recompute));
  }
  if (s.swiglu_recompute_product) {
    bool dense_swiglu = model.spec.mlp == MlpKind::kSwiGlu;
    for (const TransformerBlock& block : model.blocks) dense_swiglu = dense_swiglu && !block.moe;
    if (!dense_swiglu) {
      const bool swiglu = model.spec.mlp == MlpKind::kSwiGlu;
      return fmt::format(
          "--swiglu-kernel xformers: xformers' fused SwiGLU is modelled for dense SwiGLU MLPs; {} "
          "has {}",
          model.name, swiglu ? "mixture-of-experts blocks" : "no SwiGLU MLP");
    }
    if (s.tp_comm_overlap) {
      return "--swiglu-kernel xformers --tp-comm-overlap: Transformer Engine's userbuffer GEMMs "
             "are Megatron's kernels; not modelled with xformers' fused SwiGLU";
    }
    if (s.recompute == Recompute::kSelectiveOp) {
      return "--swiglu-kernel xformers --recompute selective-op: torchtitan's per-op policy is "
             "modelled for its own (unfused) MLP, not with xformers' fused SwiGLU";
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
  return fmt::format(
      "--recompute selective-op: modelled for dense self-attention + MLP blocks with flash "
      "attention (torchtitan's Llama); {} has {}",
      model.name, why);
}

std::optional<std::string> expertParallelViolation(const ModelConfig& model, const Strategy& s) {
  if (s.ep < 1) return fmt::format("--ep {}: must be >= 1", s.ep);
  const int64_t experts = model.moe.num_experts;
  if (experts > 0 && s.tp > 1 && !s.sequence_parallel) {
    return fmt::format(
        "--strategy {}: {} has experts and M={} > 1, which Megatron runs only with "
        "--sequence-parallel",
        s.name(), model.name, s.tp);
  }
  if (s.etp < 0) return fmt::format("--etp {}: must be >= 1", s.etp);
  const int etp = s.expertTp();
  if (s.etp > 0 && s.etp != s.tp) {
    if (experts == 0) {
      return fmt::format("--etp {}: {} has no experts (num_experts)", s.etp, model.name);
    }
    if (model.moe.expert_ffn % s.etp != 0) {
      return fmt::format("--etp {}: does not divide moe_ffn_hidden_size={} of {}", s.etp,
                         model.moe.expert_ffn, model.name);
    }
  }
  if (s.ep == 1 && etp == s.tp) return std::nullopt;
  if (experts == 0) {
    return fmt::format("--ep {}: {} has no experts (num_experts)", s.ep, model.name);
  }
  if (experts % s.ep != 0) {
    return fmt::format("--ep {}: does not divide num_experts={} of {}", s.ep, experts, model.name);
  }
  // Megatron's parallel_state: the expert ranks ETP x EP x expert-DP tile the M x D ranks of a
  // stage (and CP rank: eventsim keeps the EP group inside one CP rank).
  if ((int64_t{s.tp} * s.dp) % (int64_t{etp} * s.ep) != 0) {
    return etp == s.tp ? fmt::format(
                             "--ep {}: does not divide D={} (experts are sharded inside "
                             "the DP group)",
                             s.ep, s.dp)
                       : fmt::format(
                             "--etp {} --ep {}: ETP x E = {} does not divide M x D = {} "
                             "(Megatron's expert-data-parallel size)",
                             etp, s.ep, int64_t{etp} * s.ep, int64_t{s.tp} * s.dp);
  }
  return std::nullopt;
}

// Megatron-LM's own checks (megatron/training/arguments.py) on the two overlap flags, and what
// the models of them need (docs/TECHNIQUES.md).
std::optional<std::string> overlapViolation(const ModelConfig& model, const ClusterConfig& cluster,
                                            const Strategy& s, StrategyLabel label) {
  if (s.tp_comm_overlap) {
    if (!s.sequence_parallel) {
      return fmt::format(
          "{} --tp-comm-overlap: Tensor parallel communication/GEMM overlap can happen only when "
          "sequence parallelism is enabled (--sequence-parallel, M >= 2)",
          label);
    }
    if (s.framework != Framework::kMegatron) {
      return fmt::format("{} --tp-comm-overlap: Megatron-LM's (Transformer Engine's userbuffers); "
                         "not with --framework {}",
                         label, frameworkName(s.framework));
    }
    if (cluster.gpus_per_node % s.tp != 0) {
      return fmt::format(
          "{} --tp-comm-overlap: userbuffers need the TP group inside one node (M={} does not "
          "divide the {} GPUs of a node)",
          label, s.tp, cluster.gpus_per_node);
    }
    // The ring exchange runs M chunks of the gathered tokens, the pipelined reduce-scatter 4
    // (Transformer Engine's default num_splits).
    const int64_t tokens = s.micro_batch * model.seq_length / s.cp;
    if (tokens % (int64_t{4} * s.tp) != 0) {
      return fmt::format(
          "{} --tp-comm-overlap: the {} tokens of a micro-batch (b x s / C) do not split into M x "
          "4 = {} chunks (ring exchange over M, reduce-scatter in 4)",
          label, tokens, 4 * s.tp);
    }
  }
  if (s.grad_reduce_in_bf16 && s.framework != Framework::kMegatron) {
    return fmt::format(
        "{} --grad-reduce-in-bf16: Megatron's option; FSDP reduces gradients in its "
        "reduce_dtype (fp32, as torchtitan sets it)",
        label);
  }
  if (s.overlap_param_gather) {
    if (s.framework != Framework::kMegatron || s.zero_stage < 1 || s.zero_stage > 2) {
      return fmt::format(
          "{} --overlap-param-gather: only supported with distributed optimizer "
          "(--use-distributed-optimizer, --zero 1 or 2)",
          label);
    }
    if (!s.dp_overlap) {
      return fmt::format(
          "{} --overlap-param-gather: Must use --overlap-param-gather with --overlap-grad-reduce",
          label);
    }
  }
  return std::nullopt;
}

// The MoE communication flags: DeepEP's dispatcher and the all-to-all / compute overlap, with
// Megatron-LM's own checks on --overlap-moe-expert-parallel-comm (arguments.py) and what their
// models need (docs/TECHNIQUES.md).
std::optional<std::string> moeCommViolation(const ClusterConfig& cluster, const Strategy& s,
                                            StrategyLabel label) {
  if (s.moe_dispatcher == MoeDispatcher::kDeepEp) {
    if (s.ep < 2) {
      return fmt::format(
          "{} --moe-enable-deepep: DeepEP dispatches over the EP group; needs --ep "
          "> 1 (here {})",
          label, s.ep);
    }
    if (s.expertTp() != 1) {
      return fmt::format(
          "{} --moe-enable-deepep with expert TP {}: not modelled (eventsim's DeepEP sends whole "
          "tokens to whole experts: --etp 1)",
          label, s.expertTp());
    }
    const int g = cluster.gpus_per_node;
    if (s.ep % g != 0 && g % s.ep != 0) {
      return fmt::format(
          "{} --moe-enable-deepep --ep {}: the EP group must be whole nodes of {} GPUs or lie "
          "inside one (DeepEP's RDMA hop goes to the same local rank of every node)",
          label, s.ep, g);
    }
  }
  if (s.moe_a2a_overlap) {
    if (s.ep < 2) {
      return fmt::format(
          "{} --overlap-moe-expert-parallel-comm: expert_model_parallel_size must be > 1 "
          "(here --ep {})",
          label, s.ep);
    }
    if (s.schedule != Schedule::kInterleaved) {
      return fmt::format(
          "{} --overlap-moe-expert-parallel-comm: modelled in the interleaved schedule "
          "(Megatron's combined 1F1B with virtual stages); not with --schedule {}",
          label, scheduleName(s.schedule));
    }
    if (s.recompute == Recompute::kFull) {
      return fmt::format(
          "{} --overlap-moe-expert-parallel-comm: not with full recomputation (Megatron's "
          "check)",
          label);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view moeDispatcherName(MoeDispatcher dispatcher) {
  return dispatcher == MoeDispatcher::kDeepEp ? "deepep" : "alltoall";
}

std::optional<std::string> crossNodeTpViolation(const ClusterConfig& cluster, const Strategy& s) {
  if (cluster.gpus_per_node % s.tp == 0) return std::nullopt;
  return fmt::format(
      "--strategy {}: M={} does not divide the {} GPUs of a node (TP would cross nodes; "
      "--allow-cross-node-tp lifts this)",
      s.name(), s.tp, cluster.gpus_per_node);
}

std::optional<std::string> strategyViolation(const ModelConfig& model, const ClusterConfig& cluster,
                                             const Strategy& s) {
  const StrategyLabel label{s};
  if (s.tp <= 0 || s.pp <= 0 || s.dp <= 0) return fmt::format("{}: M, P and D must be > 0", label);
  // Before any int64 product of M, C, P and D (four ints may overflow one; exact in double here):
  // per-replica lists and op counts grow with the world, so it is bounded like the batch.
  const double world = static_cast<double>(s.tp) * s.cp * s.pp * s.dp;
  if (world > static_cast<double>(kMaxStrategyGpus)) {
    return fmt::format("{}: {} = {:.3g} GPUs, more than the {} eventsim simulates", label,
                       s.cp > 1 ? "M x C x P x D" : "M x P x D", world, kMaxStrategyGpus);
  }
  if (auto why = contextParallelViolation(model, s)) return why;
  if (auto why = expertParallelViolation(model, s)) return why;
  if (auto why = opCheckpointViolation(model, s)) return why;
  if (model.num_heads % s.tp != 0) {
    return fmt::format("{}: M={} does not divide num_heads={} of {}", label, s.tp, model.num_heads,
                       model.name);
  }
  if (model.hidden_size % s.tp != 0) {
    return fmt::format("{}: M={} does not divide hidden_size={} of {}", label, s.tp,
                       model.hidden_size, model.name);
  }
  if (model.queryGroups() % s.tp != 0) {
    return fmt::format("{}: M={} does not divide num_query_groups={} of {}", label, s.tp,
                       model.queryGroups(), model.name);
  }
  if (model.ffn_hidden_size % s.tp != 0) {
    return fmt::format("{}: M={} does not divide ffn_hidden_size={} of {}", label, s.tp,
                       model.ffn_hidden_size, model.name);
  }
  if (s.pp > model.numLayers()) {
    return fmt::format("{}: P={} is more than the {} layers of {}", label, s.pp, model.numLayers(),
                       model.name);
  }
  if (auto total = cluster.totalGpus(); total && s.gpus() > *total) {
    return fmt::format("{}: needs {} GPUs, cluster {} has {} ({} nodes x {})", label, s.gpus(),
                       cluster.name, *total, *cluster.nodes, cluster.gpus_per_node);
  }
  if (s.micro_batch <= 0) return fmt::format("--micro-batch {}: must be > 0", s.micro_batch);
  if (s.global_batch <= 0) return fmt::format("--global-batch {}: must be > 0", s.global_batch);
  // The work an iteration implies is bounded before any plan is built: 10^8 micro-batches were
  // killed by the kernel at 21.6 GB (issue 17). The bounds are far beyond any training run.
  if (s.micro_batch > kMaxMicroBatch) {
    return fmt::format("--micro-batch {}: must be <= {}", s.micro_batch, kMaxMicroBatch);
  }
  if (s.global_batch > kMaxGlobalBatch) {
    return fmt::format("--global-batch {}: must be <= {}", s.global_batch, kMaxGlobalBatch);
  }
  if (s.global_batch % (s.micro_batch * s.dp) != 0) {
    return fmt::format("--global-batch {}: not divisible by micro-batch x D = {} x {} = {}",
                       s.global_batch, s.micro_batch, s.dp, s.micro_batch * s.dp);
  }
  if (s.microBatches() > kMaxMicroBatches) {
    return fmt::format(
        "--global-batch {}: m = B/(b*D) = {} micro-batches per iteration, more than the {} "
        "eventsim simulates (raise --micro-batch or D)",
        s.global_batch, s.microBatches(), kMaxMicroBatches);
  }
  // The simulation steps every block of every micro-batch: 4096 blocks x 512 micro-batches took a
  // minute on one core, the largest files and flags allowed hours. Bounded 16x beyond the largest
  // runs (126 blocks x 2048 micro-batches).
  constexpr int64_t kMaxBlockExecutions = int64_t{1} << 22;
  if (model.numLayers() * s.microBatches() > kMaxBlockExecutions) {
    return fmt::format(
        "--global-batch {}: {} blocks x m = {} micro-batches = {} block executions per iteration, "
        "more than the {} eventsim simulates (raise --micro-batch or D)",
        s.global_batch, model.numLayers(), s.microBatches(), model.numLayers() * s.microBatches(),
        kMaxBlockExecutions);
  }
  if (s.dp_overlap && s.dp_bucket_bytes < 0) {
    return fmt::format(
        "--dp-bucket-mb: bucket of {} bytes must be > 0 (0: the framework's default)",
        s.dp_bucket_bytes);
  }
  if (s.schedule == Schedule::kInterleaved) {
    if (s.virtual_stages < 2) {
      return fmt::format("--virtual-stages {}: the interleaved schedule needs v >= 2",
                         s.virtual_stages);
    }
    if (s.pp < 2) return fmt::format("{}: the interleaved schedule needs P >= 2", label);
    // Given stage layers are checked below (the first and last chunk may hold no block).
    if (s.stage_layers.empty() && int64_t{s.pp} * s.virtual_stages > model.numLayers()) {
      return fmt::format("{} --virtual-stages {}: P x v = {} model chunks but {} has {} layers",
                         label, s.virtual_stages, int64_t{s.pp} * s.virtual_stages, model.name,
                         model.numLayers());
    }
    // Megatron's table (schedules.py, get_schedule_table): groups of N micro-batches, the last
    // one the remainder, which must be 0 or >= P (a shorter last group is refused there).
    const int64_t m = s.microBatches();
    const int64_t group = s.microbatchGroup();
    if (s.microbatch_group == 0 && m % s.pp != 0) {
      return fmt::format(
          "{} --schedule interleaved: m = B/(b*D) = {} micro-batches is not a "
          "multiple of P={} (or give --microbatch-group-size N)",
          label, m, s.pp);
    }
    if (group > m) {
      return fmt::format("--microbatch-group-size {}: more than the m = B/(b*D) = {} micro-batches",
                         group, m);
    }
    // Megatron refuses N < P: with its warm-up count the orders then wait on each other (the
    // timing engine finds the deadlock); the Llama 3 paper's N < P needs a warm-up it does not
    // state.
    if (group < s.pp) {
      return fmt::format(
          "--microbatch-group-size {}: fewer than P={} (Megatron's range is [P, m]; a smaller "
          "group deadlocks its warm-up count)",
          group, s.pp);
    }
    if (m % group != 0 && m % group < s.pp) {
      return fmt::format(
          "--microbatch-group-size {}: m = {} micro-batches leave a last group of {}, which must "
          "be 0 or >= P={} (Megatron's rule)",
          group, m, m % group, s.pp);
    }
  } else if (s.schedule == Schedule::kZbv || s.schedule == Schedule::kDualPipeV) {
    const std::string_view name = scheduleName(s.schedule);
    if (s.pp < 2) return fmt::format("{}: the {} schedule needs P >= 2", label, name);
    if (int64_t{2} * s.pp > model.numLayers()) {
      return fmt::format("{} --schedule {}: 2 x P = {} model chunks but {} has {} layers", label,
                         name, 2 * s.pp, model.name, model.numLayers());
    }
    // DualPipeV's order (deepseek-ai/DualPipe, dualpipev.py) asserts m >= 2P: its warm-up
    // forwards 2P micro-batches through chunk 0 of device 0 before the first fused pair.
    if (s.schedule == Schedule::kDualPipeV && s.microBatches() < int64_t{2} * s.pp) {
      return fmt::format(
          "{} --schedule dualpipev: m = B/(b*D) = {} micro-batches, the schedule needs m >= 2P "
          "= {}",
          label, s.microBatches(), 2 * s.pp);
    }
  }
  if (s.schedule == Schedule::kFile) {
    const std::shared_ptr<const ScheduleFile> file = installedScheduleFile();
    if (!file) return std::string("--schedule file: no schedule file loaded");
    if (file->layout.devices() != s.pp || file->micro_batches != s.microBatches()) {
      return fmt::format(
          "{} --schedule {}: written for P={} and m={} micro-batches, the strategy "
          "has P={} and m = B/(b*D) = {}",
          label, file->path, file->layout.devices(), file->micro_batches, s.pp, s.microBatches());
    }
    if (int64_t{file->layout.stages()} > model.numLayers()) {
      return fmt::format("{} --schedule {}: {} model chunks but {} has {} layers", label,
                         file->path, file->layout.stages(), model.name, model.numLayers());
    }
  }
  if (s.schedule != Schedule::kInterleaved && s.microbatch_group != 0) {
    return fmt::format("--microbatch-group-size {}: only with --schedule interleaved",
                       s.microbatch_group);
  }
  if (s.schedule != Schedule::kInterleaved && s.virtual_stages != 1) {
    return fmt::format("--virtual-stages {}: only with --schedule interleaved", s.virtual_stages);
  }
  // Zero-bubble orders fill the warm-up with at least P forwards (plan/schedules/zb_h*.cpp).
  if ((s.schedule == Schedule::kZbh1 || s.schedule == Schedule::kZbh2) && s.microBatches() < s.pp) {
    return fmt::format(
        "{} --schedule {}: m = B/(b*D) = {} micro-batches, the schedule needs m >= P={}", label,
        scheduleName(s.schedule), s.microBatches(), s.pp);
  }
  // The attention scores of one layer, b x a x s^2 elements, size the op list's saved bytes and
  // memory traffic in int64 (bytes: times up to 4): bounded here, before any product is formed.
  constexpr double kMaxScoreElements = 36028797018963968.0;  // 2^55
  const double score_elements =
      static_cast<double>(s.micro_batch) * static_cast<double>(model.num_heads) *
      static_cast<double>(model.seq_length) * static_cast<double>(model.seq_length);
  if (score_elements > kMaxScoreElements) {
    return fmt::format(
        "{} b={}: the attention scores of one layer, b x a x s^2 = {:.3g} elements, are more "
        "than eventsim models (2^55)",
        label, s.micro_batch, score_elements);
  }
  // Likewise the widest activation of a layer, b x s x max(h, 2 x ffn (SwiGLU), V/M) elements (the
  // logits in fp32 times 4 bytes overflowed int64 within the other bounds).
  const double widest = std::max({static_cast<double>(model.hidden_size),
                                  2.0 * static_cast<double>(model.ffn_hidden_size),
                                  static_cast<double>(model.vocab_size) / s.tp});
  const double activation_elements =
      static_cast<double>(s.micro_batch) * static_cast<double>(model.seq_length) * widest;
  if (activation_elements > kMaxScoreElements) {
    return fmt::format(
        "{} b={}: the widest activation of one layer, b x s x max(h, 2 x ffn, V/M) = {:.3g} "
        "elements, is more than eventsim models (2^55)",
        label, s.micro_batch, activation_elements);
  }
  if (!s.stage_layers.empty()) {
    const int chunks = pipelineLayout(s).stages();
    if (static_cast<int>(s.stage_layers.size()) != chunks) {
      return fmt::format("--stage-layers: {} entries for {} model chunks (P x v)",
                         s.stage_layers.size(), chunks);
    }
    int64_t total = 0;
    for (size_t k = 0; k < s.stage_layers.size(); ++k) {
      const int n = s.stage_layers[k];
      // The first chunk (the embedding) and the last (the loss) may hold no block, as Megatron's
      // --account-for-embedding/loss-in-pipeline-split makes them with one layer per chunk.
      const bool end_chunk = chunks > 1 && (k == 0 || k + 1 == s.stage_layers.size());
      if (n < (end_chunk ? 0 : 1)) {
        return fmt::format(
            "--stage-layers: {}: every chunk needs >= 1 layer (the first and last >= 0)", n);
      }
      total += n;
    }
    if (total != model.numLayers()) {
      return fmt::format("--stage-layers: {} layers in all, but {} has {}", total, model.name,
                         model.numLayers());
    }
  }
  if (s.sequence_parallel) {
    if (s.tp < 2) return fmt::format("{} --sequence-parallel: needs M >= 2", label);
    if (model.seq_length % s.tp != 0) {
      return fmt::format("{} --sequence-parallel: M={} does not divide seq_length={} of {}", label,
                         s.tp, model.seq_length, model.name);
    }
  }
  if (s.zero_stage < 0 || s.zero_stage > 3) {
    return fmt::format("--zero {}: must be 0, 1, 2 or 3", s.zero_stage);
  }
  if (s.framework == Framework::kFsdp) {
    // FSDP's full shard is ZeRO-3's layout and events; without a group to shard over it runs as
    // plain replicas (torchtitan with dp_shard = 1).
    const int expected = s.gradGroupSize() > 1 ? 3 : 0;
    if (s.zero_stage != expected) {
      return fmt::format(
          "{} --framework fsdp --zero {}: FSDP shards parameters, gradients and optimizer state "
          "over D x C = {} (ZeRO stage {}); no other stage applies",
          label, s.zero_stage, s.gradGroupSize(), expected);
    }
    if (s.offload != Offload::kNone) {
      return fmt::format("{} --framework fsdp --offload {}: FSDP's CPU offload is not modelled",
                         label, offloadName(s.offload));
    }
  }
  if (auto why = frameworkFlagViolation(s)) return why;
  if (auto why = overlapViolation(model, cluster, s, label)) return why;
  if (auto why = moeCommViolation(cluster, s, label)) return why;
  if (s.zero_stage == 3 && s.dp_overlap) {
    return fmt::format(
        "{} --zero 3 --dp-overlap: ZeRO-3 reduce-scatters each layer's gradients "
        "inside the backward; there are no DDP buckets to overlap",
        label);
  }
  if (s.zero_stage > 0 && s.gradGroupSize() < 2) {
    return fmt::format("{} --zero {}: sharding over the DP group needs D x C >= 2", label,
                       s.zero_stage);
  }
  if (s.offload != Offload::kNone) {
    if (!cluster.host_link || !cluster.host_memory) {
      return fmt::format(
          "--offload {}: cluster {} has no host side to offload to (node: host_link and "
          "host_memory in {})",
          offloadName(s.offload), cluster.name, cluster.source);
    }
    if (offloadsActivations(s.offload) && pipelineSchedule(s.schedule).splitsBackward()) {
      return fmt::format(
          "{} --offload {} --schedule {}: not modelled (a split backward keeps its W inputs on "
          "the device between B and W)",
          label, offloadName(s.offload), scheduleName(s.schedule));
    }
  }
  return std::nullopt;
}

void validateStrategy(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& s) {
  if (auto why = strategyViolation(model, cluster, s)) EVSIM_THROW(InputError, "{}", *why);
}

}  // namespace evsim
