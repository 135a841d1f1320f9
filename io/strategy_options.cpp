// RunOptions' strategy flags: registering them (--strategy, --tp/--pp/--dp and Megatron's names,
// the techniques, the framework), and Megatron's arguments that change nothing.
#include "io/run_options.h"

#include <fmt/format.h>

#include "io/cli_checks.h"
#include "io/megatron_args.h"
#include "plan/optimizer_step.h"

namespace evsim {

void RunOptions::addStrategyOptions(CLI::App& app, bool strategy_required) {
  // Repeatable: simulate compares the plans given (strategy() refuses more than one elsewhere).
  auto* text = app.add_option_function<std::vector<std::string>>(
                      "--strategy",
                      [this](const std::vector<std::string>& texts) {
                        strategy_text = texts.front();
                        more_strategy_texts.assign(texts.begin() + 1, texts.end());
                      },
                      "xMxPxD, e.g. 2M4P2D (any case)")
                   ->expected(1)
                   ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // Checked here: "--tp 0 --pp 2 --gpus 4" was told to give --tp and --pp, which it had.
  auto* tp_opt = app.add_option("--tp,--tensor-model-parallel-size", tp, "tensor-parallel size M")
                     ->check(kPositiveInteger);
  auto* pp_opt =
      app.add_option("--pp,--pipeline-model-parallel-size", pp, "pipeline-parallel size P")
          ->check(kPositiveInteger);
  auto* dp_opt = app.add_option("--dp", dp, "data-parallel size D")->check(kPositiveInteger);
  text->excludes(tp_opt)->excludes(pp_opt)->excludes(dp_opt);
  app.add_option("--cp,--context-parallel-size", cp,
                 "context-parallel size C: each sequence split over C ranks (ring attention)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--cp-comm-type", cp_comm_types,
                 "context parallelism's exchange (Megatron's / Transformer Engine's): p2p (ring "
                 "attention) | a2a (Ulysses) | allgather (Llama 3's K/V all-gather) | a2a+p2p "
                 "(with --hierarchical-context-parallel-sizes); one type for every layer")
      ->expected(1, 1 << 16)
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--hierarchical-context-parallel-sizes", hierarchical_cp_sizes,
                 "a2a+p2p: A R, the a2a group of A consecutive CP ranks and the ring over R "
                 "(A x R = C)")
      ->expected(1, 16)
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--ep,--expert-model-parallel-size", ep,
                 "expert-parallel size E: MoE experts sharded over E ranks of the DP group")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--etp,--expert-tensor-parallel-size", etp,
                 "expert tensor-parallel size: each routed expert's FFN split over ETP ranks "
                 "(default M, Megatron's)")
      ->check(CLI::Range(1, 1 << 16));
  auto* b = app.add_option("--micro-batch,--micro-batch-size", micro_batch, "micro-batch size b");
  auto* B = app.add_option("--global-batch,--global-batch-size", global_batch,
                           "global batch B (m = B / (b*D))");
  if (strategy_required) {
    b->required();
    B->required();
  } else {
    // Optional here (events, eventprof, import-kineto): 0 read as "not given" and was refused as
    // missing.
    B->check(kPositiveInteger);
  }
  schedule_option =
      app.add_option("--schedule", schedule,
                     "gpipe | dapple (1F1B) | interleaved | zbh1 | zbh2 | zbv | dualpipev | "
                     "FILE.csv")
          ->capture_default_str();
  auto* v = app.add_option("--virtual-stages", virtual_stages,
                           "model chunks per device v (with --schedule interleaved)")
                ->capture_default_str();
  auto* layers_per_chunk =
      app.add_option("--num-layers-per-virtual-pipeline-stage", layers_per_virtual_stage,
                     "Megatron's form of v: layers per model chunk (implies --schedule "
                     "interleaved)")
          ->check(kPositiveInteger)
          ->excludes(v);
  app.add_option("--microbatch-group-size,--microbatch-group-size-per-virtual-pipeline-stage",
                 microbatch_group,
                 "interleaved schedule: N contiguous micro-batches per model chunk (Megatron's "
                 "group, the Llama 3 paper's N; default P)")
      ->check(kPositiveInteger);
  app.add_option("--virtual-pipeline-model-parallel-size", megatron_virtual_stages,
                 "Megatron's: model chunks per device v (implies --schedule interleaved)")
      ->check(kPositiveInteger)
      ->excludes(v)
      ->excludes(layers_per_chunk);
  auto* granularity = app.add_option("--recompute,--recompute-granularity", recompute,
                                     "activation recomputation: none | full | selective | "
                                     "selective-op (torchtitan's per-op policy)")
                          ->capture_default_str();
  app.add_option(
         "--recompute-every", recompute_every,
         "with --recompute full: checkpoint only every N-th block of each rank (torchtitan's "
         "selective_ac_option = N; counted over the rank's blocks in chunk order)")
      ->check(kPositiveInteger);
  app.add_option("--swiglu-kernel", swiglu_kernel,
                 "the dense SwiGLU MLP's kernels: megatron (the activation keeps its input, fc2 "
                 "the product) | xformers (xformers' fused SwiGLU: keeps the fc1 outputs, the "
                 "backward recomputes the product)")
      ->check(CLI::IsMember({"megatron", "xformers"}))
      ->capture_default_str();
  app.add_flag("--recompute-activations", recompute_activations,
               "Megatron's: selective recomputation (--recompute selective)")
      ->excludes(granularity);
  app.add_option("--recompute-method", recompute_method,
                 "Megatron's: uniform (every layer, as --recompute full models it)")
      ->check(CLI::IsMember({"uniform", "block"}));
  app.add_option("--recompute-num-layers", recompute_num_layers,
                 "Megatron's: layers per recomputed group with --recompute-method uniform (1: "
                 "every layer on its own, as eventsim models it)")
      ->check(kPositiveInteger);
  CLI::Option* sp = app.add_flag("--sequence-parallel", sequence_parallel,
                                 "Megatron sequence parallelism over the TP group");
  app.add_option("--tp-comm", tp_comm,
                 "TP communication: allreduce | rs-ag (rs-ag is sequence parallelism, the same "
                 "as --sequence-parallel)")
      ->check(CLI::IsMember({"allreduce", "rs-ag"}))
      ->excludes(sp);
  auto* zero = app.add_option("--zero", zero_stage,
                              "ZeRO stage over the DP group: 0, 1 (distributed optimizer), 2 (DeepSpeed's: "
                              "buckets reduce-scattered in every micro-batch's backward), 3")
                   ->capture_default_str();
  app.add_flag("--use-distributed-optimizer", distributed_optimizer,
               "Megatron's distributed optimizer (--zero 1)")
      ->excludes(zero);
  app.add_option("--offload", offload,
                 "offload to host memory over the host link: none | optimizer (CPU Adam on "
                 "host-resident state) | activations (every layer's, prefetched back) | both")
      ->capture_default_str();
  app.add_flag("--dp-overlap,--overlap-grad-reduce", dp_overlap,
               "overlap bucketed DP gradient all-reduces with backward (PyTorch DDP)");
  app.add_flag("--overlap-param-gather", overlap_param_gather,
               "Megatron's: the distributed optimizer's parameter all-gather overlapped with the "
               "next forward, bucket by bucket (needs --use-distributed-optimizer and "
               "--overlap-grad-reduce)");
  app.add_flag("--grad-reduce-in-bf16", grad_reduce_in_bf16,
               "Megatron's: gradients accumulated and reduced over DP in bf16 (2 bytes a "
               "parameter) instead of the fp32 main gradients --bf16 implies; NeMo's and "
               "Megatron-Bridge's performance recipes set it (grad_reduce_in_fp32 = False)");
  app.add_option("--grad-reduce-sync", grad_reduce_sync,
                 "ZeRO-2's per-micro-batch reductions waited for at each backward's end "
                 "(backward: DeepSpeed, FSDP2) or only before the optimizer step (step: queued on "
                 "the DP stream beside later micro-batches, the Llama 3 paper's asynchronous "
                 "reduction)")
      ->capture_default_str();
  app.add_option("--grad-reduce-queue", grad_reduce_queue,
                 "with --grad-reduce-sync step: the most reductions pending before compute waits "
                 "for the oldest (0: no bound)")
      ->capture_default_str();
  app.add_option("--moe-token-dispatcher-type", moe_dispatcher_type,
                 "Megatron's MoE token dispatcher: alltoall (NCCL all-to-all of every routed "
                 "copy) | flex (with --moe-enable-deepep: DeepEP's RDMA + NVLink dispatch)")
      ->capture_default_str();
  app.add_flag("--moe-enable-deepep", moe_enable_deepep,
               "Megatron's: the flex dispatcher's DeepEP backend (each token once per node over "
               "RDMA, then over NVLink; needs --moe-token-dispatcher-type flex)");
  app.add_flag("--overlap-moe-expert-parallel-comm", moe_a2a_overlap,
               "Megatron's combined 1F1B: each steady-state forward fused with the next "
               "backward, one micro-batch's expert all-to-alls beside the other's compute "
               "(needs --schedule interleaved and --ep > 1)");
  app.add_flag("--tp-comm-overlap", tp_comm_overlap,
               "Megatron's (Transformer Engine userbuffers): TP all-gathers and reduce-scatters "
               "overlapped with the adjacent GEMMs, chunk by chunk (needs --sequence-parallel)");
  auto* bucket_mb =
      app.add_option("--dp-bucket-mb", dp_bucket_mb,
                     "DDP bucket size in MiB (default: the framework's: Megatron's max(40M, 1M x "
                     "D x C) parameters, on the first chunk of pipeline rank 0 only, as Megatron "
                     "buckets; PyTorch DDP's 25 MiB; under --zero 2 DeepSpeed's 5e8 elements), "
                     "in the gradient reduction's dtype")
          ->check(finitePositiveUpTo(1e6));
  app.add_option("--ddp-bucket-size", ddp_bucket_params,
                 "Megatron's: DDP bucket size in parameters (gradient elements), as Megatron "
                 "counts it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->excludes(bucket_mb);
  app.add_flag("--allow-cross-node-tp", allow_cross_node_tp,
               "allow TP groups that straddle nodes (M not dividing a node's GPUs)");
  auto* layers = app.add_option("--stage-layers", stage_layers,
                                "transformer blocks per model chunk, e.g. 10,12,12,10 (P x v "
                                "entries; default: the FLOP-balanced split)");
  app.add_option("--decoder-first-pipeline-num-layers", first_stage_layers,
                 "Megatron's: blocks on the first stage, the rest split evenly")
      ->check(CLI::Range(1, static_cast<int>(kMaxLayers)))
      ->excludes(layers);
  app.add_option("--decoder-last-pipeline-num-layers", last_stage_layers,
                 "Megatron's: blocks on the last stage, the rest split evenly")
      ->check(CLI::Range(1, static_cast<int>(kMaxLayers)))
      ->excludes(layers);
  app.add_flag("--account-for-embedding-in-pipeline-split", account_for_embedding,
               "Megatron's: the embedding counts as one layer of the first model chunk")
      ->excludes(layers);
  app.add_flag("--account-for-loss-in-pipeline-split", account_for_loss,
               "Megatron's: the loss counts as one layer of the last model chunk")
      ->excludes(layers);
  addFrameworkOptions(app);
}

