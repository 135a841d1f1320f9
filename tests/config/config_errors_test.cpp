// Model and cluster configs: the bundled ones load with the values worked out by hand, and every
// bad-input rule gives one InputError line naming the file, the key path and the value.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "config/cluster_config.h"
#include "ops/parameter_counts.h"
#include "config/model_config.h"
#include "common/yaml_reader.h"
#include "support/test_support.h"

namespace evsim {
namespace {

using test::inputErrorOf;

constexpr const char* kHeader =
    "name: m\n"
    "dtype: fp16\n"
    "hidden_size: 64\n"
    "num_heads: 4\n"
    "ffn_hidden_size: 256\n"
    "seq_length: 32\n"
    "vocab_size: 512\n";
constexpr const char* kLayers =
    "layers:\n"
    "  - {type: embedding}\n"
    "  - {type: decoder, count: 2, cross_attention: false}\n"
    "  - {type: head}\n";

// The valid model with the line that starts with `from` replaced by `to` (removed when empty).
std::string modelWith(const std::string& from, const std::string& to) {
  std::string yaml = std::string(kHeader) + kLayers;
  size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return yaml;
  size_t end = yaml.find('\n', at);
  yaml.replace(at, end - at + 1, to.empty() ? "" : to + "\n");
  return yaml;
}

std::string modelError(const std::string& yaml) {
  return inputErrorOf([&] { parseModelConfig(yaml, "m.yaml"); });
}

// The valid header with these layer groups (YAML list lines).
std::string layersError(const std::string& layers) {
  return modelError(std::string(kHeader) + "layers:\n" + layers);
}

// Dimensions beyond any model are refused where they are read: a 4e9 hidden size gave a negative
// parameter count.
TEST(ModelConfig, DimensionsBeyondAnyModelAreRefused) {
  EXPECT_CONTAINS(modelError(modelWith("hidden_size: 64", "hidden_size: 4000000000")),
                  "m.yaml: hidden_size: 4000000000: must be <= 1048576");
  EXPECT_CONTAINS(modelError(modelWith("vocab_size: 512", "vocab_size: 99999999999")),
                  "m.yaml: vocab_size: 99999999999: must be <= 16777216");
  EXPECT_CONTAINS(layersError("  - {type: decoder, count: 100000, cross_attention: false}\n"),
                  "count: 100000: must be <= 65536");
  // Found by fuzzing: many groups of the largest count ran out of memory; the total is bounded.
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 65536, cross_attention: false}\n"
                              "  - {type: decoder, count: 1, cross_attention: false}\n"
                              "  - {type: head}\n"),
                  "layers[2].count: 1: more than 65536 blocks in all");
}

TEST(ModelConfig, BaseTextIsValid) {
  ModelConfig m = parseModelConfig(modelWith("name: m", "name: m"), "m.yaml");
  EXPECT_EQ(m.name, "m");
  EXPECT_EQ(m.source, "m.yaml");
  EXPECT_EQ(m.numLayers(), 2);
  EXPECT_EQ(m.headDim(), 16);
  EXPECT_EQ(m.dtype, DType::kFp16);
}

