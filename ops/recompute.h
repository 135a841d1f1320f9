#pragma once
// Activation recomputation (Korthikanti et al. 2022): full re-runs each layer's forward before its
// backward; selective re-runs only the attention core (scores, softmax, dropout, x V). The op
// builder (layer_ops.h) reads it; a strategy (plan/strategy.h) carries it.
// selective-op is torchtitan's per-op selective activation checkpointing (ac mode "selective",
// selective_ac_option "op", torchtitan/distributed/activation_checkpoint.py): each block is
// checkpointed, but the outputs of its matmuls are saved except every second one (counted in
// forward order: wq 1, wk 2, wv 3, wo 4, w1 5, w3 6, w2 7, so wq, wv, w1, w2 are saved), and so are
// the attention kernel's outputs and the tensor-parallel reduce-scatters'; everything else is
// rebuilt before the block's backward.

#include <string_view>

namespace evsim {

enum class Recompute { kNone, kFull, kSelective, kSelectiveOp };
std::string_view recomputeName(Recompute recompute);  // "none", "full", "selective", "selective-op"
Recompute parseRecompute(std::string_view text, std::string_view flag = "--recompute");

}  // namespace evsim
