// RunOptions' strategy flags turned into a Strategy (and the --gpus union), with Megatron's
// layer split and MoE dispatcher rules; each bad combination is an InputError naming its flag.
#include "io/run_options.h"

#include <algorithm>
#include <cmath>

#include "common/checked.h"
#include "common/error.h"
#include "common/strings.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"

namespace evsim {

namespace {

// Megatron-LM's layers per model chunk (get_num_layers_to_build / get_transformer_layer_offset):
// the first and/or last pipeline stage get the given blocks and the others share the rest evenly;
// with v chunks per stage each stage's blocks split evenly over its chunks. Accounting for the
// embedding (loss) counts it as one layer of the first (last) chunk: the L + 1 (+ 1) layers split
// evenly over the P x v chunks, and that chunk builds one block fewer. Chunks are returned in
// virtual-stage order (chunk c of stage p at the layout's virtualStage(p, c): c x P + p looped,
// p and 2P-1-p on the V layout, where stage 0 holds the first and the last chunk).
struct MegatronSplit {
  int layers;
  PipelineLayout layout;
  int first, last;
  bool embedding, loss;
};
std::vector<int> megatronSplit(const MegatronSplit& m) {
  const int P = m.layout.devices(), v = m.layout.chunks();
  if (P < 2) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers, --account-for-*-in-pipeline-split: need "
                "P >= 2 pipeline stages, not {}",
                P);
  }
  if ((m.first > 0 || m.last > 0) && (m.embedding || m.loss)) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers with --account-for-*-in-pipeline-split: "
                "Megatron allows one or the other");
  }
  std::vector<int> per_stage(static_cast<size_t>(P));
  if (m.embedding || m.loss) {
    const int total = m.layers + m.embedding + m.loss;
    if (total % (P * v) != 0) {
      EVSIM_THROW(InputError,
                  "--account-for-*-in-pipeline-split: {} layers + {} (embedding/loss) = {} do not "
                  "split evenly over P x v = {} model chunks",
                  m.layers, m.embedding + m.loss, total, P * v);
    }
    std::vector<int> out(static_cast<size_t>(P * v), total / (P * v));
    if (m.embedding) --out.front();
    if (m.loss) --out.back();
    for (int n : out) {
      if (n < 0) {
        EVSIM_THROW(InputError,
                    "--account-for-*-in-pipeline-split: {} layers over P x v = {} chunks leave "
                    "the embedding or the loss without a chunk of its own",
                    m.layers, P * v);
      }
    }
    return out;
  }
  const int fixed = (m.first > 0) + (m.last > 0);
  const int middle_stages = P - fixed;
  const int middle_layers = m.layers - m.first - m.last;
  if (middle_stages < 0 || middle_layers < 0 || (middle_stages == 0 && middle_layers != 0) ||
      (middle_stages > 0 && (middle_layers % middle_stages != 0 || middle_layers == 0))) {
    EVSIM_THROW(InputError,
                "--decoder-first/last-pipeline-num-layers {}/{}: the other {} layers do not split "
                "evenly over the other {} of P={} stages",
                m.first, m.last, middle_layers, middle_stages, P);
  }
  per_stage.assign(static_cast<size_t>(P), middle_stages > 0 ? middle_layers / middle_stages : 0);
  if (m.first > 0) per_stage.front() = m.first;
  if (m.last > 0) per_stage.back() = m.last;
  std::vector<int> out(static_cast<size_t>(P * v));
  for (int p = 0; p < P; ++p) {
    if (per_stage[p] % v != 0) {
      EVSIM_THROW(InputError,
                  "--decoder-first/last-pipeline-num-layers {}/{}: stage {}'s {} layers do not "
                  "split evenly over its {} virtual stages",
                  m.first, m.last, p, per_stage[p], v);
    }
    for (int c = 0; c < v; ++c) {
      out[static_cast<size_t>(m.layout.virtualStage(p, c))] = per_stage[p] / v;
    }
  }
  return out;
}

