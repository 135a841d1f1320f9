#pragma once
// Element types of tensors in events.

#include <cstdint>
#include <string>
#include <string_view>

namespace evsim {

// kFp8 is E4M3, the format Transformer Engine uses for forward GEMM operands (Megatron's
// --fp8-format hybrid keeps E5M2 for gradients; both are one byte, so sizes and peaks do not tell
// them apart), with one scale per tensor (delayed or current "tensorwise" scaling). The scaled
// FP8 formats are GEMM operands of their own kernels (docs/TECHNIQUES.md, FP8 recipes):
//   kFp8Row    one fp32 scale per row of each operand (torchao's rowwise; CUTLASS kernels)
//   kFp8Block  one fp32 scale per 1x128 activation / 128x128 weight block (DeepSeek-V3,
//              Transformer Engine's Float8BlockScaling; DeepGEMM / cuBLAS 12.9 kernels)
//   kMxfp8     OCP MX: one E8M0 scale per 32 elements (Blackwell tensor cores only)
// Every FP8 element is one byte; fp8_row and fp8_block run on the fp8 tensor cores (its peak),
// mxfp8 needs a device that lists an mxfp8 peak.
enum class DType { kFp16, kBf16, kFp32, kFp8, kFp8Row, kFp8Block, kMxfp8 };

int64_t dtypeBytes(DType dtype);
// "fp16", "bf16", "fp32", "fp8", "fp8_row", "fp8_block", "mxfp8"
std::string_view dtypeName(DType dtype);
// True for the one-byte FP8 formats, scaled any way.
bool isFp8(DType dtype);
// The dtype whose datasheet peak a GEMM of `dtype` runs at: fp8 for fp8_row and fp8_block
// (the same tensor cores, scales applied in the epilogue or on CUDA cores), itself otherwise.
DType peakDType(DType dtype);
// Parses a dtype name; throws InputError naming `where` on anything else.
DType parseDType(std::string_view name, std::string_view where);

}  // namespace evsim
