#include "kernels/cuda/cuda_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/error.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/event_shapes.h"

namespace evsim::cuda {

namespace {

using kernel_params::AttentionShape;

constexpr int64_t kScoreTileBytes = int64_t{256} << 20;

int gemmInt(int64_t value, const char* what) {
  if (value <= 0 || value > INT_MAX) {
    EVSIM_THROW(Error, "attention GEMM {}={} outside the cuBLAS integer range (1..{})", what, value,
                INT_MAX);
  }
  return static_cast<int>(value);
}

// One row-major operand of a strided-batched GEMM: `ld` is its row length as stored, `stride` the
// distance between batch entries, both in elements.
struct Operand {
  const void* ptr;
  cudaDataType_t type;
  int64_t element_bytes;
  int64_t ld;
  int64_t stride;

  Operand at(int64_t elements) const {
    Operand o = *this;
    o.ptr = static_cast<const char*>(ptr) + elements * element_bytes;
    return o;
  }
  Operand withStride(int64_t elements) const {
    Operand o = *this;
    o.stride = elements;
    return o;
  }
};

Operand operand(const void* ptr, DType dtype, int64_t ld, int64_t stride) {
  return {ptr, cudaType(dtype), dtypeBytes(dtype), ld, stride};
}

Operand floatOperand(const void* ptr, int64_t ld, int64_t stride) {
  return {ptr, CUDA_R_32F, int64_t(sizeof(float)), ld, stride};
}

// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, C_i row-major [m,n]; trans_a means A_i is
// stored [k,m], trans_b that B_i is stored [n,k]. Column-major cuBLAS computes C^T = op(B)^T
// op(A)^T (as cuda_gemm.cpp's gemm). Accumulates in fp32 whatever the operand types.
void batchedGemm(cublasHandle_t handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const Operand& a, const Operand& b, float beta, const Operand& c,
                 int64_t batch) {
  EVSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      gemmInt(n, "n"), gemmInt(m, "m"), gemmInt(k, "k"), &alpha, b.ptr, b.type,
      gemmInt(b.ld, "ldb"), b.stride, a.ptr, a.type, gemmInt(a.ld, "lda"), a.stride, &beta,
      const_cast<void*>(c.ptr), c.type, gemmInt(c.ld, "ldc"), c.stride, gemmInt(batch, "batch"),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Per query head h: C_h = alpha op(A_h) op(B_{h / heads_per_group}) + beta C_h. A and C have one
// entry per query head (their stride), B one per key/value head (its stride). A strided batch has
// one stride per operand, so the heads sharing a K/V head go either in separate calls (one per
// head of a group, each batching all groups) or in one call per group with B's stride 0 (cuBLAS
// allows stride-0 inputs), whichever needs fewer calls.
void headGemm(cublasHandle_t handle, const AttentionShape& s, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b, float beta,
              const Operand& c) {
  const int64_t ratio = s.headsPerGroup();
  if (ratio == 1) {
    batchedGemm(handle, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, s.batch);
  } else if (ratio <= s.groups) {
    for (int64_t r = 0; r < ratio; ++r) {  // heads r, r + ratio, ...: one per group
      batchedGemm(handle, trans_a, trans_b, m, n, k, alpha,
                  a.at(r * a.stride).withStride(ratio * a.stride), b, beta,
                  c.at(r * c.stride).withStride(ratio * c.stride), s.groups);
    }
  } else {
    for (int64_t g = 0; g < s.groups; ++g) {  // the heads of group g, all reading B_g
      batchedGemm(handle, trans_a, trans_b, m, n, k, alpha, a.at(g * ratio * a.stride),
                  b.at(g * b.stride).withStride(0), beta, c.at(g * ratio * c.stride), ratio);
    }
  }
}

float softmaxScale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(double(s.dim)));
}

// Query rows [first, first + rows) and the keys they see (causal: up to the last row).
struct Tile {
  int64_t first, rows, keys;
};

Tile tileAt(const AttentionShape& s, int64_t first, int64_t block_rows) {
  const int64_t rows = std::min(block_rows, s.seq - first);
  return {first, rows, s.causal ? first + rows : s.seq};
}

// The tile's scaled scores S_h = Q_h[tile] K_g^T / sqrt(dim) into scratch.scores.
void tileScores(cublasHandle_t handle, DType dtype, const AttentionShape& s, const Tile& t,
                const void* q, const void* k, AttentionScratch& scratch) {
  const int64_t head = s.seq * s.dim;
  headGemm(handle, s, false, true, t.rows, t.keys, s.dim, softmaxScale(s),
           operand(q, dtype, s.dim, head).at(t.first * s.dim), operand(k, dtype, s.dim, head), 0.0f,
           floatOperand(scratch.scores.get(), t.keys, t.rows * t.keys));
}

void checkScratch(const AttentionShape& s, const AttentionScratch& scratch, bool backward) {
  EVSIM_CHECK(scratch.block_rows > 0 && (!backward || scratch.delta.get() != nullptr),
              "attention scratch for block_rows={} backward={} (seq={})", scratch.block_rows,
              backward, s.seq);
}

}  // namespace

