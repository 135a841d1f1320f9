// The FP8 casts of each recipe; ops/fp8_casts.h works out their bytes.
#include "ops/fp8_casts.h"

namespace evsim {

namespace {

constexpr int64_t kFp32ScaleBytes = 4;
constexpr int64_t kE8m0ScaleBytes = 1;
constexpr int64_t kBlock = 128;              // blockwise: 1x128 activation and gradient blocks
constexpr int64_t kWeightBlock = 128 * 128;  // blockwise: 128x128 weight blocks
constexpr int64_t kMxBlock = 32;             // MX: 32 elements per E8M0 scale

Event quantize(int64_t elems, int64_t copies, int64_t block, int64_t scale_bytes) {
  return makeCompute(
      "fp8_quantize",
      {{"elems", elems}, {"copies", copies}, {"block", block}, {"scale_bytes", scale_bytes}}, "",
      DType::kBf16);
}

Event amax(int64_t elems) { return makeCompute("amax", {{"elems", elems}}, "", DType::kBf16); }

// The forward-operand casts (the header's first table); `block_elems` the blockwise block.
std::vector<Fp8Cast> operandCasts(Fp8Recipe recipe, int64_t rows, int64_t cols, int64_t block_elems,
                                  std::string_view cast_name, std::string_view amax_name) {
  const int64_t e = rows * cols;
  switch (recipe) {
    case Fp8Recipe::kDelayed:
      return {{cast_name, quantize(e, 2, e, kFp32ScaleBytes)}};
    case Fp8Recipe::kTensorwise:
      return {{amax_name, amax(e)}, {cast_name, quantize(e, 2, e, kFp32ScaleBytes)}};
    case Fp8Recipe::kRowwise:
      return {{cast_name, quantize(e, 1, cols, kFp32ScaleBytes)}};
    case Fp8Recipe::kBlockwise:
      return {{cast_name, quantize(e, 2, block_elems, kFp32ScaleBytes)}};
    case Fp8Recipe::kMxfp8:
      return {{cast_name, quantize(e, 2, kMxBlock, kE8m0ScaleBytes)}};
  }
  return {};
}

}  // namespace

std::vector<Fp8Cast> fp8InputCasts(Fp8Recipe recipe, int64_t rows, int64_t cols) {
  return operandCasts(recipe, rows, cols, kBlock, "fp8_cast_input", "fp8_amax_input");
}

std::vector<Fp8Cast> fp8GradCasts(Fp8Recipe recipe, int64_t rows, int64_t cols) {
  std::vector<Fp8Cast> out =
      operandCasts(recipe, rows, cols, kBlock, "fp8_cast_grad", "fp8_amax_grad");
  if (recipe == Fp8Recipe::kRowwise) {
    // dY^T for the wgrad, scaled per column of dY: read dY again.
    out.push_back({"fp8_cast_grad_t", quantize(rows * cols, 1, rows, kFp32ScaleBytes)});
  }
  return out;
}

std::vector<Fp8Cast> fp8WgradInputCasts(Fp8Recipe recipe, int64_t rows, int64_t cols) {
  if (recipe != Fp8Recipe::kRowwise) return {};
  return {{"fp8_cast_input_t", quantize(rows * cols, 1, rows, kFp32ScaleBytes)}};
}

std::vector<Fp8Cast> fp8WeightCasts(Fp8Recipe recipe, int64_t elems) {
  if (elems <= 0) return {};
  if (recipe == Fp8Recipe::kRowwise) {
    // W row-scaled for the forward, W^T row-scaled for the dgrad: two reads of W. The stage's
    // weights together have no single row length; their scales (4 bytes per row of a
    // thousands-wide matrix) are left out.
    return {{"fp8_cast_weight", quantize(elems, 1, elems, kFp32ScaleBytes)},
            {"fp8_cast_weight_t", quantize(elems, 1, elems, kFp32ScaleBytes)}};
  }
  std::vector<Fp8Cast> out =
      operandCasts(recipe, 1, elems, kWeightBlock, "fp8_cast_weight", "fp8_amax_weight");
  return out;
}

int64_t fp8SavedInputBytes(Fp8Recipe recipe, DType model_dtype) {
  return recipe == Fp8Recipe::kRowwise ? dtypeBytes(model_dtype) : 1;
}

}  // namespace evsim
