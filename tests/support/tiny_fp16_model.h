#pragma once

// A tiny fp16 model: h=64, a=4 (M in {1, 2, 4} divides both), f=256 (=4h), s=32, V=512 (a
// multiple of 128: no padding at t=1), between an embedding and a head `encoders` encoder layers.
// Its memory is worked by hand with 2 encoders in memory_model_test.cpp (StagePeakByHand) and
// memory_peak_bound_test.cpp; search_test.cpp uses 4 (pipelines of up to P = 4 stages).

#include <string>

namespace evsim::test {

inline std::string tinyFp16ModelYaml(const std::string& name, int encoders) {
  return "name: " + name + R"(
dtype: fp16
hidden_size: 64
num_heads: 4
ffn_hidden_size: 256
seq_length: 32
vocab_size: 512
layers:
  - {type: embedding}
  - {type: encoder, count: )" +
         std::to_string(encoders) + R"(}
  - {type: head}
)";
}

}  // namespace evsim::test
