#pragma once
// `--model train.toml`: a torchtitan job config (the .toml files of torchtitan's train_configs/,
// before its move to Python config registries) as eventsim arguments. The model flavour, the
// parallelism degrees, the batch, sequence length, activation checkpointing and Float8 become the
// flags `simulate` and `events` take (--model NAME, --framework fsdp, --tp, --pp, --cp, --ep,
// --micro-batch, --global-batch, --schedule, --recompute, --reshard-after-forward, --seq-length,
// --fp8-format); tables without effect on time or memory (job, profiling, metrics, checkpoint,
// lr_scheduler, validation, ...) are listed in one note. Any other key, or a value eventsim does
// not model (async TP, torch.compile, HSDP replicas, CPU offload, ...), is refused by name.

#include <cstdint>
#include <string>
#include <vector>

namespace evsim {

struct TorchtitanArgs {
  std::vector<std::string> args;     // eventsim flags and values, in order
  std::vector<std::string> ignored;  // tables and keys read and left out (no modelled effect)
  // With data_parallel_shard_degree -1 (the GPUs left over) the global batch is the local batch
  // times D = GPUs / (TP x PP x CP), known once --gpus is: `local_batch` and `model_parallel`.
  bool derive_global_batch = false;
  int64_t local_batch = 0, model_parallel = 1;
};

// `text` the .toml's content, `origin` its path for messages. Throws InputError naming
// origin and the key ("train.toml: parallelism.enable_async_tensor_parallel = true: ...").
TorchtitanArgs torchtitanArguments(const std::string& text, const std::string& origin);

// `args` (without the program name) with `--model FILE.toml` replaced by the file's arguments; a
// flag also given on the command line keeps the command line's value; --gpus on the command line
// gives the global batch where the file's shard degree is -1. `ignored` receives the note's items.
std::vector<std::string> expandTorchtitanConfig(const std::vector<std::string>& args,
                                                std::vector<std::string>& ignored);

}  // namespace evsim