TEST(ModelConfig, BundledModelsLoadWithHandCountedParameters) {
  namespace fs = std::filesystem;
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(std::string(EVSIM_TEST_CONFIG_DIR) + "/models")) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(loadModelConfig(entry.path().string()));
    ++loaded;
  }
  EXPECT_GE(loaded, 8);

  // BERT-Large: vocabulary 30522 padded to 30592 (239 * 128). Per block 4h^2 + 4h (attention) +
  // 2hf + f + h (MLP) + 4h (layernorms) = 4194304 + 4096 + 8388608 + 4096 + 1024 + 4096 = 12596224;
  // 24 blocks = 302309376; embedding 30592*1024 + 512*1024 = 31850496; final layernorm 2048.
  // Total 334161920 (the well-known ~335M).
  ModelConfig bert = loadModelConfig(test::configPath("models", "bert-large"));
  EXPECT_EQ(bert.numLayers(), 24);
  EXPECT_EQ(bert.paddedVocab(1), 30592);
  EXPECT_EQ(blockParameters(bert, bert.blocks[0]), 12596224);
  EXPECT_EQ(totalParameters(bert), 334161920);

  // GPT-3: per block 12h^2 + 13h = 1811939328 + 159744; 96 blocks = 173961510912; embedding
  // 51200*12288 + 2048*12288 = 654311424; final layernorm 24576. Total 174615846912 (~175B).
  ModelConfig gpt3 = loadModelConfig(test::configPath("models", "gpt3-175b"));
  EXPECT_EQ(gpt3.dtype, DType::kBf16);
  EXPECT_EQ(totalParameters(gpt3), 174615846912);

  // T5-Large: 24 encoder blocks then 24 decoder blocks with cross-attention.
  ModelConfig t5 = loadModelConfig(test::configPath("models", "t5-large"));
  ASSERT_EQ(t5.numLayers(), 48);
  EXPECT_EQ(t5.blocks[23].type, BlockType::kEncoder);
  EXPECT_FALSE(t5.blocks[23].cross_attention);
  EXPECT_EQ(t5.blocks[24].type, BlockType::kDecoder);
  EXPECT_TRUE(t5.blocks[24].cross_attention);
  EXPECT_TRUE(t5.hasCrossAttention());
  // A cross-attention block adds a second attention (4h^2 + 4h) and a layernorm (2h).
  EXPECT_EQ(blockParameters(t5, t5.blocks[24]) - blockParameters(t5, t5.blocks[0]),
            4 * 1024 * 1024 + 4 * 1024 + 2 * 1024);
}

TEST(ModelConfig, UnknownOrMisspelledKeysNameFileAndKey) {
  EXPECT_CONTAINS(modelError(modelWith("hidden_size", "hiden_size: 64")),
                  "m.yaml: hiden_size: unknown key");
  EXPECT_CONTAINS(modelError(modelWith("name: m", "name: m\nnum_layers: 24")),
                  "m.yaml: num_layers: unknown key");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_atention: false}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].cross_atention: unknown key");
  EXPECT_CONTAINS(layersError("  - {type: embedding, count: 1}\n"
                              "  - {type: encoder, count: 2}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[0].count: unknown key");
  // Encoders take no cross_attention key.
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder, count: 2, cross_attention: false}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].cross_attention: unknown key");
}

TEST(ModelConfig, MisspelledKeyInAFileNamesThePath) {
  const std::string path = test::dataPath("models/misspelled-key.yaml");
  std::string msg = inputErrorOf([&] { loadModelConfig(path); });
  EXPECT_CONTAINS(msg, path + ": hiden_size: unknown key");
  EXPECT_CONTAINS(msg, "hidden_size");  // the allowed list shows the right spelling
}

TEST(ModelConfig, MissingFields) {
  for (const char* key : {"name", "dtype", "hidden_size", "num_heads", "ffn_hidden_size",
                          "seq_length", "vocab_size"}) {
    SCOPED_TRACE(key);
    EXPECT_CONTAINS(modelError(modelWith(std::string(key) + ":", "")),
                    std::string("m.yaml: ") + key + ": missing required key");
  }
  EXPECT_CONTAINS(modelError(kHeader), "m.yaml: layers: missing required key");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 2}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].cross_attention: missing required key");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].count: missing required key");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {count: 2}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].type: missing required key");
}

