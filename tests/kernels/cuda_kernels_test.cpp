// CUDA kernels against the CPU reference functions (kernels/cpu/cpu_ops.h) on the same inputs.
// Labelled `gpu` in ctest; every test that needs a device skips cleanly when there is none.
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_attention.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_gemm_fp8.h"
#include "kernels/cuda/cuda_kernel_base.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/kernels/small_events.h"

namespace evsim {
namespace {

using cuda::DeviceBuffer;
using Floats = std::vector<float>;
namespace kp = kernel_params;

constexpr DType kAllDTypes[] = {DType::kFp32, DType::kFp16, DType::kBf16};

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// Copies n device elements of dtype back as floats.
Floats download(DType dtype, const void* device, int64_t n) {
  Floats out(static_cast<size_t>(n));
  std::vector<uint8_t> raw(static_cast<size_t>(n * dtypeBytes(dtype)));
  EVSIM_CUDA_CHECK(cudaDeviceSynchronize());
  EVSIM_CUDA_CHECK(cudaMemcpy(raw.data(), device, raw.size(), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kFp32:
        out[i] = reinterpret_cast<const float*>(raw.data())[i];
        break;
      case DType::kFp16:
        out[i] = __half2float(reinterpret_cast<const __half*>(raw.data())[i]);
        break;
      case DType::kBf16:
        out[i] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(raw.data())[i]);
        break;
      case DType::kFp8:
        out[i] = static_cast<float>(reinterpret_cast<const __nv_fp8_e4m3*>(raw.data())[i]);
        break;
      case DType::kFp8Row:
      case DType::kFp8Block:
      case DType::kMxfp8:  // no own buffers: scaled fp8 GEMMs are refused before any (cuda_gemm.cpp)
        EVSIM_THROW(Error, "download: no buffer of dtype {}", dtypeName(dtype));
    }
  }
  return out;
}

std::vector<int32_t> downloadInts(const DeviceBuffer& device, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  EVSIM_CUDA_CHECK(
      cudaMemcpy(out.data(), device.get(), n * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return out;
}

// A device buffer of random dtype values; `host` receives the exact (rounded) values as floats,
// so the CPU reference sees the very inputs the GPU saw.
DeviceBuffer randomDevice(DType dtype, int64_t n, uint64_t seed, Floats& host, float lo = -1.0f,
                          float hi = 1.0f) {
  DeviceBuffer buffer(n * dtypeBytes(dtype));
  cuda::fillUniform(dtype, buffer.get(), n, seed, lo, hi, nullptr);
  host = download(dtype, buffer.get(), n);
  return buffer;
}

// Tolerance for results stored in dtype (fp32 math inside): the output rounding dominates.
float tolerance(DType dtype, float fp32_tol) {
  return dtype == DType::kFp32 ? fp32_tol : dtype == DType::kFp16 ? 4e-3f : 3e-2f;
}

void expectClose(const Floats& got, const Floats& want, float tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i])))
        << what << " [" << i << "]";
  }
}

TEST(CudaKernelFactory, RejectsUnknownOpWithoutTouchingTheDevice) {
  Event event = makeCompute("add", {{"elems", 4}}, "", DType::kFp16, "test");
  event.op = "conv2d";
  EXPECT_THROW(makeCudaKernel(event, nullptr), InputError);
}

