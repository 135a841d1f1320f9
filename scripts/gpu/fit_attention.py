#!/usr/bin/env python3
"""Fits the fused-attention tile model of a device file to attention kernels measured on the GPU.

A fused (flash) attention kernel gives each CTA one 128-row tile of queries of one head and walks
the 128-column key/value tiles it needs (all of them; with the causal mask those up to the
diagonal, the diagonal tile computed whole). Per visited tile it runs the QK^T and PV products
(forward: 2 GEMMs of 128 x 128 x d; backward: 5, the recomputed QK^T, dV, dP, dQ, dK) and the
softmax (exp and rescaling on the CUDA cores: the same work whatever d, `softmax_dim` channels'
worth per product), and each CTA pays a fixed prologue/epilogue (load Q, write O and the
log-sum-exp) worth `overhead` tiles:
    time = (tiles_visited + ctas * overhead) * gemms * 2*128*128*(d + softmax_dim)
           / (peak * efficiency) + kernel_us
(modeler/device_model.cpp, fusedAttentionUs). This fits efficiency, softmax_dim and overhead per
pass to torch_attention.csv (PyTorch's flash SDPA backend = FlashAttention-2, causal, bf16),
every third row held out, with the device file's fixed kernel time.
Usage: scripts/gpu/fit_attention.py [torch_attention.csv] [peak_tflops]
"""
import csv
import math
import sys

MEAS = "configs/devices/measurements/h100-sxm5-80gb/torch_attention.csv"
TILE = 128
GEMMS = {"fwd": 2, "bwd": 5}


KERNEL_US = 5.45469  # the H100 device file's gemm_kernel_us


def model_us(d, seq, heads, pass_, eff, softmax_dim, overhead, peak_tflops, causal=True):
    n = math.ceil(seq / TILE)
    per_head = n * (n + 1) / 2 if causal else n * n
    ctas = heads * n
    flops = (heads * per_head + ctas * overhead) * GEMMS[pass_] * 2 * TILE * TILE * (d + softmax_dim)
    return flops / (peak_tflops * 1e6 * eff) + KERNEL_US


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else MEAS
    peak = float(sys.argv[2]) if len(sys.argv) > 2 else 989.0
    rows = list(csv.DictReader(open(path)))
    for pass_ in ("fwd", "bwd"):
        data = [(int(r["head_dim"]), int(r["seq"]), int(r["batch"]) * int(r["heads"]),
                 float(r["time_us"])) for r in rows if r["pass"] == pass_]
        fit = [x for i, x in enumerate(data) if i % 3 != 2]
        check = [x for i, x in enumerate(data) if i % 3 == 2]

        def mape(xs, eff, sd, ovh):
            return 100 * sum(abs(model_us(d, s, bh, pass_, eff, sd, ovh, peak) / t - 1)
                             for d, s, bh, t in xs) / len(xs)
        best = None
        for i in range(200, 1001, 5):
            for sd in range(0, 129, 4):
                for o4 in range(0, 41):
                    e = mape(fit, i / 1000, sd, o4 / 4)
                    if best is None or e < best[0]:
                        best = (e, i / 1000, sd, o4 / 4)
        e, eff, sd, ovh = best
        print(f"{pass_}: efficiency {eff:.3f} softmax_dim {sd} cta_overhead_tiles {ovh:.2f}  "
              f"MAPE fit {e:.2f}% ({len(fit)} rows), check {mape(check, eff, sd, ovh):.2f}% "
              f"({len(check)} rows)")


if __name__ == "__main__":
    main()