TEST(ModelConfig, NonPositiveAndNonNumericSizes) {
  EXPECT_CONTAINS(modelError(modelWith("hidden_size", "hidden_size: 0")),
                  "m.yaml: hidden_size: 0: must be > 0");
  EXPECT_CONTAINS(modelError(modelWith("seq_length", "seq_length: 0")),
                  "m.yaml: seq_length: 0: must be > 0");
  EXPECT_CONTAINS(modelError(modelWith("vocab_size", "vocab_size: -5")), "m.yaml: vocab_size: -5");
  EXPECT_CONTAINS(modelError(modelWith("num_heads", "num_heads: 1.5")),
                  "m.yaml: num_heads: '1.5' is not an integer");
  EXPECT_CONTAINS(modelError(modelWith("ffn_hidden_size", "ffn_hidden_size: big")),
                  "m.yaml: ffn_hidden_size: 'big' is not an integer");
  EXPECT_CONTAINS(modelError(modelWith("hidden_size", "hidden_size: [64]")),
                  "m.yaml: hidden_size: must be a single value");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder, count: 0}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].count: 0: must be > 0");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder, count: -3}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].count: -3: must be");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_attention: maybe}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].cross_attention: 'maybe' is not true or false");
  EXPECT_CONTAINS(modelError(modelWith("name: m", "name: ''")), "m.yaml: name: must not be empty");
}

// Bug: YamlReader::positiveInt reports a negative value against the >= 0 rule of nonNegativeInt
// ("count: -3: must be >= 0"), although the rule broken is "> 0" and yaml_reader.h documents
// "layers[1].count: -3: must be > 0". Same for positiveDouble. Enable once fixed.
TEST(ModelConfig, NegativeCountNamesTheGreaterThanZeroRule) {
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder, count: -3}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].count: -3: must be > 0");
  EXPECT_CONTAINS(inputErrorOf([] {
                    std::string yaml = test::clusterYaml(4);
                    yaml.replace(yaml.find("bandwidth_gb_s: 300"), 19,
                                 std::string("bandwidth_gb_s: -300"));
                    parseClusterConfig(yaml, "c.yaml");
                  }),
                  "c.yaml: node.intra_link.bandwidth_gb_s: -300: must be > 0");
}

// Bug: a key given twice is silently accepted and the first value wins (yaml-cpp keeps both
// entries; node[key] returns the first), e.g. "hidden_size: 64" then "hidden_size: 128" loads
// h = 64. Bad input must not be silently resolved. Enable once YamlReader rejects duplicates.
TEST(ModelConfig, DuplicateKeyIsAnError) {
  EXPECT_CONTAINS(modelError(modelWith("hidden_size", "hidden_size: 64\nhidden_size: 128")),
                  "m.yaml: hidden_size: duplicate key");
  EXPECT_CONTAINS(inputErrorOf([] {
                    std::string yaml = test::clusterYaml(4);
                    yaml.replace(yaml.find("fp16: 100,"), 10, std::string("fp16: 100, fp16: 50,"));
                    parseClusterConfig(yaml, "c.yaml");
                  }),
                  "c.yaml: node.device.peak_tflops.fp16: duplicate key");
}

TEST(ModelConfig, MalformedYaml) {
  // file:line:col, as a compiler prints it (issue 17): the open list runs to the end, line 3.
  EXPECT_CONTAINS(modelError("name: m\nlayers: [ {type: embedding}\n"),
                  "m.yaml:3:1: malformed YAML: did not find expected ',' or ']' (while parsing a "
                  "flow sequence)");
  EXPECT_CONTAINS(modelError("- a\n- b\n"), "m.yaml: top level must be a mapping");
  EXPECT_CONTAINS(modelError(""), "m.yaml: top level must be a mapping");
  const std::string path = test::dataPath("models/malformed.yaml");
  std::string msg = inputErrorOf([&] { loadModelConfig(path); });
  EXPECT_CONTAINS(msg, path + ":6:1: malformed YAML");
  EXPECT_CONTAINS(inputErrorOf([] { loadModelConfig("/nonexistent/model.yaml"); }),
                  "/nonexistent/model.yaml: cannot open file");
}

