// Megatron-LM arguments without effect accepted by name, others refused (io/megatron_args.h), and
// a launch script's arguments read in place (io/args_file.h).
#include "io/megatron_args.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "io/args_file.h"

namespace evsim {
namespace {

using Strings = std::vector<std::string>;

TEST(MegatronArgs, AcceptsIgnoredArgumentsWithTheirValues) {
  const Strings extras = {"--lr",     "3e-4",          "--data-path", "0.3",
                          "a",        "0.7",           "b",           "--log-throughput",
                          "--seed=7", "--train-iters", "500000"};
  EXPECT_EQ(acceptIgnoredMegatronArgs(extras),
            (Strings{"--lr 3e-4", "--data-path 0.3 a 0.7 b", "--log-throughput", "--seed=7",
                     "--train-iters 500000"}));
  EXPECT_EQ(ignoredArgsNote({"--lr 3e-4", "--seed=7"}),
            "note: ignored (no effect on time or memory): --lr 3e-4, --seed=7");
  EXPECT_EQ(ignoredArgsNote({}), "");
}

TEST(MegatronArgs, RefusesUnknownArgumentsByName) {
  try {
    acceptIgnoredMegatronArgs({"--lr", "1", "--tp-comm-overlap-cfg", "ub.yaml"});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown argument --tp-comm-overlap-cfg"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(acceptIgnoredMegatronArgs({"--lr"}), InputError);                // no value
  EXPECT_THROW(acceptIgnoredMegatronArgs({"--log-throughput=1"}), InputError);  // a switch
  EXPECT_THROW(acceptIgnoredMegatronArgs({"stray"}), InputError);               // no flag
}

// A launch script as Megatron-LM's examples write them: variables, a bash array, a torchrun line
// with continuations, comments, and a variable the script does not set.
constexpr const char* kScript = R"(#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
TP=8
PP="4"
DISTRIBUTED_ARGS=(
    --nproc_per_node 8   # GPUs per node
    --nnodes 16
)
MODEL_ARGS=(
    --num-layers 80
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size ${PP}
)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    --micro-batch-size 1 --bf16 \
    --data-path $DATA_PATH \
    --lr 3e-4
)";

TEST(ArgsFile, ReadsEveryFlagRunOfALaunchScript) {
  const ExpandedArgs got = argumentsOfScript(kScript, "launch.sh");
  // $DATA_PATH is not set in the file: --data-path (without effect) is left out whole, named.
  EXPECT_EQ(got.args,
            (Strings{"--nproc_per_node", "8", "--nnodes", "16", "--num-layers", "80",
                     "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "4",
                     "--micro-batch-size", "1", "--bf16", "--lr", "3e-4"}));
  EXPECT_EQ(got.dropped, (Strings{"--data-path $DATA_PATH"}));
  // An unset variable as a mapped flag's value stays, for that flag's parser to name.
  EXPECT_EQ(argumentsOfScript("x.py --tensor-model-parallel-size $TP\n", "s.sh").args,
            (Strings{"--tensor-model-parallel-size", "$TP"}));
}

// Megatron's older examples (pretrain_gpt.sh): arguments in quoted multi-line strings, used
// unquoted so that the shell splits them.
TEST(ArgsFile, ReadsQuotedMultiLineArgumentStrings) {
  constexpr const char* kOld =
      "GPT_ARGS=\"\n    --num-layers 24 \\\n    --hidden-size 1024\n\"\n"
      "DATA_ARGS=\"--split 949,50,1\"\n"
      "torchrun pretrain_gpt.py $GPT_ARGS $DATA_ARGS --bf16\n";
  const ExpandedArgs got = argumentsOfScript(kOld, "pretrain_gpt.sh");
  EXPECT_EQ(got.args, (Strings{"--num-layers", "24", "--hidden-size", "1024", "--split", "949,50,1",
                               "--bf16"}));
  EXPECT_TRUE(got.dropped.empty());
  EXPECT_THROW(argumentsOfScript("X=\"--lr 1\n", "open.sh"), InputError);  // never closed
}

TEST(ArgsFile, CommandLineWinsAndTorchrunGivesGpus) {
  const std::string path = ::testing::TempDir() + "args_file_test_launch.sh";
  {
    std::ofstream out(path);
    out << kScript;
  }
  // --tp on the command line replaces the file's --tensor-model-parallel-size 8 (one option);
  // 16 nodes x 8 GPUs per node = --gpus 128 for simulate.
  // The file's arguments without effect (torchrun's --nproc_per_node and --nnodes, --lr) are
  // taken out for the note, not handed to the parser.
  const ExpandedArgs got = expandArgsFile({"simulate", "--tp", "2", "--args-file", path});
  EXPECT_EQ(got.args, (Strings{"simulate", "--tp", "2", "--num-layers", "80",
                               "--pipeline-model-parallel-size", "4", "--micro-batch-size", "1",
                               "--bf16", "--gpus", "128"}));
  EXPECT_EQ(got.ignored, (Strings{"--nproc_per_node 8", "--nnodes 16", "--lr 3e-4"}));
  // events takes --gpus for another purpose: not derived there.
  const ExpandedArgs events = expandArgsFile({"events", "--args-file=" + path});
  EXPECT_EQ(events.args.back(), "--bf16");
  EXPECT_EQ(events.ignored.back(), "--lr 3e-4");
  std::remove(path.c_str());
  EXPECT_THROW(expandArgsFile({"simulate", "--args-file", path}), InputError);  // gone
  EXPECT_THROW(expandArgsFile({"simulate", "--args-file"}), InputError);
  EXPECT_THROW(argumentsOfScript("--lr '3e-4\n", "bad.sh"), InputError);  // unbalanced quote
}

// A launch script's --seed is Megatron's (without effect), whatever a command calls --seed:
// simulate's --seed (the --jitter draws) never sees it. A command-line --seed stays the
// command's. A Megatron argument without its value in the file names the file.
TEST(ArgsFile, TheFilesSeedIsMegatronsNotTheCommands) {
  const std::string path = ::testing::TempDir() + "args_file_test_seed.sh";
  {
    std::ofstream out(path);
    out << "torchrun pretrain_gpt.py --micro-batch-size 1 --seed 1234 --bf16\n";
  }
  const ExpandedArgs got = expandArgsFile({"simulate", "--args-file", path});
  EXPECT_EQ(got.args, (Strings{"simulate", "--micro-batch-size", "1", "--bf16"}));
  EXPECT_EQ(got.ignored, (Strings{"--seed 1234"}));
  // The command line's --seed 5 wins over the file's (one option name): the file's is dropped.
  const ExpandedArgs both = expandArgsFile({"simulate", "--seed", "5", "--args-file", path});
  EXPECT_EQ(both.args, (Strings{"simulate", "--seed", "5", "--micro-batch-size", "1", "--bf16"}));
  EXPECT_TRUE(both.ignored.empty());
  {
    std::ofstream out(path);
    out << "torchrun pretrain_gpt.py --seed\n";
  }
  try {
    expandArgsFile({"simulate", "--args-file", path});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--args-file " + path + ": --seed: needs a value");
  }
  std::remove(path.c_str());
}

// An error is blamed on the file only when the first flag it names came from the file: "--seed
// requires --jitter" is the command line's --seed's fault even when the file gave --jitter.
TEST(ArgsFile, AnErrorNamesTheFileOnlyForItsFirstFlag) {
  ExpandedArgs expanded;
  expanded.origin["--jitter"] = "run.sh as --jitter";
  expanded.origin["--tp"] = "run.sh as --tensor-model-parallel-size";
  EXPECT_EQ(fromArgsFile(expanded, "--seed requires --jitter"), "");
  EXPECT_EQ(fromArgsFile(expanded, "--tp: must be an integer >= 1, not 0"),
            " (read from --args-file run.sh as --tensor-model-parallel-size)");
  EXPECT_EQ(fromArgsFile(expanded, "Could not convert: --tp = x"),
            " (read from --args-file run.sh as --tensor-model-parallel-size)");
  // A "--" inside a word is no flag: the first flag is still --jitter.
  EXPECT_EQ(fromArgsFile(expanded, "file a--b: --jitter 2: must be in [0, 10]"),
            " (read from --args-file run.sh as --jitter)");
}

}  // namespace
}  // namespace evsim