// Megatron's --moe-token-dispatcher-type and --moe-enable-deepep (arguments.py: DeepEP needs the
// flex dispatcher, which needs a backend; eventsim models DeepEP's).
MoeDispatcher parseMoeDispatcher(const std::string& type, bool deepep) {
  if (type == "alltoall") {
    if (deepep) {
      EVSIM_THROW(InputError,
                  "--moe-enable-deepep: DeepEP is only supported with the flex token dispatcher "
                  "(--moe-token-dispatcher-type flex)");
    }
    return MoeDispatcher::kAllToAll;
  }
  if (type == "flex") {
    if (!deepep) {
      EVSIM_THROW(InputError,
                  "--moe-token-dispatcher-type flex: give its backend, --moe-enable-deepep (the "
                  "one eventsim models)");
    }
    return MoeDispatcher::kDeepEp;
  }
  if (type == "allgather") {
    EVSIM_THROW(InputError,
                "--moe-token-dispatcher-type allgather: not modelled (alltoall, or flex with "
                "--moe-enable-deepep)");
  }
  EVSIM_THROW(InputError,
              "--moe-token-dispatcher-type '{}': expected alltoall, allgather or flex", type);
}

}  // namespace

void RunOptions::checkTpPlacement(const ModelConfig& model, const ClusterConfig& cluster,
                                  const Strategy& s) const {
  // An invalid strategy is reported by its own rule first (the plan builder's message).
  if (allow_cross_node_tp || strategyViolation(model, cluster, s)) return;
  if (std::optional<std::string> v = crossNodeTpViolation(cluster, s)) {
    EVSIM_THROW(InputError, "{}", *v);
  }
}

void RunOptions::requireInterleaved(const char* flag) const {
  // An explicit other schedule was silently replaced by interleaved (issue 31).
  if (schedule_option != nullptr && schedule_option->count() > 0 &&
      toLower(trim(schedule)) != "interleaved") {
    EVSIM_THROW(InputError,
                "{} with --schedule {}: model chunks per device need --schedule interleaved (or "
                "no --schedule)",
                flag, schedule);
  }
}

Strategy RunOptions::strategy(const ModelConfig& model_config) const {
  if (!more_strategy_texts.empty()) {
    EVSIM_THROW(InputError,
                "--strategy {} and --strategy {}: one plan here (eventsim simulate compares "
                "several side by side)",
                strategy_text, more_strategy_texts.front());
  }
  return strategyOf(model_config, strategy_text);
}

std::vector<Strategy> RunOptions::strategies(const ModelConfig& model_config) const {
  std::vector<Strategy> out = {strategyOf(model_config, strategy_text)};
  for (const std::string& text : more_strategy_texts) {
    out.push_back(strategyOf(model_config, text));
  }
  return out;
}