TEST_F(CudaKernels, EveryComputeOpConstructsAndRunsInEveryDtype) {
  cudaStream_t stream = nullptr;
  EVSIM_CUDA_CHECK(cudaStreamCreate(&stream));
  for (DType dtype : kAllDTypes) {
    for (const std::string& op : computeOpNames()) {
      if (test::hasNoKernel(op)) continue;  // refused on the host: CpuKernelFactory tests it
      SCOPED_TRACE(op + " " + std::string(dtypeName(dtype)));
      auto kernel = makeCudaKernel(test::smallEvent(op, dtype), stream, 5);
      for (int i = 0; i < 3; ++i) kernel->run();
      kernel->synchronize();
    }
  }
  EVSIM_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_F(CudaKernels, GemmMatchesCpuInEveryLayoutAndDtype) {
  cublasHandle_t handle = nullptr;
  EVSIM_CUBLAS_CHECK(cublasCreate(&handle));
  const int64_t batch = 3, m = 33, n = 17, k = 64;
  for (DType dtype : kAllDTypes) {
    for (const char* layout : {"nn", "nt", "tn", "tt"}) {
      SCOPED_TRACE(std::string(layout) + " " + std::string(dtypeName(dtype)));
      Floats a, b;
      DeviceBuffer da = randomDevice(dtype, batch * m * k, 1, a);
      DeviceBuffer db = randomDevice(dtype, batch * k * n, 2, b);
      DeviceBuffer dc(batch * m * n * dtypeBytes(dtype));
      Floats want(batch * m * n);
      cpu::batchedGemm(layout, batch, m, n, k, a.data(), b.data(), want.data());
      cuda::gemm(handle, dtype, layout, batch, m, n, k, da.get(), db.get(), dc.get());
      expectClose(download(dtype, dc.get(), batch * m * n), want, tolerance(dtype, 1e-4f), "bgemm");
      cuda::gemm(handle, dtype, layout, 1, m, n, k, da.get(), db.get(), dc.get());
      want.resize(m * n);
      expectClose(download(dtype, dc.get(), m * n), want, tolerance(dtype, 1e-4f), "gemm");
    }
  }
  cublasDestroy(handle);
}

TEST_F(CudaKernels, SoftmaxAndLayerNormMatchCpu) {
  const int64_t rows = 70, cols = 300;  // cols not a multiple of the block size
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const float tol = tolerance(dtype, 1e-5f);
    Floats x, dy, gamma, beta;
    DeviceBuffer dx_in = randomDevice(dtype, rows * cols, 3, x, -4.0f, 4.0f);
    DeviceBuffer ddy = randomDevice(dtype, rows * cols, 4, dy);
    DeviceBuffer dgamma_in = randomDevice(dtype, cols, 5, gamma, 0.5f, 1.5f);
    DeviceBuffer dbeta_in = randomDevice(dtype, cols, 6, beta);
    DeviceBuffer out(rows * cols * dtypeBytes(dtype)), grad(rows * cols * dtypeBytes(dtype));

    Floats y(rows * cols), dx(rows * cols);
    cpu::softmaxForward(x.data(), y.data(), rows, cols, 0.5f, kp::SoftmaxMask::kCausal);
    cuda::softmaxForward(dtype, dx_in.get(), out.get(), rows, cols, 0.5f, kp::SoftmaxMask::kCausal,
                         nullptr);
    Floats y_gpu = download(dtype, out.get(), rows * cols);
    expectClose(y_gpu, y, tol, "softmax_fwd");
    cpu::softmaxBackward(y_gpu.data(), dy.data(), dx.data(), rows, cols, 0.5f);
    cuda::softmaxBackward(dtype, out.get(), ddy.get(), grad.get(), rows, cols, 0.5f, nullptr);
    expectClose(download(dtype, grad.get(), rows * cols), dx, tol, "softmax_bwd");

    Floats mean(rows), rstd(rows), dgamma(cols), dbeta(cols);
    DeviceBuffer dmean(rows * 4), drstd(rows * 4);
    DeviceBuffer dg(cols * dtypeBytes(dtype)), dbt(cols * dtypeBytes(dtype));
    DeviceBuffer work(4 * cuda::layerNormBackwardWorkspaceFloats(rows, cols));
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                          rows, cols, 1e-5f);
    cuda::layerNormForward(dtype, dx_in.get(), dgamma_in.get(), dbeta_in.get(), out.get(),
                           dmean.as<float>(), drstd.as<float>(), rows, cols, 1e-5f, nullptr);
    expectClose(download(dtype, out.get(), rows * cols), y, tol * 4, "layernorm_fwd");
    expectClose(download(DType::kFp32, dmean.get(), rows), mean, 1e-5f, "mean");
    expectClose(download(DType::kFp32, drstd.get(), rows), rstd, 1e-4f, "rstd");
    cpu::layerNormBackward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                           dgamma.data(), dbeta.data(), rows, cols);
    cuda::layerNormBackward(dtype, dx_in.get(), ddy.get(), dgamma_in.get(), dmean.as<float>(),
                            drstd.as<float>(), grad.get(), dg.get(), dbt.get(), work.as<float>(),
                            rows, cols, nullptr);
    expectClose(download(dtype, grad.get(), rows * cols), dx, tol * 4 + 1e-4f, "layernorm_bwd dx");
    expectClose(download(dtype, dg.get(), cols), dgamma, tol + 1e-4f, "dgamma");
    expectClose(download(dtype, dbt.get(), cols), dbeta, tol + 1e-4f, "dbeta");
  }
}

