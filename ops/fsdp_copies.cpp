// FSDP2's copy-out and copy-in, bytes as ops/fsdp_copies.h works them.
#include "ops/fsdp_copies.h"

#include "common/checked.h"

namespace evsim {

FsdpCopy fsdpAllGatherCopyOut(int64_t gathered_bytes, DType dtype) {
  return {"fsdp_copy_out",
          makeCompute("memory_pass",
                      {{"read_bytes", gathered_bytes}, {"write_bytes", gathered_bytes}}, "",
                      dtype)};
}

FsdpCopy fsdpReduceScatterCopyIn(int64_t elements, DType grad_dtype) {
  const int64_t read = checkedMul(elements, dtypeBytes(grad_dtype), "FSDP copy-in bytes");
  const int64_t write = checkedMul(elements, dtypeBytes(DType::kFp32), "FSDP copy-in bytes");
  return {"fsdp_copy_in",
          makeCompute("memory_pass", {{"read_bytes", read}, {"write_bytes", write}}, "",
                      grad_dtype)};
}

}  // namespace evsim