int64_t attentionBlockRows(const AttentionShape& shape) {
  int64_t rows = kernel_params::kAttentionBlockRows;
  while (rows > 16 && shape.batch * rows * shape.seq * int64_t(sizeof(float)) > kScoreTileBytes) {
    rows /= 2;
  }
  return std::min(rows, shape.seq);
}

AttentionScratch::AttentionScratch(DType dtype, const AttentionShape& shape, int64_t rows,
                                   bool backward)
    : block_rows(std::min(rows, shape.seq)) {
  const int64_t tile = shape.batch * block_rows * shape.seq;
  scores = DeviceBuffer(tile * int64_t(sizeof(float)));
  probs = DeviceBuffer(tile * dtypeBytes(dtype));
  if (backward) {
    dprobs = DeviceBuffer(tile * int64_t(sizeof(float)));
    dscores = DeviceBuffer(tile * dtypeBytes(dtype));
    dk_acc = DeviceBuffer(shape.batch * shape.seq * shape.dim * int64_t(sizeof(float)));
    dv_acc = DeviceBuffer(shape.batch * shape.seq * shape.dim * int64_t(sizeof(float)));
    delta = DeviceBuffer(shape.batch * shape.seq * int64_t(sizeof(float)));
  }
}

void attentionForward(cublasHandle_t handle, DType dtype, const AttentionShape& s, const void* q,
                      const void* k, const void* v, void* o, float* lse, AttentionScratch& scratch,
                      cudaStream_t stream) {
  checkScratch(s, scratch, false);
  const int64_t head = s.seq * s.dim;
  for (int64_t first = 0; first < s.seq; first += scratch.block_rows) {
    const Tile t = tileAt(s, first, scratch.block_rows);
    tileScores(handle, dtype, s, t, q, k, scratch);
    attentionSoftmax(dtype, scratch.scores.as<float>(), scratch.probs.get(), lse, s.batch, t.rows,
                     t.keys, s.seq, t.first, s.causal, stream);
    headGemm(handle, s, false, false, t.rows, s.dim, t.keys, 1.0f,
             operand(scratch.probs.get(), dtype, t.keys, t.rows * t.keys),
             operand(v, dtype, s.dim, head), 0.0f,
             operand(o, dtype, s.dim, head).at(t.first * s.dim));
  }
}