TEST_F(CudaKernels, ElementwiseOpsMatchCpu) {
  const int64_t n = 5000;
  const float p = kp::kDropoutProbability;
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const float tol = tolerance(dtype, 1e-5f);
    Floats a, b;
    DeviceBuffer da = randomDevice(dtype, n, 7, a, -3.0f, 3.0f);
    DeviceBuffer db = randomDevice(dtype, n, 8, b);
    DeviceBuffer out(n * dtypeBytes(dtype)), mask(n);
    Floats want(n);
    cpu::geluForward(a.data(), want.data(), n);
    cuda::geluForward(dtype, da.get(), out.get(), n, nullptr);
    expectClose(download(dtype, out.get(), n), want, tol, "gelu_fwd");
    cpu::geluBackward(a.data(), b.data(), want.data(), n);
    cuda::geluBackward(dtype, da.get(), db.get(), out.get(), n, nullptr);
    expectClose(download(dtype, out.get(), n), want, tol, "gelu_bwd");
    cpu::add(a.data(), b.data(), want.data(), n);
    cuda::add(dtype, da.get(), db.get(), out.get(), n, nullptr);
    expectClose(download(dtype, out.get(), n), want, tol, "add");

    std::vector<uint8_t> cpu_mask(n), gpu_mask(n);
    cpu::dropoutForward(a.data(), want.data(), cpu_mask.data(), n, p, 99);
    cuda::dropoutForward(dtype, da.get(), out.get(), mask.as<uint8_t>(), n, p, 99, nullptr);
    expectClose(download(dtype, out.get(), n), want, tol, "dropout_fwd");
    EVSIM_CUDA_CHECK(cudaMemcpy(gpu_mask.data(), mask.get(), n, cudaMemcpyDeviceToHost));
    EXPECT_EQ(gpu_mask, cpu_mask);  // same hash RNG, same decisions
    cpu::dropoutBackward(b.data(), cpu_mask.data(), want.data(), n, p);
    cuda::dropoutBackward(dtype, db.get(), mask.as<uint8_t>(), out.get(), n, p, nullptr);
    expectClose(download(dtype, out.get(), n), want, tol, "dropout_bwd");
  }
  // memory_pass's stand-in, fp32: 5,000 words read into 1,234 written, word j the sum of the
  // input words congruent to j modulo 1,234 (five of them for j < 64, four after); and a fill.
  {
    const int64_t n_out = 1234;
    Floats in;
    DeviceBuffer din = randomDevice(DType::kFp32, n, 14, in);
    DeviceBuffer dout(n_out * 4);
    Floats sums(n_out, 0.0f);
    for (int64_t i = 0; i < n; ++i) sums[i % n_out] += in[i];
    cuda::memoryPass(din.as<float>(), n, dout.as<float>(), n_out, nullptr);
    expectClose(download(DType::kFp32, dout.get(), n_out), sums, 1e-5f, "memory_pass");
    cuda::memoryPass(din.as<float>(), 0, dout.as<float>(), n_out, nullptr);
    expectClose(download(DType::kFp32, dout.get(), n_out), Floats(n_out, 0.0f), 0.0f,
                "memory_pass fill");
  }
  // adam is fp32 only.
  Floats w, g, m, v;
  DeviceBuffer dw = randomDevice(DType::kFp32, n, 10, w);
  DeviceBuffer dg = randomDevice(DType::kFp32, n, 11, g);
  DeviceBuffer dm = randomDevice(DType::kFp32, n, 12, m, -0.01f, 0.01f);
  DeviceBuffer dv = randomDevice(DType::kFp32, n, 13, v, 1e-6f, 1e-4f);
  kp::AdamHyper hyper;
  for (int64_t step = 1; step <= 3; ++step) {
    cpu::adamStep(w.data(), g.data(), m.data(), v.data(), n, step, hyper);
    cuda::adamStep(dw.as<float>(), dg.as<float>(), dm.as<float>(), dv.as<float>(), n, step, hyper,
                   nullptr);
  }
  expectClose(download(DType::kFp32, dw.get(), n), w, 1e-5f, "adam weights");
  expectClose(download(DType::kFp32, dv.get(), n), v, 1e-5f, "adam v");
}

