#pragma once
// Activation recomputation (Korthikanti et al. 2022): full re-runs each layer's forward before its
// backward; selective re-runs only the attention core (scores, softmax, dropout, x V). The op
// builder (layer_ops.h) reads it; a strategy (plan/strategy.h) carries it.

#include <string_view>

namespace evsim {

enum class Recompute { kNone, kFull, kSelective };
std::string_view recomputeName(Recompute recompute);  // "none", "full", "selective"
Recompute parseRecompute(std::string_view text, std::string_view flag = "--recompute");

}  // namespace evsim
