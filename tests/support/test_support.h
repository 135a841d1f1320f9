#pragma once
// Helpers shared by the test programs (target evsim_test_support): small configs written in the
// test, bundled config paths, and look-ups of ops by name in a stage's op list.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "plan/iteration_plan.h"
#include "config/model_config.h"
#include "plan/strategy.h"

namespace evsim::test {

// Passes when `text` contains `part`; prints both otherwise (gmock's HasSubstr without gmock).
inline ::testing::AssertionResult containsText(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n  text: " << text << "\n  lacks: " << part;
}
#define EXPECT_CONTAINS(text, part) EXPECT_TRUE(::evsim::test::containsText((text), (part)))

inline std::string configPath(const std::string& kind, const std::string& name) {
  return std::string(EVSIM_TEST_CONFIG_DIR) + "/" + kind + "/" + name + ".yaml";
}
inline std::string dataPath(const std::string& relative) {
  return std::string(EVSIM_TEST_DATA_DIR) + "/" + relative;
}

// A decoder-only model of `layers` blocks with the given shape, as YAML text.
inline std::string modelYaml(int64_t hidden, int64_t heads, int64_t ffn, int64_t seq, int64_t vocab,
                             int64_t layers, const std::string& dtype = "fp16") {
  return "name: test-model\n"
         "dtype: " +
         dtype +
         "\n"
         "hidden_size: " +
         std::to_string(hidden) +
         "\n"
         "num_heads: " +
         std::to_string(heads) +
         "\n"
         "ffn_hidden_size: " +
         std::to_string(ffn) +
         "\n"
         "seq_length: " +
         std::to_string(seq) +
         "\n"
         "vocab_size: " +
         std::to_string(vocab) +
         "\n"
         "layers:\n"
         "  - {type: embedding}\n"
         "  - {type: decoder, count: " +
         std::to_string(layers) +
         ", cross_attention: false}\n"
         "  - {type: head}\n";
}

inline ModelConfig model(int64_t hidden, int64_t heads, int64_t ffn, int64_t seq, int64_t vocab,
                         int64_t layers, const std::string& dtype = "fp16") {
  return parseModelConfig(modelYaml(hidden, heads, ffn, seq, vocab, layers, dtype), "test-model");
}

// The links and memory of a test cluster's device (the defaults: NVLink-like and IB-like links).
struct TestLinks {
  int intra_gb_s = 300;
  int intra_latency_us = 3;
  int network_gb_s = 25;
  int network_latency_us = 5;
  int memory_gib = 40;
};
// Slower links (100 GB/s, 2 us in the node; 10 GB/s, 5 us between nodes), as the modeler and
// profiler tests use.
inline constexpr TestLinks kSlowLinks{100, 2, 10, 5, 40};

// `gpus` GPUs per node (peak 100 TFLOP/s fp16/bf16, 20 fp32; 1000 GB/s memory); `nodes` 0 leaves
// the node count open.
inline std::string clusterYaml(int gpus, int nodes = 0, const TestLinks& links = {}) {
  std::string out = "name: test-cluster\n";
  if (nodes > 0) out += "nodes: " + std::to_string(nodes) + "\n";
  out += "node:\n  gpus: " + std::to_string(gpus) +
         "\n"
         "  device:\n"
         "    name: Test GPU\n"
         "    peak_tflops: {fp16: 100, bf16: 100, fp32: 20}\n"
         "    memory_bandwidth_gb_s: 1000\n"
         "    memory_gib: " +
         std::to_string(links.memory_gib) +
         "\n  intra_link: {name: NVLink, bandwidth_gb_s: " + std::to_string(links.intra_gb_s) +
         ", latency_us: " + std::to_string(links.intra_latency_us) +
         "}\nnetwork: {name: IB, bandwidth_gb_s: " + std::to_string(links.network_gb_s) +
         ", latency_us: " + std::to_string(links.network_latency_us) + "}\n";
  return out;
}

inline ClusterConfig cluster(int gpus, int nodes = 0, const TestLinks& links = {}) {
  return parseClusterConfig(clusterYaml(gpus, nodes, links), "test-cluster");
}

inline Strategy strategy(const std::string& text, int64_t micro_batch, int64_t global_batch) {
  Strategy s;
  parseStrategyText(text, s);
  s.micro_batch = micro_batch;
  s.global_batch = global_batch;
  return s;
}

// The first op called `name` in `ops` (optionally of `layer`); fails the test when absent.
inline const OpInstance& findOp(const OpList& ops, std::string_view name, int layer = INT32_MIN) {
  for (const OpInstance& op : ops) {
    if (op.name == name && (layer == INT32_MIN || op.layer == layer)) return op;
  }
  ADD_FAILURE() << "no op named " << name;
  static const OpInstance none;
  return none;
}

inline int countOps(const OpList& ops, std::string_view name) {
  int n = 0;
  for (const OpInstance& op : ops) n += op.name == name;
  return n;
}

// Activation bytes a block keeps per micro-batch on stage 0 (the sum of its forward ops').
inline int64_t blockSavedBytes(const IterationPlan& plan, int layer) {
  int64_t bytes = 0;
  for (const OpInstance& op : plan.stages[0].forward) {
    if (op.layer == layer) bytes += op.saved_bytes;
  }
  return bytes;
}

inline const Event& eventOf(const IterationPlan& plan, const OpInstance& op) {
  EXPECT_GE(op.event, 0);
  return plan.events[op.event < 0 ? 0 : op.event].event;
}

inline std::vector<int64_t> dimValues(const Event& e) {
  std::vector<int64_t> out;
  for (const Dim& d : e.dims) out.push_back(d.value);
  return out;
}

// Count of the unique event with `signature`, or -1 when the plan has no such event.
inline int64_t countOf(const EventTable& table, const std::string& signature) {
  for (const UniqueEvent& u : table.events()) {
    if (u.signature == signature) return u.count;
  }
  return -1;
}

// The message of the InputError `f` throws; fails the test when it throws nothing or another type.
template <typename F>
std::string inputErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return "";
}

}  // namespace evsim::test