Strategy RunOptions::strategyOf(const ModelConfig& model_config,
                                const std::string& strategy_text) const {
  Strategy s;
  if (!strategy_text.empty()) {
    if (gpus > 0) EVSIM_THROW(InputError, "--gpus {}: give --tp and --pp, not --strategy", gpus);
    parseStrategyText(strategy_text, s);
  } else if (gpus > 0) {
    if (dp > 0)
      EVSIM_THROW(InputError, "--dp {} with --gpus {}: D is derived, drop --dp", dp, gpus);
    // Megatron's defaults: a size not given is 1.
    const int M = tp > 0 ? tp : 1, P = pp > 0 ? pp : 1;
    if (gpus % (int64_t{M} * P * cp) != 0) {
      if (cp == 1) {
        EVSIM_THROW(InputError, "--gpus {}: not divisible by M x P = {} x {}", gpus, M, P);
      }
      EVSIM_THROW(InputError, "--gpus {}: not divisible by M x P x C = {} x {} x {}", gpus, M, P,
                  cp);
    }
    s.tp = M;
    s.pp = P;
    s.dp = static_cast<int>(gpus / (int64_t{M} * P * cp));
  } else if (tp > 0 || pp > 0 || dp > 0) {
    if (tp <= 0 || pp <= 0 || dp <= 0) {
      EVSIM_THROW(InputError, "--tp {} --pp {} --dp {}: give all three, each > 0 (or --strategy)",
                  tp, pp, dp);
    }
    s.tp = tp;
    s.pp = pp;
    s.dp = dp;
  } else {
    EVSIM_THROW(InputError,
                "--strategy: missing (give --strategy 2M4P2D, --tp/--pp/--dp, or --tp/--pp "
                "--gpus N)");
  }
  s.cp = cp;
  s.cp_comm = parseCpComm(cp_comm_types.front());
  for (const std::string& type : cp_comm_types) {
    if (parseCpComm(type) != s.cp_comm) {
      EVSIM_THROW(InputError,
                  "--cp-comm-type {}: a different type per layer is not modelled; give one type "
                  "for every layer",
                  fmt::join(cp_comm_types, " "));
    }
  }
  if (!hierarchical_cp_sizes.empty()) {
    int64_t product = 1;
    for (int size : hierarchical_cp_sizes) product *= size;
    // Megatron: prod(sizes) == C; Transformer Engine's a2a+p2p has two levels (a2a, p2p).
    if (hierarchical_cp_sizes.size() != 2 || product != cp) {
      EVSIM_THROW(InputError,
                  "--hierarchical-context-parallel-sizes {}: give two sizes A R with A x R = "
                  "--cp {} (the a2a and p2p levels of a2a+p2p)",
                  fmt::join(hierarchical_cp_sizes, " "), cp);
    }
    s.cp_a2a = hierarchical_cp_sizes.front();
  }
  s.ep = ep;
  s.etp = etp;
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  s.schedule = parseSchedule(schedule);
  s.dp_overlap = dp_overlap;
  s.overlap_param_gather = overlap_param_gather;
  s.grad_reduce_in_bf16 = grad_reduce_in_bf16;
  s.grad_reduce_sync = parseGradReduceSync(grad_reduce_sync, "--grad-reduce-sync");
  s.grad_reduce_queue = grad_reduce_queue;
  s.tp_comm_overlap = tp_comm_overlap;
  s.moe_dispatcher = parseMoeDispatcher(moe_dispatcher_type, moe_enable_deepep);
  s.moe_a2a_overlap = moe_a2a_overlap;
  if (dp_bucket_mb < 0 || !std::isfinite(dp_bucket_mb)) {
    EVSIM_THROW(InputError, "--dp-bucket-mb {}: must be > 0", dp_bucket_mb);
  }
  s.dp_bucket_bytes = static_cast<int64_t>(dp_bucket_mb * 1024 * 1024);  // 0: the default
  if (dp_bucket_mb > 0 && s.dp_bucket_bytes == 0) {
    // Not 0, which would silently mean the framework's default.
    EVSIM_THROW(InputError, "--dp-bucket-mb {}: under one byte", dp_bucket_mb);
  }
  s.virtual_stages = virtual_stages;
  if (megatron_virtual_stages > 0) {
    requireInterleaved("--virtual-pipeline-model-parallel-size");
    s.virtual_stages = megatron_virtual_stages;
    s.schedule = Schedule::kInterleaved;
  }
  if (layers_per_virtual_stage > 0) {
    // Megatron: L / (P x layers per chunk) chunks per device.
    const int64_t per_device = int64_t{s.pp} * layers_per_virtual_stage;
    if (model_config.numLayers() % per_device != 0) {
      EVSIM_THROW(InputError,
                  "--num-layers-per-virtual-pipeline-stage {}: P x {} does not divide the {} "
                  "layers of {}",
                  layers_per_virtual_stage, layers_per_virtual_stage, model_config.numLayers(),
                  model_config.name);
    }
    s.virtual_stages = static_cast<int>(model_config.numLayers() / per_device);
    requireInterleaved("--num-layers-per-virtual-pipeline-stage");
    s.schedule = Schedule::kInterleaved;
  }
  s.microbatch_group = microbatch_group;
  s.recompute_every = recompute_every;
  s.swiglu_recompute_product = swiglu_kernel == "xformers";
  s.recompute = parseRecompute(recompute_activations ? "selective" : recompute);
  if (recompute_num_layers > 1) {
    EVSIM_THROW(InputError,
                "--recompute-num-layers {}: not modelled (eventsim recomputes each layer on its "
                "own: --recompute-num-layers 1)",
                recompute_num_layers);
  }
  if (recompute_method == "block") {
    EVSIM_THROW(InputError,
                "--recompute-method block: not modelled (eventsim recomputes every layer, "
                "Megatron's uniform method)");
  }
  if (!recompute_method.empty() && s.recompute != Recompute::kFull) {
    EVSIM_THROW(InputError, "--recompute-method {}: applies to --recompute-granularity full",
                recompute_method);
  }
  s.sequence_parallel = sequence_parallel || tp_comm == "rs-ag";
  s.zero_stage = distributed_optimizer ? 1 : zero_stage;
  s.offload = parseOffload(offload);
  applyFramework(s);
  if (ddp_bucket_params > 0) {
    // Megatron's bucket_size counts parameters (DistributedDataParallelConfig: "Maximum number of
    // parameters in each bucket"; param_and_grad_buffer.py closes a bucket once it spans that
    // many elements): in bytes, times the gradient buffer's element size (fp32 under --bf16).
    s.dp_bucket_bytes = checkedMul(
        ddp_bucket_params,
        dtypeBytes(dataParallelGradDtype(s.framework, model_config.dtype, s.grad_reduce_in_bf16)),
        "--ddp-bucket-size bytes");
  }
  if (!stage_layers.empty()) {
    // In order, repeats kept (parseIntList makes a set: "6,14,14" is three chunks here).
    for (const std::string& part : split(stage_layers, ',')) {
      const std::optional<int64_t> n = parseInteger(trim(part));
      if (!n || *n < 1 || *n > kMaxLayers) {
        EVSIM_THROW(InputError, "--stage-layers '{}': '{}' is not a layer count in 1..{}",
                    stage_layers, part, kMaxLayers);
      }
      if (s.stage_layers.size() >= static_cast<size_t>(kMaxLayers)) {
        EVSIM_THROW(InputError, "--stage-layers: more than {} entries", kMaxLayers);
      }
      s.stage_layers.push_back(static_cast<int>(*n));
    }
  } else if (first_stage_layers > 0 || last_stage_layers > 0 || account_for_embedding ||
             account_for_loss) {
    // In virtual-stage order: the first and last chunk are k = 0 and k = P*v - 1 under any layout.
    s.stage_layers = megatronSplit(MegatronSplit{
        static_cast<int>(model_config.numLayers()), pipelineLayout(s), first_stage_layers,
        last_stage_layers, account_for_embedding, account_for_loss});
  }
  return s;
}

