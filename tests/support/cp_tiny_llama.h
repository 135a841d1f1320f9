#pragma once
// The context-parallel tests' shared set-up (cp_comm_test.cpp, cp_ring_copies_test.cpp): the
// bundled tiny-llama and a CP-only strategy on it.
#include "plan/strategy.h"
#include "support/test_support.h"

namespace evsim::test {

// tiny-llama: h 64, 4 heads of d = 16, 2 K/V heads, s 32, fp32 (e = 4), 4 layers, flash attention.
inline ModelConfig tinyLlama() { return loadModelConfig(configPath("models", "tiny-llama")); }

// CP over `cp` ranks, nothing else: b = 2, one micro-batch.
inline Strategy cpStrategy(int cp, CpComm comm = CpComm::kP2p, int a2a = 0) {
  Strategy s = strategy("1M1P1D", 2, 2);
  s.cp = cp;
  s.cp_comm = comm;
  s.cp_a2a = a2a;
  return s;
}

}  // namespace evsim::test
