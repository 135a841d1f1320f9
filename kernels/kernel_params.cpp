#include "kernels/kernel_params.h"

#include "common/error.h"

namespace evsim::kernel_params {

GemmLayout parseGemmLayout(std::string_view layout) {
  if (layout == "nn") return {false, false};
  if (layout == "nt") return {false, true};
  if (layout == "tn") return {true, false};
  if (layout == "tt") return {true, true};
  EVSIM_THROW(InputError, "GEMM layout '{}' invalid (nn, nt, tn or tt)", layout);
}

}  // namespace evsim::kernel_params