TEST(ModelConfig, HeadsMustDivideHidden) {
  EXPECT_CONTAINS(modelError(modelWith("hidden_size", "hidden_size: 66")),
                  "m.yaml: num_heads: 4 does not divide hidden_size 66");
}

TEST(ModelConfig, BadDtype) {
  EXPECT_CONTAINS(modelError(modelWith("dtype", "dtype: fp4")),
                  "m.yaml: dtype: 'fp4': unknown dtype");
  // FP8 is for GEMMs only (Transformer Engine): the model's dtype stays 16-bit.
  EXPECT_CONTAINS(modelError(modelWith("dtype", "dtype: fp8")),
                  "m.yaml: dtype: fp8 is not a model dtype: use bf16 with fp8: true");
  EXPECT_EQ(parseModelConfig(modelWith("dtype", "dtype: BF16"), "m.yaml").dtype, DType::kBf16);
}

TEST(ModelConfig, LayerGroupOrder) {
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: head}\n"
                              "  - {type: decoder, count: 2, cross_attention: false}\n"),
                  "m.yaml: layers[1].type: head must be the last layer group");
  EXPECT_CONTAINS(layersError("  - {type: decoder, count: 2, cross_attention: false}\n"
                              "  - {type: embedding}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].type: embedding must be the first layer group");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_attention: false}\n"
                              "  - {type: head}\n"),
                  "layers[1].type: embedding must be the first layer group");
  EXPECT_CONTAINS(layersError("  - {type: decoder, count: 2, cross_attention: false}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers: needs an embedding group first");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_attention: false}\n"),
                  "m.yaml: layers: needs a head group last");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers: needs at least one encoder or decoder group");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: transformer, count: 2}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].type: 'transformer': unknown layer type");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: decoder, count: 2, cross_attention: true}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[1].cross_attention: true needs encoder blocks before");
  EXPECT_CONTAINS(layersError("  - {type: embedding}\n"
                              "  - {type: encoder, count: 1}\n"
                              "  - {type: decoder, count: 1, cross_attention: true}\n"
                              "  - {type: encoder, count: 1}\n"
                              "  - {type: head}\n"),
                  "m.yaml: layers[3].type: encoder blocks after cross-attention");
  EXPECT_CONTAINS(layersError("  3\n"), "m.yaml: layers: must be a list");
  const std::string path = test::dataPath("models/head-not-last.yaml");
  EXPECT_CONTAINS(inputErrorOf([&] { loadModelConfig(path); }),
                  path + ": layers[1].type: head must be the last layer group");
}

// --- clusters ---------------------------------------------------------------------------------

std::string clusterError(const std::string& yaml) {
  return inputErrorOf([&] { parseClusterConfig(yaml, "c.yaml"); });
}

std::string clusterWith(const std::string& from, const std::string& to) {
  std::string yaml = test::clusterYaml(4, 2);
  size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) yaml.replace(at, from.size(), to);
  return yaml;
}

// Numbers beyond any machine are refused where they are read (issue 17): before, 2147483648
// nodes became -2147483648, 4294967298 GPUs became 2, a 1e308 us latency printed an infinite
// iteration time and 1e300 GiB a negative memory.
TEST(ClusterConfig, NumbersBeyondAnyMachineAreRefused) {
  EXPECT_CONTAINS(clusterError(clusterWith("nodes: 2", "nodes: 2147483648")),
                  "c.yaml: nodes: 2147483648: must be <= 1048576");
  EXPECT_CONTAINS(clusterError(clusterWith("  gpus: 4", "  gpus: 4294967298")),
                  "c.yaml: node.gpus: 4294967298: must be <= 65536");
  EXPECT_CONTAINS(clusterError(clusterWith("latency_us: 5", "latency_us: 1e308")),
                  "latency_us: 1e+308: must be <= 1e+09");
  EXPECT_CONTAINS(clusterError(clusterWith("memory_gib: 40", "memory_gib: 1e300")),
                  "node.device.memory_gib: 1e+300: must be <= 1e+06");
}