TEST_F(CudaKernels, EmbeddingAndCrossEntropyMatchCpu) {
  const int64_t tokens = 64, hidden = 40, vocab = 10;  // few ids: many duplicates to scatter-add
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const float tol = tolerance(dtype, 1e-5f);
    DeviceBuffer ids(tokens * 4);
    cuda::fillIndices(ids.as<int32_t>(), tokens, vocab, 17, nullptr);
    std::vector<int32_t> host_ids = downloadInts(ids, tokens);
    Floats table, dout;
    DeviceBuffer dtable_in = randomDevice(dtype, vocab * hidden, 18, table);
    DeviceBuffer ddout = randomDevice(dtype, tokens * hidden, 19, dout);
    DeviceBuffer out(tokens * hidden * dtypeBytes(dtype)), dtable(vocab * hidden * 4);
    Floats want(tokens * hidden), want_table(vocab * hidden, 0.0f);
    cpu::embeddingForward(host_ids.data(), table.data(), want.data(), tokens, hidden);
    cuda::embeddingForward(dtype, ids.as<int32_t>(), dtable_in.get(), out.get(), tokens, hidden,
                           nullptr);
    expectClose(download(dtype, out.get(), tokens * hidden), want, 0.0f, "embedding_fwd");
    cpu::embeddingBackward(host_ids.data(), dout.data(), want_table.data(), tokens, hidden);
    EVSIM_CUDA_CHECK(cudaMemset(dtable.get(), 0, vocab * hidden * 4));
    cuda::embeddingBackward(dtype, ids.as<int32_t>(), ddout.get(), dtable.as<float>(), tokens,
                            hidden, nullptr);
    expectClose(download(DType::kFp32, dtable.get(), vocab * hidden), want_table, 1e-5f,
                "embedding_bwd");

    const int64_t rows = 9, cols = 1000;
    Floats logits, dloss;
    DeviceBuffer dlogits_in = randomDevice(dtype, rows * cols, 20, logits, -4.0f, 4.0f);
    DeviceBuffer ddloss = randomDevice(DType::kFp32, rows, 21, dloss, 0.5f, 1.5f);
    DeviceBuffer targets(rows * 4), loss(rows * 4), lse(rows * 4);
    DeviceBuffer grad(rows * cols * dtypeBytes(dtype));
    cuda::fillIndices(targets.as<int32_t>(), rows, cols, 22, nullptr);
    std::vector<int32_t> host_targets = downloadInts(targets, rows);
    Floats want_loss(rows), want_lse(rows), want_grad(rows * cols);
    cpu::crossEntropyForward(logits.data(), host_targets.data(), want_loss.data(), want_lse.data(),
                             rows, cols);
    cuda::crossEntropyForward(dtype, dlogits_in.get(), targets.as<int32_t>(), loss.as<float>(),
                              lse.as<float>(), rows, cols, nullptr);
    expectClose(download(DType::kFp32, loss.get(), rows), want_loss, 1e-5f, "cross_entropy loss");
    cpu::crossEntropyBackward(logits.data(), host_targets.data(), want_lse.data(), dloss.data(),
                              want_grad.data(), rows, cols);
    cuda::crossEntropyBackward(dtype, dlogits_in.get(), targets.as<int32_t>(), lse.as<float>(),
                               ddloss.as<float>(), grad.get(), rows, cols, nullptr);
    expectClose(download(dtype, grad.get(), rows * cols), want_grad, tol + 1e-5f,
                "cross_entropy_bwd");
  }
}

