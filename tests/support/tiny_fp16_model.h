#pragma once

// A tiny fp16 model whose memory is worked by hand in memory_model_test.cpp (StagePeakByHand) and
// memory_peak_bound_test.cpp: h=64, a=4, f=256 (=4h), s=32, V=512 (a multiple of 128: no padding
// at t=1).

namespace evsim::test {

inline constexpr const char* kTinyFp16ModelYaml = R"(
name: tiny-mem
dtype: fp16
hidden_size: 64
num_heads: 4
ffn_hidden_size: 256
seq_length: 32
vocab_size: 512
layers:
  - {type: embedding}
  - {type: encoder, count: 2}
  - {type: head}
)";

}  // namespace evsim::test
