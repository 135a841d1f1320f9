// `--model train.toml` (io/torchtitan_config.h) on torchtitan's own Llama 3 8B job config
// (tests/data/torchtitan/llama3_8b.toml, copied with its source) and on edited copies of it.

#include "io/torchtitan_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/input_file.h"
#include "support/test_support.h"

namespace evsim {
namespace {

std::string fixture() {
  return readInputFile(test::dataPath("torchtitan/llama3_8b.toml"), "fixture");
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::string errorOf(const std::string& text) {
  try {
    torchtitanArguments(text, "train.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TorchtitanConfig, Llama3_8bMapsToFlags) {
  const TorchtitanArgs out = torchtitanArguments(fixture(), "llama3_8b.toml");
  // [model] llama3 8B; [training] seq_len 8192, local_batch_size 1; data_parallel_shard_degree
  // -1 (the rest of --gpus, so no --dp and no global batch); TP, PP, CP 1; selective op AC.
  const std::vector<std::string> expected = {"--model",     "llama3-8b",   "--seq-length",  "8192",
                                             "--framework", "fsdp",        "--micro-batch", "1",
                                             "--recompute", "selective-op"};
  EXPECT_EQ(out.args, expected);
  // The tables and keys without effect are noted, not refused.
  for (const char* key :
       {"job", "profiling", "metrics", "lr_scheduler", "checkpoint", "validation", "quantize",
        "training.steps", "optimizer.lr", "model.hf_assets_path", "compile.components"}) {
    EXPECT_NE(std::find(out.ignored.begin(), out.ignored.end(), key), out.ignored.end()) << key;
  }
}

TEST(TorchtitanConfig, CompileEnableCompilesTheBlocksAndTheLoss) {
  // compile.enable = true with torchtitan's default components, or the training.compile of its
  // older configs: --torch-compile on; without either the fsdp default (eager) stands.
  auto tail = [](const std::string& text) {
    const TorchtitanArgs out = torchtitanArguments(text, "t.toml");
    return std::vector<std::string>(out.args.end() - 2, out.args.end());
  };
  const std::vector<std::string> on = {"--torch-compile", "on"};
  EXPECT_EQ(tail(replaced(fixture(), "enable=false", "enable=true")), on);
  EXPECT_EQ(
      tail(replaced(fixture(), "local_batch_size = 1", "local_batch_size = 1\ncompile = true")),
      on);
  EXPECT_NE(tail(fixture()), on);
  // components = ["model"] compiles the blocks and leaves the loss eager.
  const std::vector<std::string> blocks = {"--torch-compile", "blocks"};
  EXPECT_EQ(tail(replaced(replaced(fixture(), "enable=false", "enable=true"),
                          "components = [\"model\", \"loss\"]", "components = [\"model\"]")),
            blocks);
}

TEST(TorchtitanConfig, OptimizerImplementationMapsToOptimizerImpl) {
  // optimizer.implementation (default fused: nothing added), or the older bool optimizer.fused
  // (false ran foreach); for-loop and the bf16-state variant are refused by name.
  auto with = [](const std::string& line) {
    return torchtitanArguments(replaced(fixture(), "name = \"AdamW\"", "name = \"AdamW\"\n" + line),
                               "t.toml")
        .args;
  };
  auto tail = [](const std::vector<std::string>& args) {
    return std::vector<std::string>(args.end() - 2, args.end());
  };
  const std::vector<std::string> foreach = {"--optimizer-impl", "foreach"};
  EXPECT_EQ(tail(with("implementation = \"foreach\"")), foreach);
  EXPECT_EQ(tail(with("fused = false")), foreach);
  const std::vector<std::string> plain = torchtitanArguments(fixture(), "t.toml").args;
  EXPECT_EQ(with("implementation = \"fused\""), plain);
  EXPECT_EQ(with("fused = true"), plain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--optimizer-impl"), 0);
  EXPECT_NE(errorOf(replaced(fixture(), "name = \"AdamW\"",
                             "name = \"AdamW\"\nimplementation = \"for-loop\""))
                .find("optimizer.implementation = for-loop"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(fixture(), "name = \"AdamW\"",
                             "name = \"AdamW\"\nimplementation = \"fused\"\nfused = true"))
                .find("optimizer.fused"),
            std::string::npos);
}

TEST(TorchtitanConfig, LayerSelectiveCheckpointingIsEveryNthBlockInFull) {
  // torchtitan's selective_ac_option = "N": every N-th block checkpointed in full; "1" and "0"
  // every block.
  auto recompute = [](const std::string& option) {
    const TorchtitanArgs out =
        torchtitanArguments(replaced(fixture(), "selective_ac_option = \"op\"",
                                     "selective_ac_option = \"" + option + "\""),
                            "t.toml");
    const auto at = std::find(out.args.begin(), out.args.end(), "--recompute");
    return std::vector<std::string>(at, out.args.end());
  };
  EXPECT_EQ(recompute("3"),
            (std::vector<std::string>{"--recompute", "full", "--recompute-every", "3"}));
  EXPECT_EQ(recompute("1"), (std::vector<std::string>{"--recompute", "full"}));
  EXPECT_EQ(recompute("0"), (std::vector<std::string>{"--recompute", "full"}));
}

TEST(TorchtitanConfig, ParallelismAndBatch) {
  std::string text =
      replaced(fixture(), "data_parallel_shard_degree = -1", "data_parallel_shard_degree = 4");
  text = replaced(text, "tensor_parallel_degree = 1", "tensor_parallel_degree = 2");
  text = replaced(text, "pipeline_parallel_degree = 1",
                  "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                  "pipeline_parallel_microbatch_size = 2");
  text = replaced(text, "local_batch_size = 1", "local_batch_size = 8");
  text = replaced(text, "mode = \"selective\"", "mode = \"full\"");
  const TorchtitanArgs out = torchtitanArguments(text, "t.toml");
  // Local batch 8 per DP rank, 4 DP ranks: global 32; micro-batches of 2 under PP.
  const std::vector<std::string> expected = {"--model",
                                             "llama3-8b",
                                             "--seq-length",
                                             "8192",
                                             "--framework",
                                             "fsdp",
                                             "--tp",
                                             "2",
                                             "--sequence-parallel",
                                             "--pp",
                                             "2",
                                             "--dp",
                                             "4",
                                             "--schedule",
                                             "interleaved",
                                             "--micro-batch",
                                             "2",
                                             "--global-batch",
                                             "32",
                                             "--recompute",
                                             "full"};
  EXPECT_EQ(out.args, expected);
}

TEST(TorchtitanConfig, RefusesByName) {
  EXPECT_CONTAINS(errorOf(replaced(fixture(), "context_parallel_degree = 1",
                                   "context_parallel_degree = 1\nenable_async_tensor_parallel = "
                                   "true")),
                  "train.toml: parallelism.enable_async_tensor_parallel = true: ");
  EXPECT_CONTAINS(errorOf(replaced(fixture(), "steps = 1000", "steps = 1000\nwarp_speed = 9")),
                  "train.toml: training.warp_speed is not a torchtitan key eventsim maps");
  EXPECT_CONTAINS(errorOf(replaced(fixture(), "selective_ac_option = \"op\"",
                                   "selective_ac_option = \"every\"")),
                  "activation_checkpoint.selective_ac_option = every: ");
  EXPECT_CONTAINS(errorOf(replaced(fixture(), "flavor = \"8B\"", "flavor = \"debugmodel\"")),
                  "model.flavor = debugmodel: not a flavour eventsim has");
  EXPECT_CONTAINS(errorOf(replaced(replaced(fixture(), "enable=false", "enable=true"),
                                   "components = [\"model\", \"loss\"]",
                                   "components = [\"loss\"]")),
                  "train.toml: compile.components = [loss]: ");
  EXPECT_CONTAINS(
      errorOf(replaced(fixture(), "# converters = [\"float8\"]", "converters = [\"float8\"]")),
      "quantize.linear.float8.enable_fsdp_float8_all_gather = false");
  EXPECT_CONTAINS(errorOf("[training\nseq_len = 1\n"), "train.toml:1:");
  EXPECT_CONTAINS(errorOf(fixture() + "\n[wandb]\nproject = \"x\"\n"),
                  "train.toml: wandb is not a torchtitan table eventsim maps");
}

TEST(TorchtitanConfig, CommandLineWins) {
  std::vector<std::string> ignored;
  const std::vector<std::string> args = {
      "simulate", "--model", test::dataPath("torchtitan/llama3_8b.toml"), "--micro-batch-size", "2",
      "--gpus",   "8"};
  const std::vector<std::string> out = expandTorchtitanConfig(args, ignored);
  // The shard degree -1 takes the 8 GPUs: global batch = local 1 x D 8.
  const std::vector<std::string> expected = {"simulate",
                                             "--model",
                                             "llama3-8b",
                                             "--seq-length",
                                             "8192",
                                             "--framework",
                                             "fsdp",
                                             "--recompute",
                                             "selective-op",
                                             "--global-batch",
                                             "8",
                                             "--micro-batch-size",
                                             "2",
                                             "--gpus",
                                             "8"};
  EXPECT_EQ(out, expected);
  EXPECT_FALSE(ignored.empty());
  // Without a .toml the arguments pass through.
  const std::vector<std::string> plain = {"simulate", "--model", "llama3-8b"};
  EXPECT_EQ(expandTorchtitanConfig(plain, ignored), plain);
}

}  // namespace
}  // namespace evsim
