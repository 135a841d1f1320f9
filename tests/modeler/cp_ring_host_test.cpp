// The host time of Transformer Engine's ring loop (ops/cp_ring_host.h): each ring op carries the
// torch calls TE makes for it, counted by hand from context_parallel.py; a task prices them at the
// device's host_call_us each where a framework op costs host_op_us (op_offsets.h), so a ring step
// is host-bound or device-bound by what the loop really issues. Timelines worked by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "modeler/op_offsets.h"
#include "plan/iteration_plan.h"
#include "support/cp_tiny_llama.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::cpStrategy;
using test::tinyLlama;

// Layer 1's ops of one pass as (name, host_calls), in order.
std::vector<std::pair<std::string, double>> layerCalls(const OpList& ops) {
  std::vector<std::pair<std::string, double>> out;
  for (const OpInstance& op : ops) {
    if (op.layer == 1) out.emplace_back(std::string(op.name), op.host_calls);
  }
  return out;
}

double ringCalls(const OpList& ops) {
  double sum = 0;
  for (const OpInstance& op : ops) sum += op.layer == 1 ? op.host_calls : 0;
  return sum;
}

// C = 4 (cp_size > 2: isend and irecv one by one), F = 4 calls per fused-attention call.
// Forward: pack 3; exchanges 3 (beside steps 0-2); step 0 16 + 4 = 20, steps 1-3 20.5 + 4 = 24.5;
// corrections 4 (init, with the final view and cast), 2, 2, 2: 3 + 9 + 20 + 73.5 + 10 = 115.5.
// Backward: buffer 3; exchanges 6, 6, 6, 8 (the last also indexes the dKV halves); steps 12.5 + 4
// = 16.5 but the last (the diagonal, no .contiguous()) 10 + 4 = 14; each step's dQ 2, dK 5, dV 4:
// 3 + 26 + 63.5 + 44 = 136.5. Every other op of the layer is a framework op (0 calls).
TEST(CpRingHost, EachRingOpCarriesTheCallsTransformerEngineMakesForIt) {
  const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(4), cpStrategy(4));
  const StagePlan& stage = plan.stages[0];
  const std::map<std::string, std::vector<double>> want_forward = {
      {"cp_kv_pack", {3}},
      {"cp_kv_exchange", {3, 3, 3}},
      {"flash_attention", {20}},
      {"flash_attention_ring_step", {24.5, 24.5, 24.5}},
      {"cp_out_correction_init", {4}},
      {"cp_out_correction", {2, 2, 2}}};
  const std::map<std::string, std::vector<double>> want_backward = {
      {"cp_kv_grad_buffer", {3}},
      {"cp_kv_grad_exchange", {6, 6, 6, 8}},
      {"flash_attention_bwd", {16.5}},
      {"flash_attention_ring_step_bwd", {16.5, 16.5, 14}},
      {"cp_dq_accumulate", {2, 2, 2, 2}},
      {"cp_dk_accumulate", {5, 5, 5, 5}},
      {"cp_dv_accumulate", {4, 4, 4, 4}}};
  for (bool backward : {false, true}) {
    const auto& want = backward ? want_backward : want_forward;
    std::map<std::string, std::vector<double>> got;
    for (const auto& [name, calls] : layerCalls(backward ? stage.backward : stage.forward)) {
      if (want.count(name) > 0) {
        got[name].push_back(calls);
      } else {
        EXPECT_EQ(calls, 0) << name << " is a framework op";
      }
    }
    EXPECT_EQ(got, want) << (backward ? "backward" : "forward");
  }
  EXPECT_DOUBLE_EQ(ringCalls(stage.forward), 115.5);
  EXPECT_DOUBLE_EQ(ringCalls(stage.backward), 136.5);
}

// PyTorch's ring (FSDP), the collectives of a2a and allgather, and no CP: every op a framework op.
TEST(CpRingHost, OnlyTransformerEnginesRingPricesByCall) {
  Strategy fsdp = cpStrategy(2);
  fsdp.framework = Framework::kFsdp;
  fsdp.zero_stage = 3;
  for (const Strategy& s : {fsdp, cpStrategy(2, CpComm::kA2a), cpStrategy(2, CpComm::kAllGather),
                            cpStrategy(1)}) {
    const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(2), s);
    for (const OpList* ops : {&plan.stages[0].forward, &plan.stages[0].backward}) {
      for (const OpInstance& op : *ops) EXPECT_EQ(op.host_calls, 0) << op.name;
    }
  }
}

