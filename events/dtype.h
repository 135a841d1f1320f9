#pragma once
// Element types of tensors in events.

#include <cstdint>
#include <string>
#include <string_view>

namespace evsim {

enum class DType { kFp16, kBf16, kFp32 };

int64_t dtypeBytes(DType dtype);
std::string_view dtypeName(DType dtype);  // "fp16", "bf16", "fp32"
// Parses a dtype name; throws InputError naming `where` on anything else.
DType parseDType(std::string_view name, std::string_view where);

}  // namespace evsim
