// RunOptions::strategy (io/run_options.h): flags whose units or defaults come from a framework's
// source, worked by hand.
#include "io/run_options.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "support/test_support.h"

namespace evsim {
namespace {

ModelConfig tinyModel(const std::string& dtype) {
  return test::model(256, 4, 1024, 128, 1000, 2, dtype);
}

RunOptions options() {
  RunOptions o;
  o.strategy_text = "1M1P4D";
  o.micro_batch = 1;
  o.global_batch = 4;
  o.dp_overlap = true;
  return o;
}

TEST(RunOptions, DdpBucketSizeCountsParametersAsMegatronDoes) {
  // Megatron's bucket_size is "Maximum number of parameters in each bucket"
  // (DistributedDataParallelConfig); the bucket's bytes are that many gradient elements.
  RunOptions o = options();
  o.ddp_bucket_params = 40'000'000;
  // fp16: gradients reduced in fp16, 2 bytes: 80,000,000 bytes.
  EXPECT_EQ(o.strategy(tinyModel("fp16")).dp_bucket_bytes, 80'000'000);
  // bf16: Megatron's fp32 main gradients, 4 bytes: 160,000,000 bytes.
  EXPECT_EQ(o.strategy(tinyModel("bf16")).dp_bucket_bytes, 160'000'000);
  // --grad-reduce-in-bf16: back to 2 bytes.
  o.grad_reduce_in_bf16 = true;
  EXPECT_EQ(o.strategy(tinyModel("bf16")).dp_bucket_bytes, 80'000'000);
  // Without either flag the size is the framework's default (0; plan/ddp_buckets.h), and the
  // printed command names no bucket size.
  RunOptions none = options();
  const Strategy defaulted = none.strategy(tinyModel("bf16"));
  EXPECT_EQ(defaulted.dp_bucket_bytes, 0);
  EXPECT_EQ(none.commandLine(defaulted).find("--dp-bucket-mb"), std::string::npos);
  // --dp-bucket-mb stays MiB: 25 MiB = 26,214,400 bytes.
  RunOptions mb = options();
  mb.dp_bucket_mb = 25;
  EXPECT_EQ(mb.strategy(tinyModel("bf16")).dp_bucket_bytes, 25 * 1024 * 1024);
}

TEST(RunOptions, OptimizerImplReachesTheStrategy) {
  RunOptions o = options();
  o.dp_overlap = false;
  o.framework = "fsdp";
  EXPECT_EQ(o.strategy(tinyModel("bf16")).optimizer_impl, OptimizerImpl::kFused);
  o.optimizer_impl = "foreach";
  const Strategy s = o.strategy(tinyModel("bf16"));
  EXPECT_EQ(s.optimizer_impl, OptimizerImpl::kForeach);
  EXPECT_NE(o.commandLine(s).find(" --optimizer-impl foreach"), std::string::npos);
  o.optimizer_impl = "sgd";
  EXPECT_THROW(o.strategy(tinyModel("bf16")), InputError);
}

// The command simulate prints for eventprof must parse as eventprof parses it: --model and
// --cluster, then RunOptions' strategy options (profiler/eventprof_main.cpp), no modeller switch.
TEST(RunOptions, TheEventprofCommandCarriesNoModellerSwitch) {
  RunOptions o = options();
  o.model = "tiny";
  o.cluster = "dgx-a100";
  o.nccl.algo = "ring";
  o.nccl.pxn_disable = "1";
  o.nccl.p2p_pxn_level = "0";
  o.nccl.cross_nic = "0";
  o.overlap_slowdown = "off";
  o.link_sharing = "off";
  const Strategy s = o.strategy(tinyModel("bf16"));
  const std::string for_simulate = o.commandLine(s);
  for (const char* flag :
       {" --nccl-algo ring", " --nccl-pxn-disable 1", " --nccl-p2p-pxn-level 0",
        " --nccl-cross-nic 0", " --overlap-slowdown off", " --link-sharing off"}) {
    EXPECT_NE(for_simulate.find(flag), std::string::npos) << flag;
  }
  const std::string for_eventprof = o.commandLine(s, RunOptions::CommandFor::kEventprof);
  EXPECT_EQ(for_eventprof.find("--nccl"), std::string::npos) << for_eventprof;
  EXPECT_EQ(for_eventprof.find("--overlap-slowdown"), std::string::npos) << for_eventprof;
  EXPECT_EQ(for_eventprof.find("--link-sharing"), std::string::npos) << for_eventprof;

  CLI::App eventprof;
  RunOptions parsed;
  std::string output;
  eventprof.add_option("--model", parsed.model);
  eventprof.add_option("--cluster", parsed.cluster);
  parsed.addStrategyOptions(eventprof, /*strategy_required=*/false);
  eventprof.add_option("-o", output);
  EXPECT_NO_THROW(eventprof.parse(for_eventprof + " -o profile.yaml",
                                  /*program_name_included=*/false));
  EXPECT_EQ(parsed.strategy_text, "1M1P4D");
  EXPECT_EQ(output, "profile.yaml");
}

// The --gpus union (eventsim events --gpus, eventprof --gpus) builds Megatron strategies from a
// base strategy, not from the framework flags: foreach, a reshard policy or torch.compile would
// be dropped (the union's events the fused step's), so they are refused with simulate's message.
TEST(RunOptions, TheGpusUnionRefusesTheFrameworkFlagsItWouldDrop) {
  RunOptions o;
  o.global_batch = 16;
  const auto [base, space] = o.unionSpace(4, "1,2");
  EXPECT_EQ(base.framework, Framework::kMegatron);
  EXPECT_EQ(base.optimizer_impl, OptimizerImpl::kFused);
  EXPECT_EQ(space.gpus, 4);
  EXPECT_EQ(base.global_batch, 16);

  o.optimizer_impl = "foreach";
  EXPECT_EQ(test::inputErrorOf([&] { o.unionSpace(4, "1"); }),
            "--optimizer-impl foreach with --framework megatron: only with --framework fsdp "
            "(Megatron-LM's step is Apex / Transformer Engine's fused Adam)");
  o.optimizer_impl = "fused";
  o.reshard = "never";
  EXPECT_EQ(test::inputErrorOf([&] { o.unionSpace(4, "1"); }),
            "--reshard-after-forward never: only with --framework fsdp");
  o.reshard = "default";
  o.fsdp_wrap = "root";
  EXPECT_EQ(test::inputErrorOf([&] { o.unionSpace(4, "1"); }),
            "--fsdp-wrap root: only with --framework fsdp");
  o.fsdp_wrap = "Sideways";
  EXPECT_EQ(test::inputErrorOf([&] { o.unionSpace(4, "1"); }),
            "--fsdp-wrap 'Sideways': unknown wrapping (separate or root)");
  o.fsdp_wrap = "separate";
  o.torch_compile = "on";
  EXPECT_EQ(test::inputErrorOf([&] { o.unionSpace(4, "1"); }),
            "--torch-compile on: only with --framework fsdp (Megatron-LM runs its own fused "
            "kernels)");
}

// A bucket size is refused by the union as the techniques are (its strategies would keep the
// framework's default buckets, whose events differ), and one under a byte is refused outright:
// 0 bytes means the framework's default.
TEST(RunOptions, BucketSizesTheUnionWouldDropOrZeroAreRefused) {
  RunOptions o;
  o.global_batch = 16;
  o.dp_bucket_mb = 4;
  const std::string why = test::inputErrorOf([&] { o.unionSpace(4, "1"); });
  EXPECT_NE(why.find("--gpus 4: the union covers GPipe/DAPPLE strategies without techniques"),
            std::string::npos)
      << why;
  o.dp_bucket_mb = 0;
  o.ddp_bucket_params = 1000;
  EXPECT_NE(test::inputErrorOf([&] { o.unionSpace(4, "1"); }).find("a bucket size"),
            std::string::npos);
  o.ddp_bucket_params = 0;
  o.dp_bucket_mb = 1e-7;  // 0.1 bytes
  o.strategy_text = "1M1P1D";
  EXPECT_EQ(test::inputErrorOf([&] { o.strategy(test::model(64, 4, 256, 128, 1000, 2, "bf16")); }),
            "--dp-bucket-mb 1e-07: under one byte");
}

}  // namespace
}  // namespace evsim
