#include "events/dtype.h"

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

int64_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return 4;
    case DType::kFp8:
      return 1;
    case DType::kFp16:
    case DType::kBf16:
      return 2;
  }
  return 2;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
    case DType::kFp32:
      return "fp32";
    case DType::kFp8:
      return "fp8";
  }
  return "?";
}

DType parseDType(std::string_view name, std::string_view where) {
  std::string lower = toLower(name);
  if (lower == "fp16") return DType::kFp16;
  if (lower == "bf16") return DType::kBf16;
  if (lower == "fp32") return DType::kFp32;
  if (lower == "fp8") return DType::kFp8;
  EVSIM_THROW(InputError, "{}: '{}': unknown dtype (fp16, bf16, fp32 or fp8)", where, name);
}

}  // namespace evsim
