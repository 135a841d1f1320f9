#pragma once
// Element types of tensors in events.

#include <cstdint>
#include <string>
#include <string_view>

namespace evsim {

// kFp8 is E4M3, the format Transformer Engine uses for forward GEMM operands (Megatron's
// --fp8-format hybrid keeps E5M2 for gradients; both are one byte, so sizes and peaks do not tell
// them apart).
enum class DType { kFp16, kBf16, kFp32, kFp8 };

int64_t dtypeBytes(DType dtype);
std::string_view dtypeName(DType dtype);  // "fp16", "bf16", "fp32", "fp8"
// Parses a dtype name; throws InputError naming `where` on anything else.
DType parseDType(std::string_view name, std::string_view where);

}  // namespace evsim
