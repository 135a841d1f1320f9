#pragma once
// The bundled configs the benchmarks run on, loaded once per process.

#include "config/cluster_config.h"
#include "config/model_config.h"

namespace evsim::bench {

inline const ModelConfig& gpt3() {
  static const ModelConfig model = loadModelConfig(EVSIM_CONFIG_DIR "/models/gpt3-175b.yaml");
  return model;
}

inline const ClusterConfig& dgx() {
  static const ClusterConfig cluster =
      loadClusterConfig(EVSIM_CONFIG_DIR "/clusters/dgx-a100.yaml");
  return cluster;
}

inline const ModelConfig& llama405b() {
  static const ModelConfig model = loadModelConfig(EVSIM_CONFIG_DIR "/models/llama3.1-405b.yaml");
  return model;
}

inline const ModelConfig& llama70b() {
  static const ModelConfig model = loadModelConfig(EVSIM_CONFIG_DIR "/models/llama3-70b.yaml");
  return model;
}

inline const ClusterConfig& dgxH100() {
  static const ClusterConfig cluster =
      loadClusterConfig(EVSIM_CONFIG_DIR "/clusters/dgx-h100.yaml");
  return cluster;
}

}  // namespace evsim::bench
