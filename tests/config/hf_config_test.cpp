// A Hugging Face config.json read as a model (config/hf_config.h): mapped keys, the counts they
// give, and one line naming a key that cannot be mapped.
#include "config/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "config/model_config.h"
#include "ops/parameter_counts.h"

namespace evsim {
namespace {

// meta-llama/Meta-Llama-3-8B's config.json as published.
constexpr const char* kLlama3_8b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

// mistralai/Mixtral-8x7B-v0.1's config.json as published.
constexpr const char* kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";

ModelConfig fromJson(const std::string& text, const std::string& name = "m") {
  return parseModelConfig(huggingFaceModelYaml(text, "config.json", name), "config.json");
}

TEST(HuggingFaceConfig, Llama3_8bParameters) {
  const ModelConfig m = fromJson(kLlama3_8b, "Meta-Llama-3-8B");
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.queryGroups(), 8);
  EXPECT_EQ(m.numLayers(), 32);
  EXPECT_EQ(m.seq_length, 8192);  // max_position_embeddings
  EXPECT_EQ(m.spec.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(m.spec.norm, NormKind::kRmsNorm);
  EXPECT_TRUE(m.spec.untied_output);
  EXPECT_FALSE(m.spec.bias);
  // Embedding and output 2 x 128256 x 4096 = 1,050,673,152; per layer q, o 2 x 4096^2, k, v
  // 2 x 4096 x 1024, SwiGLU 3 x 4096 x 14336, two norms 2 x 4096: 218,112,000 x 32 =
  // 6,979,584,000; final norm 4096. Total 8,030,261,248, Meta's published count.
  EXPECT_EQ(totalParameters(m), 8'030'261'248);
}

TEST(HuggingFaceConfig, MixtralParameters) {
  const ModelConfig imported = fromJson(kMixtral);
  // 8 experts of 3 x 4096 x 14336 and a 4096 x 8 router per layer, the rest as Llama's with a
  // 32,000 vocabulary: 46,702,792,704 in all, Mistral's published 46.7B.
  EXPECT_EQ(totalParameters(imported), 46'702'792'704);
  EXPECT_EQ(imported.moe.num_experts, 8);
  EXPECT_EQ(imported.moe.top_k, 2);
}

TEST(HuggingFaceConfig, LoadsAFileNamedAfterItsFolder) {
  const std::string dir = ::testing::TempDir() + "Meta-Llama-3-8B";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << kLlama3_8b;
  const ModelConfig m = loadModelConfig(dir + "/config.json");
  EXPECT_EQ(totalParameters(m), 8'030'261'248);
  EXPECT_EQ(m.name, "Meta-Llama-3-8B");
}

TEST(HuggingFaceConfig, RefusesWhatItCannotMapByKey) {
  auto message = [](const std::string& text) {
    try {
      fromJson(text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string llama = kLlama3_8b;
  const std::string with_mla = llama.substr(0, llama.size() - 1) + R"(, "kv_lora_rank": 512})";
  EXPECT_NE(message(with_mla).find("kv_lora_rank: not mapped"), std::string::npos)
      << message(with_mla);
  std::string mistral = kMixtral;
  const std::string window = "\"sliding_window\": null";
  mistral.replace(mistral.find(window), window.size(), "\"sliding_window\": 4096");
  EXPECT_NE(message(mistral).find("sliding_window: 4096: sliding-window attention"),
            std::string::npos)
      << message(mistral);
  EXPECT_NE(message(R"({"architectures": ["GPT2LMHeadModel"]})").find("architectures"),
            std::string::npos);
  std::string typed = llama;
  const std::string bias = "\"attention_bias\": false";
  typed.replace(typed.find(bias), bias.size(), "\"attention_bias\": \"no\"");
  EXPECT_NE(message(typed).find("wrong type"), std::string::npos) << message(typed);
  EXPECT_NE(message("{not json").find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace evsim
