#pragma once
// `eventsim search`'s arguments: the flags as given, the list parsers that turn them into a
// strategy space, and the command lines the search prints (the space, the eventprof run that
// covers it, the simulate command of a candidate). search_command.cpp runs the search.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.h"
#include "config/model_config.h"
#include "io/run_options.h"
#include "modeler/cli/json_sink.h"
#include "modeler/cli/simulate_command.h"
#include "modeler/cli/train_run_flags.h"
#include "modeler/memory_model.h"
#include "modeler/search.h"
#include "plan/strategy.h"

namespace evsim {

struct SearchArgs {
  RunOptions run;
  CostSourceOptions costs;
  int64_t gpus = 0;
  // The default space is what a Megatron-LM user tries (issue 31, item 1): 1F1B and interleaving,
  // recomputation, sequence parallelism, the distributed optimizer (ZeRO-1) and DP overlap, each
  // with its "off"; context parallelism where sequences are long (defaultContextParallel).
  std::string micro_batches = "1,2,4,8";
  std::string schedules = "dapple,interleaved";
  std::string virtual_stages = "2,3,4";  // tried with the interleaved schedule (valid v only)
  bool virtual_stages_given = false;     // on the command line (not the default above)
  std::string recomputes = "none,selective,full";
  std::string sequence_parallel = "off,on";
  // Megatron's TP communication: allreduce (no SP) or rs-ag (reduce-scatter + all-gather, which
  // is what sequence parallelism is): another name for --sequence-parallel off,on.
  std::string tp_comm;
  std::string zero_stages;  // empty: 0,1 (Megatron); FSDP shards fully and has no --zero
  std::string dp_overlaps = "off,on";
  // Megatron's --tp-comm-overlap and --overlap-param-gather: off by default in Megatron (and the
  // first needs Transformer Engine's userbuffers), so not searched; given, each applies to every
  // candidate it can (TP overlap where SP is on, the gather's overlap with ZeRO 1/2 and DP overlap).
  bool tp_comm_overlap = false;
  bool overlap_param_gather = false;
  bool grad_reduce_in_bf16 = false;  // Megatron's --grad-reduce-in-bf16, on every candidate
  // --grad-reduce-sync / --grad-reduce-queue (Strategy::grad_reduce_sync): on every ZeRO-2
  // candidate.
  std::string grad_reduce_sync = "backward";
  int grad_reduce_queue = 0;
  std::string offloads = "none";
  std::string context_parallel;        // empty: defaultContextParallel(model)
  // --cp-comm-type (and a2a+p2p's a2a size A): fixed for every candidate with C > 1, not searched
  // (each type would multiply the CP candidates); a2a+p2p applies where A divides C.
  std::string cp_comm_type = "p2p";
  int cp_a2a = 0;
  std::string expert_parallel;         // empty: every power of two dividing an MoE model's experts
  std::string expert_tensor_parallel;  // ETP sizes tried besides M (empty: M only)
  int uneven_stages = 0;  // --uneven-stages K: first/last stage shortened by 1..K layers
  int top = 10;           // 0: every candidate
  bool json = false;
  std::string csv;
  bool allow_cross_node_tp = false;
  double memory_headroom = kDefaultMemoryHeadroom;
  TrainRunFlags train_run;  // --train-tokens 15T [--gpu-hour-cost]: days and GPU-hours per plan
  std::string write_events;    // the union of the candidates' events, for eventprof --events
  unsigned threads = 0;        // 0: every core
  bool exhaustive = false;     // with --top: simulate and list every candidate anyway
  bool show_rejected = false;  // list every OOM and invalid candidate, not a summary
  JsonSink sink;               // the Python module: the report goes here, nothing is printed
};

// Comma-separated flag values: "gpipe,dapple", "none,selective", "off,on", "1,2,4" (repeats
// dropped). Each throws InputError naming `flag` and the value.
std::vector<Schedule> parseSchedules(const std::string& text);
std::vector<Recompute> parseRecomputes(const std::string& text);
std::vector<Offload> parseOffloads(const std::string& text);
std::vector<bool> parseOnOff(const std::string& text, std::string_view flag);
std::vector<int> parseSmallInts(const std::string& text, std::string_view flag);
// --tp-comm as the --sequence-parallel values it stands for (docs/SEARCH.md).
std::string sequenceParallelValues(const SearchArgs& args);

// --cp's default: 1, and for a model with fused attention every power of two C that leaves each
// rank at least kMinTokensPerCpRank tokens of the sequence (Megatron-LM users turn CP on for long
// sequences: at 2,048 or 4,096 tokens it only adds ring exchanges). "1,2,4" at 16K tokens.
inline constexpr int64_t kMinTokensPerCpRank = 4096;
std::string defaultContextParallel(const ModelConfig& model);

// The search's own arguments that pick the candidates, as a command line fragment.
std::string spaceCommandLine(const SearchArgs& args);
// One line of what the space holds and what it leaves out, with the flag that adds each.
std::string searchedSpaceText(const SearchArgs& args);
// One profiling run that covers every candidate.
std::string unionEventprofHint(const SearchArgs& args, const SearchOptions& options);
// Writes the union of the events of every valid candidate as an events file (--write-events).
void writeUnionEvents(const SearchArgs& args, const ModelConfig& model,
                      const ClusterConfig& cluster, const SearchOptions& options);
// The simulate command of one candidate.
std::string simulateCommand(const SearchArgs& args, const Strategy& strategy);

}  // namespace evsim
