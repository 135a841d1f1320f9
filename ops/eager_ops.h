#pragma once
// The kernels eager PyTorch launches where a fused kernel (Megatron's, or torch.compile's) runs
// one: torchtitan's Llama (torchtitan/models/llama/model.py and models/norms.py, 2024-10, and its
// loss in train.py / components/loss.py) run without torch.compile. Each kernel is one memory-bound
// event (memory_pass: events/event.h) with the bytes it reads and writes, worked from the aten op
// it lowers to (at::native's CUDA kernels: TensorIterator pointwise ops read each input and write
// the output once; reductions read the input once; a broadcast operand of R values is read once).
// e is the model dtype's bytes (bf16: 2), fp32 is 4; N = rows x cols.
//
// RMSNorm, `self._norm(x.float()).type_as(x) * self.weight` with
// `_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`, forward 8 kernels:
//   x.float() eN -> 4N; pow 4N -> 4N; mean 4N -> 4R; + eps 4R -> 4R; rsqrt 4R -> 4R;
//   x * r 4N + 4R -> 4N; type_as 4N -> eN; * weight eN + eC -> eN.
// Backward, autograd's nodes in reverse (derivatives.yaml), 16 kernels:
//   MulBackward0 (* weight): grad * weight eN + eC -> eN; grad * self 2eN -> eN; its sum over the
//     rows to the weight's shape eN -> eC;
//   ToCopyBackward0 (type_as): eN -> 4N;
//   MulBackward0 (x * r, r broadcast): g * r 4N + 4R -> 4N; g * x 8N -> 4N; sum to r 4N -> 4R;
//   RsqrtBackward0, -0.5 * grad * result.pow(3): pow 4R -> 4R, -0.5 * grad 4R -> 4R, product
//     8R -> 4R;
//   MeanBackward1: grad.expand(...) / cols 4R -> 4N;
//   PowBackward0, grad * (2 * self.pow(1)): pow(1) is a copy 4N -> 4N, 2 * 4N -> 4N, grad * 8N
//     -> 4N;
//   the two gradients of x.float() (pow and x * r) summed: 8N -> 4N;
//   ToCopyBackward0 (x.float()): 4N -> eN.
//
// RoPE, apply_rotary_emb on each of Q and K (n = tokens x heads x dim, freqs_cis complex64 of
// seq x dim/2, 4 x seq x dim bytes): x.float() en -> 4n; the complex multiply 4n + freqs -> 4n;
// type_as 4n -> en (view_as_complex, view_as_real, reshape and flatten are views). Backward:
// type_as's en -> 4n, grad * conj(freqs) 4n + freqs -> 4n, x.float()'s 4n -> en.
//
// SwiGLU, w2(F.silu(w1(x)) * w3(x)) over F = tokens x ffn: silu eF -> eF; multiply 2eF -> eF.
// Backward: grad * up 2eF -> eF; grad * silu 2eF -> eF; silu_backward 2eF -> eF. torchtitan's w1
// and w3 (and wq, wk, wv) are separate linears reading one input: autograd sums their input
// gradients, one kernel per extra reader (2e T h -> e T h; inputGradientSum).
//
// Cross-entropy, F.cross_entropy(pred.float(), labels) over L = tokens x vocab logits: .float()
// eL -> 4L; log_softmax 3 x 4L -> 4L (cunn_SoftMaxForward's passes for the row max, the sum of
// exponentials and the output: a 128K-vocabulary row of 512 KB does not stay in L2 across
// hundreds of rows in flight); nll_loss 12T -> 8 (int64 labels and the picked values). Backward:
// nll_loss_backward's zeroed gradient 0 -> 4L and its scatter 8T + 8 -> 4T; log_softmax_backward
// 4L (the sum pass) + 8L -> 4L; .float()'s 4L -> eL.
//
// repeat_kv (GQA, n_rep = a / g query heads per K/V head), `unsqueeze(3).expand(...).reshape(...)`
// on each of K and V of tokens x g x d: the reshape of an expanded view materialises a copy,
// e x tokens x g x d -> e x tokens x g x n_rep x d, compiled or not (Inductor writes the same
// buffer for SDPA, a fallback kernel that needs it realised). Backward, ExpandBackward's sum over
// the n_rep copies: e x tokens x g x n_rep x d -> e x tokens x g x d, for each of K and V.
//
// torch.compile fuses the RMSNorm, SwiGLU and loss kernels into one each (Inductor; the fused op
// lists of layer_ops.h), and so do Megatron's fused kernels. RoPE's complex views and repeat_kv's
// copies stay kernels of their own under torch.compile (LayerShape::complex_rope, repeat_kv).

#include <cstdint>
#include <string_view>
#include <vector>

namespace evsim {

struct EagerKernel {
  std::string_view name;  // op name in traces (static storage)
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};
using EagerKernels = std::vector<EagerKernel>;

// `e`: the model dtype's bytes. RMSNorm over rows x cols.
EagerKernels eagerRmsNormForward(int64_t rows, int64_t cols, int64_t e);
EagerKernels eagerRmsNormBackward(int64_t rows, int64_t cols, int64_t e);
// One rotated tensor (Q or K) of tokens x heads x dim; `seq` the positions of freqs_cis read.
EagerKernels eagerRopeForward(int64_t tokens, int64_t heads, int64_t dim, int64_t seq, int64_t e);
EagerKernels eagerRopeBackward(int64_t tokens, int64_t heads, int64_t dim, int64_t seq, int64_t e);
// SwiGLU over `elems` outputs (tokens x ffn on this rank).
EagerKernels eagerSwiGluForward(int64_t elems, int64_t e);
EagerKernels eagerSwiGluBackward(int64_t elems, int64_t e);
// The loss over rows x vocab logits (the rank's vocabulary).
EagerKernels eagerCrossEntropyForward(int64_t rows, int64_t vocab, int64_t e);
EagerKernels eagerCrossEntropyBackward(int64_t rows, int64_t vocab, int64_t e);
// repeat_kv's copies of K and V (`groups` K/V heads on this rank, each to `n_rep` query heads).
EagerKernels eagerRepeatKvForward(int64_t tokens, int64_t groups, int64_t n_rep, int64_t dim,
                                  int64_t e);
EagerKernels eagerRepeatKvBackward(int64_t tokens, int64_t groups, int64_t n_rep, int64_t dim,
                                   int64_t e);
// Autograd's sum of two input gradients of `elems` elements (a tensor read by two linears).
EagerKernel inputGradientSum(std::string_view name, int64_t elems, int64_t e);

// Activation bytes eager RMSNorm keeps for its backward (x.float() for pow and x * r, the rsqrt
// output, the type_as output for * weight), where the fused kernel keeps its input (eN).
int64_t eagerRmsNormSavedBytes(int64_t rows, int64_t cols, int64_t e);

// Sum of read + write bytes of a list.
int64_t totalBytes(const EagerKernels& kernels);

}  // namespace evsim
