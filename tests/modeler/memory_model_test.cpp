// Memory model: Megatron's bytes per parameter, Korthikanti's activation formulas and the peak of
// a whole stage, every expected number worked out by hand in the comment next to it.
#include "modeler/memory_model.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "config/cluster_config.h"
#include "plan/iteration_plan.h"
#include "config/model_config.h"
#include "modeler/summary_report.h"
#include "support/tiny_fp16_model.h"

namespace evsim {
namespace {

// GPT-3 175B shapes (one block is enough for the per-block formula).
const char* kGpt3BlockYaml = R"(
name: gpt3-block
dtype: bf16
hidden_size: 12288
num_heads: 96
ffn_hidden_size: 49152
seq_length: 2048
vocab_size: 51200
layers:
  - {type: embedding}
  - {type: decoder, count: 1, cross_attention: false}
  - {type: head}
)";

// The hand-worked tiny fp16 model (support/tiny_fp16_model.h).
const std::string kTinyYaml = test::tinyFp16ModelYaml("tiny-mem", 2);

std::string clusterYaml(const std::string& memory_gib) {
  return R"(
name: mem-cluster
node:
  gpus: 2
  device:
    name: mem-gpu
    peak_tflops: {fp16: 100, bf16: 100, fp32: 10}
    memory_bandwidth_gb_s: 1000
    memory_gib: )" +
         memory_gib + R"(
    memory: {cuda_context_mib: {value: 0, source: test}, cublas_workspace_mib: {value: 0, source: test}, nccl_mib_per_communicator: {value: 0, source: test}, allocator_fragmentation: {value: 0, source: test}}
  intra_link: {name: link, bandwidth_gb_s: 100, latency_us: 2}
network: {name: net, bandwidth_gb_s: 10, latency_us: 5}
)";
}

Strategy strategy(int tp, int pp, int dp, int64_t b, int64_t B, Schedule schedule) {
  return Strategy::of(tp, pp, dp, b, B, schedule);
}

