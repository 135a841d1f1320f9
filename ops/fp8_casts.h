#pragma once
// The casts FP8 training runs around its GEMMs, per recipe (config/model_config.h Fp8Recipe), as
// memory-bound events of their own (fp8_quantize, amax: events/event.h). Bytes are worked per
// 16-bit tensor of E = rows x cols elements (docs/TECHNIQUES.md, FP8 recipes):
//
//   operand in the forward (a linear's input X; its weight W at the optimizer step)
//     delayed     one cast: read 2E, write the fp8 copy and its transpose (Hopper's FP8 GEMMs take
//                 only the TN layout, so the wgrad needs X^T in fp8): 4E; amax inside the cast
//     tensorwise  amax pass (read 2E), then the same cast: 6E
//     rowwise     one row-scaled copy: 2E + E + 4*rows (fp32 scale per row); its transpose cannot
//                 be taken from it (the scales run along the other axis), see the backward
//     blockwise   both copies, fp32 scale per 128 elements each: 4E + 2*4*E/128
//     mxfp8       both copies, E8M0 scale per 32 elements each: 4E + 2*E/32
//   the output gradient dY in the backward: the same, with rowwise adding the column-scaled copy
//     for the wgrad (a second read of dY): 2 x (3E + scales)
//   rowwise also casts the saved 16-bit input X again, column-scaled, for the wgrad (3E + 4*cols).
// Weights are cast once per iteration (Transformer Engine keeps the fp8 weight and its transpose
// across micro-batches; FSDP's fp8 all-gather casts the shard): fp8WeightCasts over the stage's
// FP8 weight elements, beside the optimizer step. No cast is fused into the op before it (TE's
// LayerNormLinear can write the norm's output in fp8 under delayed scaling; not modelled).

#include <cstdint>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "events/event.h"

namespace evsim {

struct Fp8Cast {
  std::string_view name;  // op name in traces (static storage)
  Event event;
};

// Before a forward FP8 GEMM: the casts of its [rows x cols] activation input.
std::vector<Fp8Cast> fp8InputCasts(Fp8Recipe recipe, int64_t rows, int64_t cols);
// Before a backward dgrad: the casts of the [rows x cols] output gradient.
std::vector<Fp8Cast> fp8GradCasts(Fp8Recipe recipe, int64_t rows, int64_t cols);
// Before a backward wgrad: the saved input cast again (rowwise only; empty otherwise).
std::vector<Fp8Cast> fp8WgradInputCasts(Fp8Recipe recipe, int64_t rows, int64_t cols);
// Once per iteration: the casts of `elems` FP8 weight elements (all of a stage's linear weights
// together; blocks of 128x128 under blockwise).
std::vector<Fp8Cast> fp8WeightCasts(Fp8Recipe recipe, int64_t elems);
// Bytes a linear keeps of its input per element for the wgrad: 1 (the fp8 transposed copy), or
// the 16-bit input under rowwise (cast again in the backward).
int64_t fp8SavedInputBytes(Fp8Recipe recipe, DType model_dtype);

}  // namespace evsim