// The backward ring of layer 1 at C = 2, device times by hand as in cp_ring_copies_test: buffer
// 1, exchange 30, each step 10, dQ 2, dK 3, dV 4 (us); alone the ring takes 75 us. Its calls:
// buffer 3; exchange 6, step 16.5, dQ 2, dK 5, dV 4; exchange 8 (the last), step 14, dQ 2, dK 5,
// dV 4: 69.5 in all.
//   host_call_us 0.1 (device-bound): the host issues the buffer at 0.3 and stays ahead of the
//     device from there (the exchange issued at 0.9 starts when the buffer ends, 1.3; the step,
//     issued at 2.55, runs [2.55, 12.55] beside it, dQ [12.55, 14.55], dK waits for the exchange:
//     [31.3, 34.3]; dV [34.3, 38.3]; the last step's exchange [38.3, 68.3] (issued at 4.45),
//     dK [68.3, 71.3], dV [71.3, 75.3]): 75 + 0.3.
//   host_call_us 2 (host-bound): op i starts when issued (the dQ of step 0 at 55 finds the
//     device busy to 61, every later op after the host): the last dV issued at 69.5 x 2 = 139
//     ends at 143.
//   every ring op a framework op at host_op_us 20 (the model before): 11 ops, the last issued at
//     220, ends at 224.
TEST(CpRingHost, ARingStepIsHostOrDeviceBoundByTheCallsItIssues) {
  const IterationPlan plan = buildIterationPlan(tinyLlama(), test::cluster(2), cpStrategy(2));
  OpList ring;
  for (const OpInstance& op : plan.stages[0].backward) {
    const bool ring_op = op.name.rfind("cp_", 0) == 0 || op.name.rfind("flash_attention", 0) == 0;
    if (op.layer == 1 && ring_op) ring.push_back(op);
  }
  ASSERT_EQ(ring.size(), 11u);
  double calls = 0;
  for (const OpInstance& op : ring) calls += op.host_calls;
  EXPECT_DOUBLE_EQ(calls, 69.5);
  const std::map<std::string, double> times = {
      {"cp_kv_grad_buffer", 1},   {"cp_kv_grad_exchange", 30}, {"flash_attention_bwd", 10},
      {"flash_attention_ring_step_bwd", 10}, {"cp_dq_accumulate", 2}, {"cp_dk_accumulate", 3},
      {"cp_dv_accumulate", 4}};
  auto end = [&](double host_call_us, bool by_call, std::vector<double>* starts = nullptr) {
    if (starts != nullptr) starts->assign(ring.size(), 0);
    return opOffsets(
        ring, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          EventCost c{times.at(std::string(op.name))};
          c.host_us = 20;
          c.host_call_us = host_call_us;
          OpInstance as_issued = op;
          if (!by_call) as_issued.host_calls = 0;
          return std::pair{issueHostUs(as_issued, c), c.time_us};
        },
        [&](size_t i, double t) {
          if (starts != nullptr) (*starts)[i] = t;
        });
  };
  std::vector<double> starts;
  EXPECT_NEAR(end(0.1, true, &starts), 75.3, 1e-9);
  const std::vector<double> device_bound = {0.3, 1.3, 2.55, 12.55, 31.3, 34.3,
                                            38.3, 38.3, 48.3, 68.3, 71.3};
  for (size_t i = 0; i < starts.size(); ++i) EXPECT_NEAR(starts[i], device_bound[i], 1e-9) << i;
  EXPECT_NEAR(end(2, true, &starts), 143, 1e-9);
  const std::vector<double> host_bound = {6, 18, 51, 61, 65, 73, 89, 117, 127, 131, 139};
  for (size_t i = 0; i < starts.size(); ++i) EXPECT_NEAR(starts[i], host_bound[i], 1e-9) << i;
  EXPECT_NEAR(end(2, false), 224, 1e-9);
}

}  // namespace
}  // namespace evsim