// True when the current GPU has FP8 tensor cores (compute capability 8.9+).
bool hasFp8() {
  int device = 0, major = 0, minor = 0;
  EVSIM_CUDA_CHECK(cudaGetDevice(&device));
  EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor >= 89;
}

TEST(CudaKernelFactory, RejectsFp8NonGemmAndOddRopeWithoutTouchingTheDevice) {
  for (const std::string& op : computeOpNames()) {
    Event event = test::smallEvent(op, DType::kFp8);
    if (isGemmOp(op) || event.dtype != DType::kFp8) continue;  // adam is always fp32
    SCOPED_TRACE(op);
    try {
      makeCudaKernel(event, nullptr);
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(event.signature()), std::string::npos) << e.what();
    }
  }
  Event rope =
      makeCompute("rope_bwd", {{"tokens", 4}, {"heads", 2}, {"dim", 5}}, "", DType::kBf16, "test");
  EXPECT_THROW(makeCudaKernel(rope, nullptr), InputError);
}

TEST_F(CudaKernels, RmsNormSwiGluAndRopeMatchCpu) {
  const int64_t rows = 70, cols = 300;  // cols not a multiple of the block size
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const float tol = tolerance(dtype, 1e-5f);
    Floats x, dy, gamma;
    DeviceBuffer dx_in = randomDevice(dtype, rows * cols, 30, x, -3.0f, 3.0f);
    DeviceBuffer ddy = randomDevice(dtype, rows * cols, 31, dy);
    DeviceBuffer dgamma_in = randomDevice(dtype, cols, 32, gamma, 0.5f, 1.5f);
    DeviceBuffer out(rows * cols * dtypeBytes(dtype)), grad(rows * cols * dtypeBytes(dtype));
    DeviceBuffer drstd(rows * 4), dg(cols * dtypeBytes(dtype));
    DeviceBuffer work(4 * cuda::rmsNormBackwardWorkspaceFloats(rows, cols));
    Floats y(rows * cols), rstd(rows), dx(rows * cols), dgamma(cols);
    cpu::rmsNormForward(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, 1e-5f);
    cuda::rmsNormForward(dtype, dx_in.get(), dgamma_in.get(), out.get(), drstd.as<float>(), rows,
                         cols, 1e-5f, nullptr);
    expectClose(download(dtype, out.get(), rows * cols), y, tol * 4, "rmsnorm_fwd");
    expectClose(download(DType::kFp32, drstd.get(), rows), rstd, 1e-4f, "rmsnorm rstd");
    cpu::rmsNormBackward(x.data(), dy.data(), gamma.data(), rstd.data(), dx.data(), dgamma.data(),
                         rows, cols);
    cuda::rmsNormBackward(dtype, dx_in.get(), ddy.get(), dgamma_in.get(), drstd.as<float>(),
                          grad.get(), dg.get(), work.as<float>(), rows, cols, nullptr);
    expectClose(download(dtype, grad.get(), rows * cols), dx, tol * 4 + 1e-4f, "rmsnorm_bwd dx");
    expectClose(download(dtype, dg.get(), cols), dgamma, tol + 1e-4f, "rmsnorm dgamma");

    // SwiGLU over 7 rows of [gate | up] (x holds 7 * 2 * 150 values).
    const int64_t sw_rows = 7, sw_cols = 150;
    Floats want(sw_rows * sw_cols), want_grad(sw_rows * 2 * sw_cols);
    cpu::swigluForward(x.data(), want.data(), sw_rows, sw_cols);
    cuda::swigluForward(dtype, dx_in.get(), out.get(), sw_rows, sw_cols, nullptr);
    expectClose(download(dtype, out.get(), sw_rows * sw_cols), want, tol, "swiglu_fwd");
    cpu::swigluBackward(x.data(), dy.data(), want_grad.data(), sw_rows, sw_cols);
    cuda::swigluBackward(dtype, dx_in.get(), ddy.get(), grad.get(), sw_rows, sw_cols, nullptr);
    expectClose(download(dtype, grad.get(), sw_rows * 2 * sw_cols), want_grad, tol, "swiglu_bwd");

    // RoPE: 50 tokens of 3 heads x 128 channels (= 19200 of x's 21000 values) over 40 positions.
    const int64_t tokens = 50, heads = 3, dim = 128, positions = 40;
    const int64_t n = tokens * heads * dim;
    Floats cos(positions * dim / 2), sin(cos.size()), rotated(n);
    cpu::ropeTables(positions, dim, 10000.0f, cos.data(), sin.data());
    DeviceBuffer dcos(cos.size() * 4), dsin(sin.size() * 4);
    EVSIM_CUDA_CHECK(cudaMemcpy(dcos.get(), cos.data(), cos.size() * 4, cudaMemcpyHostToDevice));
    EVSIM_CUDA_CHECK(cudaMemcpy(dsin.get(), sin.data(), sin.size() * 4, cudaMemcpyHostToDevice));
    cpu::ropeForward(x.data(), rotated.data(), cos.data(), sin.data(), tokens, heads, dim,
                     positions);
    cuda::ropeForward(dtype, dx_in.get(), out.get(), dcos.as<float>(), dsin.as<float>(), tokens,
                      heads, dim, positions, nullptr);
    expectClose(download(dtype, out.get(), n), rotated, tol, "rope_fwd");
    cpu::ropeBackward(x.data(), rotated.data(), cos.data(), sin.data(), tokens, heads, dim,
                      positions);
    cuda::ropeBackward(dtype, dx_in.get(), dx_in.get(), dcos.as<float>(), dsin.as<float>(), tokens,
                       heads, dim, positions, nullptr);  // in place
    expectClose(download(dtype, dx_in.get(), n), rotated, tol, "rope_bwd in place");
  }
}