TEST(ClusterConfig, BundledClustersLoad) {
  namespace fs = std::filesystem;
  for (const auto& entry :
       fs::directory_iterator(std::string(EVSIM_TEST_CONFIG_DIR) + "/clusters")) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(loadClusterConfig(entry.path().string()));
  }
  ClusterConfig a40 = loadClusterConfig(test::configPath("clusters", "a40-4x4"));
  EXPECT_EQ(a40.totalGpus(), 16);
  EXPECT_EQ(a40.gpus_per_node, 4);
  EXPECT_EQ(a40.nodeOfRank(5), 1);
  EXPECT_DOUBLE_EQ(a40.device.peakTflops(DType::kFp16), 149.7);
  ClusterConfig dgx = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  EXPECT_FALSE(dgx.totalGpus().has_value());  // open node count
  // What CUDA reports of an A100 80GB, not the datasheet's 80 (devices/a100-sxm4-80gb.yaml):
  // 79.15 GiB = 79.15 x 2^30 = 84,986,665,369.6 bytes, truncated.
  EXPECT_EQ(dgx.device.memoryBytes(), 84'986'665'369);
}

TEST(ClusterConfig, UnknownKeysNameFileAndKey) {
  const std::string path = test::dataPath("clusters/unknown-key.yaml");
  EXPECT_CONTAINS(inputErrorOf([&] { loadClusterConfig(path); }),
                  path + ": network.bandwith_gb_s: unknown key");
  EXPECT_CONTAINS(clusterError(clusterWith("name: test-cluster", "name: x\ngpus_per_node: 8")),
                  "c.yaml: gpus_per_node: unknown key");
  EXPECT_CONTAINS(clusterError(clusterWith("memory_gib", "memory_gb")),
                  "c.yaml: node.device.memory_gb: unknown key");
  EXPECT_CONTAINS(clusterError(clusterWith("  gpus: 4", "  gpus: 4\n  cpus: 64")),
                  "c.yaml: node.cpus: unknown key");
}

TEST(ClusterConfig, BadDtypeInPeakTflops) {
  const std::string path = test::dataPath("clusters/bad-dtype.yaml");
  std::string msg = inputErrorOf([&] { loadClusterConfig(path); });
  EXPECT_CONTAINS(msg, path + ": node.device.peak_tflops.fp4: 'fp4': unknown dtype");
  EXPECT_CONTAINS(clusterError(clusterWith("{fp16: 100, bf16: 100, fp32: 20}", "{}")),
                  "c.yaml: node.device.peak_tflops: needs at least one dtype");
  EXPECT_CONTAINS(clusterError(clusterWith("fp16: 100,", "fp16: 0,")),
                  "c.yaml: node.device.peak_tflops.fp16: 0: must be > 0");
  // A device without a peak for the model's dtype: named when asked, with its file (issue 33).
  ClusterConfig c =
      parseClusterConfig(clusterWith("{fp16: 100, bf16: 100, fp32: 20}", "{fp16: 100}"), "c.yaml");
  EXPECT_EQ(inputErrorOf([&] { c.device.peakTflops(DType::kBf16); }),
            "c.yaml: node.device.peak_tflops: no entry for bf16 (device 'Test GPU'; the model "
            "computes in bf16)");
}