// A peak beyond int64 saturates (issue 17, item 3): out of memory on any device, never a wrapped,
// negative peak that "fits". GPipe holds all m = 8 micro-batches of 2^61 bytes each: 2^64.
TEST(MemoryModelTest, PeakBeyondInt64Saturates) {
  const ModelConfig model = parseModelConfig(kTinyYaml, "tiny.yaml");
  const int64_t huge = int64_t{1} << 61;
  const MemoryEstimate mem =
      estimateMemory(model, strategy(1, 1, 1, 1, 8, Schedule::kGpipe), 8, int64_t{80} << 30,
                     {ChunkMemoryInput{.parameters = 1000, .activation_bytes = huge}}, 0.0);
  ASSERT_EQ(mem.stages.size(), 1u);
  EXPECT_EQ(mem.stages[0].activation_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(mem.peak_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(mem.fits());
  // Interleaved (P = 2, v = 2, m = 4): stage 0 holds at least 4 chunk activations of 2^61 bytes at
  // its peak (its warm-up forwards), past int64 too.
  Strategy interleaved = strategy(1, 2, 1, 1, 4, Schedule::kInterleaved);
  interleaved.virtual_stages = 2;
  const MemoryEstimate il = estimateMemory(
      model, interleaved, 4, int64_t{80} << 30,
      std::vector<ChunkMemoryInput>(4, {.parameters = 1000, .activation_bytes = huge}), 0.0);
  EXPECT_EQ(il.stages[0].activation_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(il.fits());
}

TEST(MemoryModelTest, BytesPerParameterFollowMegatron) {
  // 2 (16-bit weight) + 4 (fp32 grad) + 4 (fp32 master) + 4 + 4 (Adam moments) = 18.
  EXPECT_EQ(modelStateBytesPerParameter(DType::kFp16), 18);
  EXPECT_EQ(modelStateBytesPerParameter(DType::kBf16), 18);
  // fp32: 4 weight + 4 grad + 4 + 4 moments, no master copy = 16.
  EXPECT_EQ(modelStateBytesPerParameter(DType::kFp32), 16);
}

TEST(MemoryModelTest, KorthikantiActivationsGpt3WithTensorParallel) {
  ModelConfig model = parseModelConfig(kGpt3BlockYaml, "gpt3-block.yaml");
  const TransformerBlock& block = model.blocks[0];
  // s=2048, b=1, h=12288, a=96, t=8: s*b*h = 2048 * 12288 = 25,165,824.
  //   10 + 24/8 = 13;  5*a*s/(h*t) = 5*96*2048 / (12288*8) = 983,040 / 98,304 = 10.
  //   bytes = 25,165,824 * 23 = 578,813,952.
  EXPECT_EQ(blockActivationBytes(model, block, 1, 8), 578'813'952);
  // Without TP: 34 + 5*a*s/h = 34 + 5*96*2048/12288 = 34 + 80 = 114 -> 25,165,824 * 114.
  EXPECT_EQ(blockActivationBytes(model, block, 1, 1), 2'868'903'936);
  // Linear in the micro-batch size.
  EXPECT_EQ(blockActivationBytes(model, block, 4, 8), 4 * 578'813'952LL);
}

TEST(MemoryModelTest, StagePeakByHand) {
  ModelConfig model = parseModelConfig(kTinyYaml, "tiny-mem.yaml");
  ClusterConfig cluster = parseClusterConfig(clusterYaml("1"), "mem-cluster.yaml");
  IterationPlan plan =
      buildIterationPlan(model, cluster, strategy(1, 1, 1, 1, 1, Schedule::kDapple));
  MemoryEstimate mem = estimateMemory(plan, 0.0);
  ASSERT_EQ(mem.stages.size(), 1u);
  const StageMemory& st = mem.stages[0];
  // Parameters: block = QKV+proj 4h^2+4h = 16,640; MLP 2hf+f+h = 33,088; layernorms 4h = 256
  //   -> 49,984 per block, 99,968 for two; embedding V*h + s*h = 32,768 + 2,048 = 34,816;
  //   final layernorm 2h = 128 (P = 1: the LM head is tied to the embedding). Total 134,912.
  EXPECT_EQ(st.parameters, 134'912);
  EXPECT_EQ(st.model_state_bytes, 18 * 134'912);  // 2,428,416
  // Activations per micro-batch: s*b*h = 2,048.
  //   block: 34 * 2,048 + 5*a*s^2*b = 69,632 + 5*4*1,024 = 90,112; two blocks 180,224;
  //   embedding: ids 8*s*b = 256, output 2*s*b*h = 4,096, mask 2,048 -> 6,400;
  //   head: 2 * 2 * s*b*h = 8,192 + fp32 logits 4*s*b*V = 65,536 -> 73,728.
  //   total 260,352, one micro-batch in flight (m = 1).
  EXPECT_EQ(st.activation_bytes_per_micro_batch, 260'352);
  EXPECT_EQ(st.in_flight, 1);
  // Beside them (memory_components.h), at P = 1 the largest activation transient is the word
  // embedding's fp16 gradient 2*V*h = 65,536 (the loss's 2*s*b*V = 32,768 is smaller); no other
  // buffer, and this device file sets the workspace, context, NCCL and fragmentation to 0.
  EXPECT_EQ(st.activation_transient_bytes, 65'536);
  EXPECT_EQ(st.bufferBytes(), 0);
  EXPECT_EQ(st.peak_bytes, 2'428'416 + 260'352 + 65'536);  // 2,754,304
  EXPECT_EQ(mem.peak_bytes, 2'754'304);
  EXPECT_EQ(mem.capacity_bytes, 1LL << 30);
  EXPECT_TRUE(mem.fits());
}

// The caching allocator's reserved peak cannot pass the device less what lies outside it (the
// CUDA context, NCCL's buffers): there cudaMalloc fails and it frees its cached blocks and
// retries. Tiny fp16 model, one chunk holding the embedding and the head, P = D = t = 1, m = 1:
//   model states 18 x 1,000 = 18,000; activations 1,000,000; the largest activation transient the
//   word embedding's gradient 2 x V x h = 2 x 512 x 64 = 65,536 (the loss's 2 x s x V = 32,768 is
//   smaller); no buffers (workspace 0). dynamic 1,065,536, allocated 1,083,536.
//   Reserved before the cap: 18,000 + 1.5 x 1,065,536 = 1,616,304 (fragmentation share 0.5).
//   Outside the allocator: the 1 MiB context = 1,048,576 (no communicator at 1 x 1 x 1).
TEST(MemoryModelTest, ReservedCappedAtWhatTheDeviceLeavesTheAllocator) {
  const ModelConfig model = parseModelConfig(kTinyYaml, "tiny.yaml");
  MemoryOverheads overheads;
  overheads.cuda_context_mib.value = 1;
  overheads.cublas_workspace_mib.value = 0;
  overheads.nccl_mib_per_communicator.value = 0;
  overheads.allocator_fragmentation.value = 0.5;
  const Strategy s = strategy(1, 1, 1, 1, 1, Schedule::kGpipe);
  const std::vector<ChunkMemoryInput> chunks{{.parameters = 1000, .activation_bytes = 1'000'000}};
  const auto reserved = [&](int64_t capacity) {
    const MemoryEstimate mem = estimateMemory(model, s, 1, capacity, chunks, 0.0, {}, overheads);
    EXPECT_EQ(mem.stages[0].allocated_bytes, 1'083'536);
    EXPECT_EQ(mem.stages[0].overhead_bytes, 1'048'576);
    EXPECT_EQ(mem.reserved_peak_bytes, mem.stages[0].reserved_bytes);
    return mem.stages[0].reserved_bytes;
  };
  // 4 MiB: the allocator may take 4,194,304 - 1,048,576 = 3,145,728, more than it wants.
  EXPECT_EQ(reserved(4 << 20), 1'616'304);
  // 2.5 MiB: 2,621,440 - 1,048,576 = 1,572,864 < 1,616,304: capped there.
  EXPECT_EQ(reserved(5 << 19), 1'572'864);
  // 2 MiB: 2,097,152 - 1,048,576 = 1,048,576 < allocated: reserved is what is allocated (the
  // plan is out of memory; the verdict says so from the allocated bytes).
  EXPECT_EQ(reserved(2 << 20), 1'083'536);
}

// --grad-reduce-sync step under ZeRO-2, from chunks alone (no timeline): each stage counts its
// chunk's first bucket while it fills, in the model dtype (setLeastFirstBuckets). DeepSpeed's
// default bucket (5e8 elements) holds a whole chunk, so the first bucket is all of its parameters:
// fp16, 2 x 1,000 = 2,000 bytes on stage 0 and 2 x 3,000 = 6,000 on stage 1 (1F1B, P = 2, D = 2).
// Under --grad-reduce-sync backward nothing is pending.
TEST(MemoryModelTest, ChunksAloneCountTheStepsFirstBucket) {
  const ModelConfig model = parseModelConfig(kTinyYaml, "tiny.yaml");
  Strategy s = strategy(1, 2, 2, 1, 8, Schedule::kDapple);
  s.zero_stage = 2;
  s.grad_reduce_sync = GradReduceSync::kStep;
  const std::vector<ChunkMemoryInput> chunks{{.parameters = 1000, .activation_bytes = 10'000},
                                             {.parameters = 3000, .activation_bytes = 10'000}};
  const MemoryEstimate step = estimateMemory(model, s, 4, int64_t{1} << 30, chunks, 0.0);
  ASSERT_EQ(step.stages.size(), 2u);
  EXPECT_EQ(step.stages[0].pending_reduction_bytes, 2'000);
  EXPECT_EQ(step.stages[1].pending_reduction_bytes, 6'000);
  s.grad_reduce_sync = GradReduceSync::kBackward;
  const MemoryEstimate backward = estimateMemory(model, s, 4, int64_t{1} << 30, chunks, 0.0);
  EXPECT_EQ(backward.stages[0].pending_reduction_bytes, 0);
  EXPECT_EQ(backward.stages[1].pending_reduction_bytes, 0);
}

TEST(MemoryModelTest, HeadroomShrinksUsableMemory) {
  ModelConfig model = parseModelConfig(kTinyYaml, "tiny-mem.yaml");
  ClusterConfig cluster = parseClusterConfig(clusterYaml("1"), "mem-cluster.yaml");
  IterationPlan plan =
      buildIterationPlan(model, cluster, strategy(1, 1, 1, 1, 1, Schedule::kDapple));
  // 1 GiB = 1,073,741,824 bytes; 25% headroom leaves 805,306,368.
  MemoryEstimate mem = estimateMemory(plan, 0.25);
  EXPECT_EQ(mem.usable_bytes, 805'306'368);
  // The peak (2,754,304) fits 1 GiB but not 0.00256 GiB = 2,748,779 bytes (just under the peak),
  // and fits 0.00257 GiB = 2,759,516 bytes (just over).
  ClusterConfig small = parseClusterConfig(clusterYaml("0.00256"), "small.yaml");
  plan = buildIterationPlan(model, small, strategy(1, 1, 1, 1, 1, Schedule::kDapple));
  EXPECT_FALSE(estimateMemory(plan, 0.0).fits());
  ClusterConfig enough = parseClusterConfig(clusterYaml("0.00257"), "enough.yaml");
  plan = buildIterationPlan(model, enough, strategy(1, 1, 1, 1, 1, Schedule::kDapple));
  EXPECT_TRUE(estimateMemory(plan, 0.0).fits());
}

TEST(MemoryModelTest, GpipeHoldsMoreActivationsThanDapple) {
  ModelConfig model = parseModelConfig(kTinyYaml, "tiny-mem.yaml");
  ClusterConfig cluster = parseClusterConfig(clusterYaml("1"), "mem-cluster.yaml");
  // P = 2, m = 8 micro-batches (B = 8, b = 1, D = 1): GPipe holds all 8 on both stages; DAPPLE
  // holds min(P - s, m) = 2 on stage 0 and 1 on stage 1.
  IterationPlan gpipe =
      buildIterationPlan(model, cluster, strategy(1, 2, 1, 1, 8, Schedule::kGpipe));
  IterationPlan dapple =
      buildIterationPlan(model, cluster, strategy(1, 2, 1, 1, 8, Schedule::kDapple));
  MemoryEstimate g = estimateMemory(gpipe);
  MemoryEstimate d = estimateMemory(dapple);
  ASSERT_EQ(g.stages.size(), 2u);
  EXPECT_EQ(g.stages[0].in_flight, 8);
  EXPECT_EQ(g.stages[1].in_flight, 8);
  EXPECT_EQ(d.stages[0].in_flight, 2);
  EXPECT_EQ(d.stages[1].in_flight, 1);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(g.stages[s].model_state_bytes, d.stages[s].model_state_bytes);
    EXPECT_GT(g.stages[s].peak_bytes, d.stages[s].peak_bytes);
  }
  EXPECT_GT(g.peak_bytes, d.peak_bytes);
}

TEST(MemoryModelTest, TensorParallelSplitsModelStatesAndActivations) {
  ModelConfig model = parseModelConfig(kTinyYaml, "tiny-mem.yaml");
  ClusterConfig cluster = parseClusterConfig(clusterYaml("1"), "mem-cluster.yaml");
  MemoryEstimate t1 = estimateMemory(
      buildIterationPlan(model, cluster, strategy(1, 1, 1, 1, 1, Schedule::kDapple)));
  MemoryEstimate t2 = estimateMemory(
      buildIterationPlan(model, cluster, strategy(2, 1, 1, 1, 1, Schedule::kDapple)));
  EXPECT_LT(t2.stages[0].model_state_bytes, t1.stages[0].model_state_bytes);
  EXPECT_LT(t2.stages[0].activation_bytes, t1.stages[0].activation_bytes);
}

// memoryVerdict: an 80 GiB card at 5% headroom offers 76 GiB. 75 GiB fits; one byte over 76 and
// the whole card are over the headroom (a plan that runs, with less margin than asked); one byte
// over the card is out of memory.
TEST(MemoryVerdict, TheHeadroomIsNotTheCard) {
  MemoryEstimate m;
  m.capacity_bytes = int64_t{80} << 30;
  m.usable_bytes = int64_t{76} << 30;
  m.peak_bytes = int64_t{75} << 30;
  EXPECT_EQ(memoryVerdict(m), "fits");
  m.peak_bytes = m.usable_bytes + 1;
  EXPECT_EQ(memoryVerdict(m), "over_headroom");
  m.peak_bytes = m.capacity_bytes;
  EXPECT_EQ(memoryVerdict(m), "over_headroom");
  m.peak_bytes = m.capacity_bytes + 1;
  EXPECT_EQ(memoryVerdict(m), "oom");
}

// The verdict's line says both margins: to the usable share and to the card. Meta's 405B plan's
// figures: 78.68 GiB of 80 at 5% headroom (76 usable) fits the card by 1.32 and is 2.68 over
// the headroom.
TEST(MemoryVerdict, TheLineSaysBothMargins) {
  MemoryEstimate m;
  m.capacity_bytes = int64_t{80} << 30;
  m.usable_bytes = int64_t{76} << 30;
  m.headroom = 0.05;
  m.peak_stage = 1;
  m.peak_bytes = static_cast<int64_t>(78.68 * (int64_t{1} << 30));
  EXPECT_EQ(memoryVerdictText(m),
            "78.68 GiB on stage 1 of 80.00 GiB: fits the card (1.32 GiB to spare) but not the "
            "headroom (76.00 GiB usable with 5% headroom, 2.68 GiB over) -- the headroom is held "
            "back for the model's error, not a limit of the card");
  m.peak_bytes = int64_t{75} << 30;
  EXPECT_EQ(memoryVerdictText(m),
            "75.00 GiB on stage 1 of 80.00 GiB: fits (76.00 GiB usable with 5% headroom, margin "
            "1.00 GiB; 5.00 GiB to the card)");
  m.peak_bytes = int64_t{82} << 30;
  EXPECT_EQ(memoryVerdictText(m),
            "82.00 GiB on stage 1 of 80.00 GiB: OOM, 2.00 GiB over the card (76.00 GiB usable "
            "with 5% headroom, 6.00 GiB over)");
  // The search's candidates use the same rule from their bytes.
  EXPECT_EQ(memoryVerdict(int64_t{78} << 30, m.usable_bytes, m.capacity_bytes), "over_headroom");
}

}  // namespace
}  // namespace evsim
