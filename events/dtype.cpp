#include "events/dtype.h"

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

int64_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return 4;
    case DType::kFp8:
    case DType::kFp8Row:
    case DType::kFp8Block:
    case DType::kMxfp8:
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
    case DType::kFp8Row:
      return "fp8_row";
    case DType::kFp8Block:
      return "fp8_block";
    case DType::kMxfp8:
      return "mxfp8";
  }
  return "?";
}

DType parseDType(std::string_view name, std::string_view where) {
  std::string lower = toLower(name);
  if (lower == "fp16") return DType::kFp16;
  if (lower == "bf16") return DType::kBf16;
  if (lower == "fp32") return DType::kFp32;
  if (lower == "fp8") return DType::kFp8;
  if (lower == "fp8_row") return DType::kFp8Row;
  if (lower == "fp8_block") return DType::kFp8Block;
  if (lower == "mxfp8") return DType::kMxfp8;
  EVSIM_THROW(InputError,
              "{}: '{}': unknown dtype (fp16, bf16, fp32, fp8, fp8_row, fp8_block or mxfp8)", where,
              name);
}

bool isFp8(DType dtype) {
  return dtype == DType::kFp8 || dtype == DType::kFp8Row || dtype == DType::kFp8Block ||
         dtype == DType::kMxfp8;
}

DType peakDType(DType dtype) {
  return dtype == DType::kFp8Row || dtype == DType::kFp8Block ? DType::kFp8 : dtype;
}

}  // namespace evsim