TEST(ClusterConfig, MissingFieldsAndNonPositiveSizes) {
  EXPECT_CONTAINS(clusterError(clusterWith("  gpus: 4\n", "")),
                  "c.yaml: node.gpus: missing required key");
  EXPECT_CONTAINS(clusterError(clusterWith("  gpus: 4", "  gpus: 0")),
                  "c.yaml: node.gpus: 0: must be > 0");
  EXPECT_CONTAINS(clusterError(clusterWith("nodes: 2", "nodes: 0")),
                  "c.yaml: nodes: 0: must be > 0");
  EXPECT_CONTAINS(
      clusterError(clusterWith("network: {name: IB, bandwidth_gb_s: 25, latency_us: 5}\n", "")),
      "c.yaml: network: missing required key");
  EXPECT_CONTAINS(clusterError(clusterWith("bandwidth_gb_s: 25", "bandwidth_gb_s: 0")),
                  "c.yaml: network.bandwidth_gb_s: 0: must be > 0");
  EXPECT_CONTAINS(clusterError(clusterWith("latency_us: 3", "latency_us: -1")),
                  "c.yaml: node.intra_link.latency_us: -1");
  EXPECT_CONTAINS(clusterError(clusterWith("memory_gib: 40", "memory_gib: lots")),
                  "c.yaml: node.device.memory_gib: 'lots' is not a number");
  EXPECT_CONTAINS(clusterError(clusterWith("    name: Test GPU\n", "")),
                  "c.yaml: node.device.name: missing required key");
  // latency 0 is allowed (an ideal link), bandwidth 0 is not.
  EXPECT_NO_THROW(parseClusterConfig(clusterWith("latency_us: 3", "latency_us: 0"), "c.yaml"));
}

// A second YAML document would be ignored silently, and a key that is a list made an internal
// error: both are one input error now (issue 17, item 2).
TEST(ModelConfig, OneDocumentAndScalarKeys) {
  EXPECT_CONTAINS(modelError(modelWith("name: m", "name: m") + "---\nname: other\n"),
                  "m.yaml: 2 YAML documents ('---'); one is expected");
  EXPECT_CONTAINS(modelError(modelWith("name: m", "name: m\n[a, b]: 1")),
                  "m.yaml: a key must be a single value, not a list or a mapping");
}