TEST_F(CudaKernels, AttentionMatchesCpu) {
  cudaStream_t stream = nullptr;
  EVSIM_CUDA_CHECK(cudaStreamCreate(&stream));
  cuda::CublasHandle handle(stream);
  // groups 2 of 4 heads: calls per head-in-group; groups 1: one call per group with a stride-0
  // K/V operand; groups 4: plain multi-head attention.
  for (int64_t groups : {2, 1, 4}) {
    for (bool causal : {true, false}) {
      for (DType dtype : kAllDTypes) {
        SCOPED_TRACE(testing::Message()
                     << "groups " << groups << " causal " << causal << " " << dtypeName(dtype));
        kp::AttentionShape s;
        s.batch = 4;
        s.groups = groups;
        s.seq = 37;
        s.dim = 16;
        s.causal = causal;
        const int64_t block_rows = 16;  // tiles of 16, 16 and 5 rows
        const int64_t q_size = s.batch * s.seq * s.dim, kv_size = s.groups * s.seq * s.dim;
        Floats q, k, v, dout;
        DeviceBuffer dq_in = randomDevice(dtype, q_size, 40, q, -2.0f, 2.0f);
        DeviceBuffer dk_in = randomDevice(dtype, kv_size, 41, k);
        DeviceBuffer dv_in = randomDevice(dtype, kv_size, 42, v);
        DeviceBuffer ddout = randomDevice(dtype, q_size, 43, dout);
        DeviceBuffer o(q_size * dtypeBytes(dtype)), lse(s.batch * s.seq * 4);
        DeviceBuffer dq(q_size * dtypeBytes(dtype)), dk(kv_size * dtypeBytes(dtype));
        DeviceBuffer dv(kv_size * dtypeBytes(dtype));
        cuda::AttentionScratch scratch(dtype, s, block_rows, true);
        cuda::attentionForward(handle.get(), dtype, s, dq_in.get(), dk_in.get(), dv_in.get(),
                               o.get(), lse.as<float>(), scratch, stream);
        Floats want_o(q_size), want_lse(s.batch * s.seq);
        Floats work(cpu::attentionWorkspaceFloats(s, block_rows));
        cpu::attentionForward(s, block_rows, q.data(), k.data(), v.data(), want_o.data(),
                              want_lse.data(), work.data());
        // Probabilities are rounded to dtype before P V, as FlashAttention does.
        const float tol = tolerance(dtype, 1e-4f);
        const Floats got_o = download(dtype, o.get(), q_size);
        expectClose(got_o, want_o, 2 * tol, "attention O");
        expectClose(download(DType::kFp32, lse.get(), s.batch * s.seq), want_lse, 1e-4f, "lse");

        cuda::attentionBackward(handle.get(), dtype, s, dq_in.get(), dk_in.get(), dv_in.get(),
                                o.get(), ddout.get(), lse.as<float>(), dq.get(), dk.get(), dv.get(),
                                scratch, stream);
        Floats want_dq(q_size), want_dk(kv_size), want_dv(kv_size);
        cpu::attentionBackward(s, block_rows, q.data(), k.data(), v.data(), got_o.data(),
                               dout.data(), want_lse.data(), want_dq.data(), want_dk.data(),
                               want_dv.data(), work.data());
        expectClose(download(dtype, dq.get(), q_size), want_dq, 4 * tol, "dQ");
        expectClose(download(dtype, dk.get(), kv_size), want_dk, 4 * tol, "dK");
        expectClose(download(dtype, dv.get(), kv_size), want_dv, 4 * tol, "dV");
      }
    }
  }
  EVSIM_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_F(CudaKernels, Fp8GemmMatchesCpuOnTheSameFp8Values) {
  if (!hasFp8()) GTEST_SKIP() << "no FP8 tensor cores (compute capability < 8.9)";
  const int64_t batch = 2, m = 48, n = 32, k = 64;
  Floats a, b, scales = {1.0f, 1.0f};
  DeviceBuffer da = randomDevice(DType::kFp8, batch * m * k, 50, a);
  DeviceBuffer db = randomDevice(DType::kFp8, batch * n * k, 51, b);
  DeviceBuffer dd(batch * m * n * 2), dscales(2 * 4);
  EVSIM_CUDA_CHECK(cudaMemcpy(dscales.get(), scales.data(), 8, cudaMemcpyHostToDevice));
  Floats want(batch * m * n);
  cpu::batchedGemm("nt", batch, m, n, k, a.data(), b.data(), want.data());  // exact fp8 products
  for (bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast accumulation" : "split accumulator");
    cuda::Fp8Gemm gemm(batch, m, n, k, fast, dscales.as<float>(), dscales.as<float>() + 1, nullptr);
    gemm.run(da.get(), db.get(), dd.get());
    expectClose(download(DType::kBf16, dd.get(), batch * m * n), want, 1e-2f, "fp8 gemm");
  }
}

TEST_F(CudaKernels, Fp8GemmEventsRunInEveryLayoutOrSayWhyNot) {
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    SCOPED_TRACE(layout);
    Event gemm = makeGemm(64, 32, 48, layout, DType::kFp8);
    Event bgemm = makeBatchedGemm(3, 64, 32, 48, layout, DType::kFp8);
    if (!hasFp8()) {
      EXPECT_THROW(makeCudaKernel(gemm, nullptr), InputError);
      continue;
    }
    for (const Event& event : {gemm, bgemm}) {
      auto kernel = makeCudaKernel(event, nullptr);
      kernel->run();
      kernel->synchronize();
    }
  }
  if (hasFp8()) {  // sizes that are not multiples of 16
    EXPECT_THROW(makeCudaKernel(makeGemm(8, 6, 4, "nt", DType::kFp8), nullptr), InputError);
  }
}

}  // namespace
}  // namespace evsim
