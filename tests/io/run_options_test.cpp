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
  // Without it --dp-bucket-mb stays MiB: 25 MiB = 26,214,400 bytes.
  RunOptions mb = options();
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

}  // namespace
}  // namespace evsim