// Inputs on which yaml-cpp 0.7 loops forever (found by fuzzing, tests/fuzz) are refused first, in
// one line; a block scalar whose text starts a line with ',' is still fine.
TEST(Yaml, InputsThatHangYamlCppAreRefused) {
  auto error = [](const std::string& text) {
    return inputErrorOf([&] { YamlReader::fromString(text, "y.yaml"); });
  };
  EXPECT_CONTAINS(error(","), "y.yaml: malformed YAML: line 1: ',' cannot start a node here");
  EXPECT_CONTAINS(error(", count: 2}"), "line 1: ',' cannot start a node here");
  EXPECT_CONTAINS(error("# comment\n\n, a"), "line 3: ',' cannot start a node here");
  EXPECT_CONTAINS(error("&anchor ,"), "line 1: ',' cannot start a node here");
  EXPECT_CONTAINS(error("a: 1\n---\n, b"), "line 3: ',' cannot start a node here");
  // A ',' after a quoted value or a closed flow collection at block level spun yaml-cpp as well
  // (scripts/fuzz.sh, 2026-11-23: '\"\"\"-\"\", \"\"' and shorter forms).
  const std::string after = "',' after a quoted value or a [ ] or { } collection";
  // Any text there but a ':' or a comment: "'' s" then a line "?" spun yaml-cpp too (fuzzing).
  EXPECT_CONTAINS(error("'' s\n?\n"),
                  "line 1: 's' after a quoted value or a [ ] or { } collection");
  EXPECT_CONTAINS(error("[a] s\n?\n"), "line 1: 's' after a quoted value");
  EXPECT_NO_THROW(YamlReader::fromString("a: 'it''s'\r\n\"b\" : \"x\"  # c\nc: [1]\n", "y.yaml"));
  EXPECT_CONTAINS(error("\"a\","), "y.yaml: malformed YAML: line 1: " + after);
  EXPECT_CONTAINS(error("'a' ,"), "line 1: " + after);
  EXPECT_CONTAINS(error("x: 1\n---\n\"a\"\t, b"), "line 3: " + after);
  EXPECT_CONTAINS(error("[a],[b]"), "line 1: " + after);
  EXPECT_CONTAINS(error("{a: b} ,"), "line 1: " + after);
  // A '{' inside a plain value opens no flow collection, so the next line's ',' is still seen
  // (" y,,at - {typ,,e:" then ", - ay" spun yaml-cpp; scripts/fuzz.sh, 2026-11-23).
  EXPECT_CONTAINS(error(" y,,at - {typ,,e:\n,  - ay"), "line 2: ',' cannot start a node here");
  // The pre-scan lets this through; the parser (libyaml, issue 33) then finds line 2's quote
  // unclosed (yaml-cpp had read it as text): a syntax error, not a pre-scan refusal.
  EXPECT_CONTAINS(error("name: a{b [c \"d\n'e\nx: 1\n"),
                  "y.yaml:4:1: malformed YAML: found unexpected end of stream (while scanning a "
                  "quoted scalar)");
  // Likewise a quote inside a plain value of a flow mapping opens no string (fuzzing, events).
  EXPECT_CONTAINS(error("- {sig \"x, count: 1}\n  , - {s\n"),
                  "line 2: ',' cannot start a node here");
  // Inside a flow collection, after a ':' or in a comment a ',' after a quote is fine.
  EXPECT_NO_THROW(
      YamlReader::fromString("k: [\"a\", 'b', [c], {d: e}]\n\"q\": 1 # \"x\", y\n", "y.yaml"));
  EXPECT_CONTAINS(error(std::string("a: 1 # x\0\0y\n", 12)),
                  "control character 0x00 at byte 8 is not allowed in YAML");
  EXPECT_NO_THROW(YamlReader::fromString("text: |\n  , a line of text\nname: m\n", "y.yaml"));
  EXPECT_NO_THROW(YamlReader::fromString("list: [a,\n  b]\nq: 'x\n y'\n", "y.yaml"));
  // A line that starts with ',' is refused in any context, even inside a multi-line string
  // (valid YAML, needed by no eventsim file): the scan cannot be misled about the context.
  EXPECT_CONTAINS(error("q: 'x\n, y'\n"), "line 2: ',' cannot start a node here");
  EXPECT_CONTAINS(error("n: a\n%  {nam\nb: 1\n"), "line 2: '%' (YAML directives) is not supported");
  // Anchors, aliases and tags: no eventsim file needs them, and "!,X" hangs yaml-cpp.
  EXPECT_CONTAINS(error("!,X"), "line 1: '!' (YAML anchors, aliases and tags) is not supported");
  EXPECT_CONTAINS(error("a: &x 1\nb: *x\n"), "line 1: '&' (YAML anchors");
  EXPECT_CONTAINS(error("a: 1\nb: *x\n"), "line 2: '*' (YAML anchors");
  EXPECT_CONTAINS(error("a: !!int 1\n"), "line 1: '!' (YAML anchors");
  // Inside quotes, comments and as a lone '*' they are text.
  EXPECT_NO_THROW(YamlReader::fromString("d: \"&x !y *z\" # &a !b\ne: 2 * 3\n", "y.yaml"));
}

// A cluster without node.device was "internal error: invalid node" (scripts/fuzz.sh, 2026-11-23).
TEST(ClusterConfig, MissingDeviceIsAnInputError) {
  EXPECT_CONTAINS(clusterError("name: x\nnode:\n  gpus: 8\n  intra_link: {name: l, "
                               "bandwidth_gb_s: 4, latency_us: 3}\nnetwork: {name: n, "
                               "bandwidth_gb_s: 4, latency_us: 5}\n"),
                  "c.yaml: node.device: missing required key");
}

TEST(ClusterConfig, MalformedYaml) {
  EXPECT_CONTAINS(clusterError("name: x\nnode: {gpus: 4\n"), "c.yaml:3:1: malformed YAML");
}

}  // namespace
}  // namespace evsim
