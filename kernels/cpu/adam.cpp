// One AdamW optimizer step over fp32 master weights (mixed-precision training keeps the weights,
// gradients and both moments in fp32, so the CPU's float32 is also the GPU's data type here).
#include <cmath>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

void adamStep(float* weights, const float* grads, float* m, float* v, int64_t n, int64_t step,
              const kernel_params::AdamHyper& hyper) {
  EVSIM_CHECK(step >= 1, "Adam step {} must be >= 1", step);
  float correction1 = 1.0f - static_cast<float>(std::pow(double(hyper.beta1), double(step)));
  float correction2 = 1.0f - static_cast<float>(std::pow(double(hyper.beta2), double(step)));
  for (int64_t i = 0; i < n; ++i) {
    float g = grads[i];
    m[i] = hyper.beta1 * m[i] + (1.0f - hyper.beta1) * g;
    v[i] = hyper.beta2 * v[i] + (1.0f - hyper.beta2) * g * g;
    float mhat = m[i] / correction1;
    float vhat = v[i] / correction2;
    weights[i] -=
        hyper.lr * (mhat / (std::sqrt(vhat) + hyper.eps) + hyper.weight_decay * weights[i]);
  }
}

}  // namespace evsim::cpu