std::pair<Strategy, StrategySpace> RunOptions::unionSpace(int64_t gpus,
                                                          const std::string& micro_batches) const {
  const bool techniques =
      cp != 1 || ep != 1 || etp != 0 || microbatch_group != 0 || recompute != "none" ||
      recompute_every != 0 || swiglu_kernel != "megatron" || sequence_parallel ||
      tp_comm == "rs-ag" || zero_stage != 0 ||
      distributed_optimizer || virtual_stages != 1 || layers_per_virtual_stage > 0 ||
      megatron_virtual_stages > 0 || recompute_activations || !stage_layers.empty() ||
      first_stage_layers > 0 || last_stage_layers > 0 || account_for_embedding ||
      account_for_loss || framework != "megatron" ||
      parseSchedule(schedule) == Schedule::kInterleaved ||
      parseOffload(offload) != Offload::kNone || tp_comm_overlap || overlap_param_gather ||
      grad_reduce_in_bf16 || grad_reduce_sync != "backward" || grad_reduce_queue != 0 ||
      moe_enable_deepep || moe_dispatcher_type != "alltoall" || moe_a2a_overlap ||
      dp_bucket_mb > 0 || ddp_bucket_params > 0;
  if (techniques) {
    EVSIM_THROW(
        InputError,
        "--gpus {}: the union covers GPipe/DAPPLE strategies without techniques; for "
        "--cp, --ep, --schedule interleaved, --recompute, --sequence-parallel, --zero, --offload, "
        "a bucket size or the overlap flags "
        "write the union with `eventsim search ... --write-events FILE` and profile --events FILE",
        gpus);
  }
  Strategy base;
  base.global_batch = global_batch;
  base.dp_overlap = dp_overlap;
  if (base.global_batch <= 0) EVSIM_THROW(InputError, "--global-batch: required with --gpus");
  // The union's strategies are Megatron's (refused above otherwise): --optimizer-impl foreach,
  // --reshard-after-forward and --torch-compile are refused as simulate and search refuse them,
  // not dropped (the union's events would be the fused step's).
  applyFramework(base);
  if (auto why = frameworkFlagViolation(base)) EVSIM_THROW(InputError, "{}", *why);
  StrategySpace space;
  space.gpus = gpus;
  space.micro_batches = parseIntList(micro_batches, "--micro-batches");
  if (!space.micro_batches.empty() && space.micro_batches.front() < 1) {
    EVSIM_THROW(InputError, "--micro-batches {}: a micro-batch size must be >= 1, not {}",
                micro_batches, space.micro_batches.front());
  }
  space.schedules = {parseSchedule(schedule)};
  space.dp_overlaps = {dp_overlap};
  return {base, space};
}

}  // namespace evsim