void RunOptions::addMegatronExtras(CLI::App& app) {
  // Replaced by the file's arguments before parsing (modeler/cli/main.cpp): listed for --help.
  app.add_option("--args-file", args_file,
                 "a Megatron-LM launch script: its arguments are read in place (a flag given on "
                 "the command line wins; torchrun's --nnodes x --nproc_per_node give --gpus)");
  app.allow_extras();
  extras_app = &app;
}

void RunOptions::acceptMegatronExtras() const {
  if (extras_app == nullptr) return;
  // The launch script's (--args-file) first, then the command line's: one note.
  std::vector<std::string> accepted = takeFileIgnoredArgs();
  for (std::string& arg : acceptIgnoredMegatronArgs(extras_app->remaining())) {
    accepted.push_back(std::move(arg));
  }
  const std::string note = ignoredArgsNote(accepted);
  if (!note.empty()) fmt::print(stderr, "eventsim: {}\n", note);
}

void RunOptions::addFrameworkOptions(CLI::App& app) {
  auto* framework_opt =
      app.add_option("--framework", framework,
                     "megatron (Megatron-LM's memory layout) | fsdp (PyTorch FSDP2 as torchtitan "
                     "runs it: fully sharded fp32 states, per-layer gathers)")
          ->capture_default_str();
  app.add_flag_callback(
         "--use-torch-fsdp2", [this] { framework = "fsdp"; }, "Megatron's: --framework fsdp")
      ->excludes(framework_opt);
  app.add_option("--reshard-after-forward", reshard,
                 "FSDP: default (always without PP, never with PP) | always | never")
      ->capture_default_str();
  app.add_option("--fsdp-wrap", fsdp_wrap,
                 "FSDP: separate (the embedding and [final norm, output] FSDP groups of their own: "
                 "torchtitan since 2025-07) | root (both in the root's group, the last block kept "
                 "gathered: torchtitan before, its 2024-12 benchmarks)")
      ->capture_default_str();
  app.add_option("--torch-compile", torch_compile,
                 "FSDP: on (torch.compile's fused blocks and loss) | blocks (compiled blocks, eager "
                 "loss: torchtitan before 2025-04) | off (eager PyTorch kernels) | default (off, as "
                 "torchtitan)")
      ->capture_default_str();
  app.add_option("--optimizer-impl", optimizer_impl,
                 "AdamW's implementation (torchtitan's optimizer.implementation): fused (one "
                 "_fused_adamw_ pass; torchtitan's default since 2025-02, and Megatron's only "
                 "step) | foreach (eight foreach kernels: torchtitan before 2025-02, FSDP only) | "
                 "for-loop (not modelled)")
      ->capture_default_str();
}

void RunOptions::applyFramework(Strategy& s) const {
  s.framework = parseFramework(framework);
  s.reshard = parseReshard(reshard);
  s.fsdp_wrap = parseFsdpWrap(fsdp_wrap);
  s.torch_compile = parseTorchCompile(torch_compile);
  s.optimizer_impl = parseOptimizerImpl(optimizer_impl);
  if (s.framework == Framework::kFsdp && zero_stage == 0 && !distributed_optimizer) {
    s.zero_stage = s.gradGroupSize() > 1 ? 3 : 0;
  }
}

}  // namespace evsim