void attentionBackward(cublasHandle_t handle, DType dtype, const AttentionShape& s, const void* q,
                       const void* k, const void* v, const void* o, const void* dout,
                       const float* lse, void* dq, void* dk, void* dv, AttentionScratch& scratch,
                       cudaStream_t stream) {
  checkScratch(s, scratch, true);
  const int64_t head = s.seq * s.dim;
  const int64_t acc_bytes = s.batch * head * int64_t(sizeof(float));
  EVSIM_CUDA_CHECK(cudaMemsetAsync(scratch.dk_acc.get(), 0, acc_bytes, stream));
  EVSIM_CUDA_CHECK(cudaMemsetAsync(scratch.dv_acc.get(), 0, acc_bytes, stream));
  attentionDelta(dtype, dout, o, scratch.delta.as<float>(), s.batch * s.seq, s.dim, stream);
  const float scale = softmaxScale(s);
  for (int64_t first = 0; first < s.seq; first += scratch.block_rows) {
    const Tile t = tileAt(s, first, scratch.block_rows);
    const Operand q_tile = operand(q, dtype, s.dim, head).at(t.first * s.dim);
    const Operand dout_tile = operand(dout, dtype, s.dim, head).at(t.first * s.dim);
    const Operand probs = operand(scratch.probs.get(), dtype, t.keys, t.rows * t.keys);
    const Operand dscores = operand(scratch.dscores.get(), dtype, t.keys, t.rows * t.keys);
    const Operand dk_acc = floatOperand(scratch.dk_acc.get(), s.dim, head);
    const Operand dv_acc = floatOperand(scratch.dv_acc.get(), s.dim, head);
    tileScores(handle, dtype, s, t, q, k, scratch);
    headGemm(handle, s, false, true, t.rows, t.keys, s.dim, 1.0f, dout_tile,
             operand(v, dtype, s.dim, head), 0.0f,
             floatOperand(scratch.dprobs.get(), t.keys, t.rows * t.keys));  // dP = dO V^T
    attentionScoreGrad(dtype, scratch.scores.as<float>(), scratch.dprobs.as<float>(), lse,
                       scratch.delta.as<float>(), scratch.probs.get(), scratch.dscores.get(),
                       s.batch, t.rows, t.keys, s.seq, t.first, s.causal, stream);
    // Per query head, fp32: dV_h += P^T dO, dK_h += scale dS^T Q.
    batchedGemm(handle, true, false, t.keys, s.dim, t.rows, 1.0f, probs, dout_tile, 1.0f, dv_acc,
                s.batch);
    batchedGemm(handle, true, false, t.keys, s.dim, t.rows, scale, dscores, q_tile, 1.0f, dk_acc,
                s.batch);
    headGemm(handle, s, false, false, t.rows, s.dim, t.keys, scale, dscores,
             operand(k, dtype, s.dim, head), 0.0f,
             operand(dq, dtype, s.dim, head).at(t.first * s.dim));  // dQ = scale dS K
  }
  attentionGroupSum(dtype, scratch.dk_acc.as<float>(), dk, s.groups, s.headsPerGroup(), head,
                    stream);
  attentionGroupSum(dtype, scratch.dv_acc.as<float>(), dv, s.groups, s.headsPerGroup(), head,
                    stream);
}

namespace {

class CudaAttentionKernel final : public CudaKernelBase {
 public:
  CudaAttentionKernel(const Event& e, cudaStream_t stream, uint64_t seed, bool backward)
      : CudaKernelBase(stream, seed),
        backward_(backward),
        dtype_(e.dtype),
        shape_(attentionShape(e)),
        handle_(stream),
        scratch_(dtype_, shape_, attentionBlockRows(shape_), backward) {
    const int64_t q_size = shape_.batch * shape_.seq * shape_.dim;
    const int64_t kv_size = shape_.groups * shape_.seq * shape_.dim;
    q_ = randomBuffer(dtype_, q_size, 0);
    k_ = randomBuffer(dtype_, kv_size, 1);
    v_ = randomBuffer(dtype_, kv_size, 2);
    o_ = DeviceBuffer(q_size * dtypeBytes(dtype_));
    lse_ = DeviceBuffer(shape_.batch * shape_.seq * int64_t(sizeof(float)));
    forward();  // backward reads O and the log-sum-exp of a real forward pass
    if (backward_) {
      dout_ = randomBuffer(dtype_, q_size, 3);
      dq_ = DeviceBuffer(q_size * dtypeBytes(dtype_));
      dk_ = DeviceBuffer(kv_size * dtypeBytes(dtype_));
      dv_ = DeviceBuffer(kv_size * dtypeBytes(dtype_));
    }
    synchronize();
  }
  void run() override {
    if (backward_) {
      attentionBackward(handle_.get(), dtype_, shape_, q_.get(), k_.get(), v_.get(), o_.get(),
                        dout_.get(), lse_.as<float>(), dq_.get(), dk_.get(), dv_.get(), scratch_,
                        stream_);
    } else {
      forward();
    }
  }

 private:
  void forward() {
    attentionForward(handle_.get(), dtype_, shape_, q_.get(), k_.get(), v_.get(), o_.get(),
                     lse_.as<float>(), scratch_, stream_);
  }
  bool backward_;
  DType dtype_;
  kernel_params::AttentionShape shape_;
  CublasHandle handle_;
  AttentionScratch scratch_;
  DeviceBuffer q_, k_, v_, o_, lse_, dout_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<ComputeKernel> makeCudaAttentionKernel(const Event& event, cudaStream_t stream,
                                                       uint64_t seed, bool backward) {
  return std::make_unique<CudaAttentionKernel>(event, stream, seed, backward);
}

}  // namespace evsim::cuda
