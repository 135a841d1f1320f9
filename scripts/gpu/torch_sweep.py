#!/usr/bin/env python3
"""H100 characterisation through PyTorch (issue 19): GEMMs, flash attention, memory-bound ops,
the empty-kernel time and PyTorch eager's host cost per op. Writes one CSV per family to OUTDIR.

Timing (device/METHOD.md): CUDA events between calls, the median of the repetitions, after a
warm-up. The calls are enqueued behind torch.cuda._sleep (a kernel that spins the GPU), so the
events measure the device's time per call and not PyTorch's host time to launch it, which is longer
for small shapes. Inputs are random (never zeros) and rotated among several sets when they would fit
in the 50 MB L2, so repeated calls do not measure the cache.

  python3 scripts/gpu/torch_sweep.py OUTDIR [--only gemm,attention,membound,ops,host]
"""
import argparse
import csv
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_shapes  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
L2_BYTES = 50 << 20


HOLD_CYCLES = 40_000_000  # ~20 ms at 1.98 GHz: longer than enqueueing any repetitions below


def median_us(fn, reps, warmup=3):
    for i in range(warmup):
        fn(i)
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    torch.cuda.synchronize()
    torch.cuda._sleep(HOLD_CYCLES)
    marks[0].record()
    for i in range(reps):
        fn(i)
        marks[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1000.0 for a, b in zip(marks, marks[1:]))


def sets_for(nbytes):
    """Input sets to rotate among so that the working set exceeds L2 (at most 4)."""
    return max(1, min(4, math.ceil(2 * L2_BYTES / max(nbytes, 1))))


def reps_for(work_us_guess):
    return 10 if work_us_guess > 2000 else 30


def gemm_sweep(out):
    rows = sweep_shapes.all_gemms()
    w = csv.writer(open(os.path.join(out, "torch_gemm.csv"), "w"))
    w.writerow(["family", "m", "n", "k", "layout", "split", "dtype", "time_us", "tflops"])
    fp8 = hasattr(torch, "float8_e4m3fn") and torch.cuda.get_device_capability() >= (8, 9)
    for family, m, n, k, layout, split in rows:
        flops = 2.0 * m * n * k
        for dname in ("bf16", "fp16", "fp8"):
            if dname == "fp8" and not (fp8 and layout == "nt" and m % 16 == 0):
                continue  # _scaled_mm wants A row-major and B column-major (the "nt" layout)
            try:
                t = time_gemm(m, n, k, layout, dname)
            except RuntimeError as e:  # out of memory or an unsupported fp8 shape: say so, go on
                print(f"gemm {m}x{n}x{k} {layout} {dname}: {e}".splitlines()[0], file=sys.stderr)
                torch.cuda.empty_cache()
                continue
            w.writerow([family, m, n, k, layout, split, dname, f"{t:.3f}",
                        f"{flops / t / 1e6:.2f}"])


def time_gemm(m, n, k, layout, dname):
    bytes_in = (m * k + k * n) * (1 if dname == "fp8" else 2)
    nsets = sets_for(bytes_in)
    store_dtype = torch.bfloat16 if dname == "fp8" else DT[dname]
    # Row-major A [m,k] ("n") or stored [k,m] ("t"); B stored [k,n] ("n") or [n,k] ("t").
    def make_a():
        return torch.randn((k, m) if layout[0] == "t" else (m, k), device="cuda", dtype=store_dtype)

    def make_b():
        return torch.randn((n, k) if layout[1] == "t" else (k, n), device="cuda", dtype=store_dtype)

    ins = [(make_a(), make_b()) for _ in range(nsets)]
    if dname == "fp8":
        one = torch.ones((), device="cuda")
        ins8 = [(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)) for a, b in ins]
        fn = lambda i: torch._scaled_mm(ins8[i % nsets][0], ins8[i % nsets][1].t(), one, one,
                                        out_dtype=torch.bfloat16)
    else:
        def op(a, b):
            a2 = a.t() if layout[0] == "t" else a
            b2 = b.t() if layout[1] == "t" else b
            return a2 @ b2
        fn = lambda i: op(*ins[i % nsets])
    guess = 2.0 * m * n * k / 500e12 * 1e6
    return median_us(fn, reps_for(guess))


def attention_sweep(out):
    w = csv.writer(open(os.path.join(out, "torch_attention.csv"), "w"))
    w.writerow(["head_dim", "seq", "batch", "heads", "kv_heads", "pass", "time_us", "tflops"])
    hidden_heads = 32  # query heads, head_dim 128 -> hidden 4096; head_dim 64 -> hidden 2048
    for hd in (64, 128):
        for seq in (1024, 2048, 4096, 8192, 16384, 32768):
            batch = max(1, 32768 // seq)
            for gqa in (1, 4, 8):
                kvh = hidden_heads // gqa
                q = torch.randn(batch, hidden_heads, seq, hd, device="cuda", dtype=torch.bfloat16,
                                requires_grad=True)
                k = torch.randn(batch, kvh, seq, hd, device="cuda", dtype=torch.bfloat16,
                                requires_grad=True)
                v = torch.randn_like(k, requires_grad=True)
                # Causal: half of the 4*b*H*s^2*d forward products.
                fwd_flops = 4.0 * batch * hidden_heads * seq * seq * hd / 2
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                    def fwd(_):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                              enable_gqa=gqa > 1)
                    t_f = median_us(fwd, 10)
                    o = fwd(0)
                    g = torch.randn_like(o)

                    def bwd(_):
                        torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
                    t_b = median_us(bwd, 10)
                w.writerow([hd, seq, batch, hidden_heads, kvh, "fwd", f"{t_f:.3f}",
                            f"{fwd_flops / t_f / 1e6:.2f}"])
                w.writerow([hd, seq, batch, hidden_heads, kvh, "bwd", f"{t_b:.3f}",
                            f"{2.5 * fwd_flops / t_b / 1e6:.2f}"])
                del q, k, v, o, g
                torch.cuda.empty_cache()


def membound_sweep(out):
    """Achieved bandwidth of the memory-bound ops by size: bytes = each input read once plus each
    output written once (the fewest bytes, METHOD.md)."""
    w = csv.writer(open(os.path.join(out, "torch_membound.csv"), "w"))
    w.writerow(["op", "elems", "cols", "dtype", "bytes", "time_us", "gb_s"])
    cols = 4096
    for e in (16, 18, 20, 22, 24, 26, 28):
        n = 1 << e
        rows = max(1, n // cols)
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
        el = x.numel()
        b2 = el * 2
        gamma = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        beta = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        gate = torch.randn(rows, 2 * cols, device="cuda", dtype=torch.bfloat16)
        xs = [torch.randn_like(x) for _ in range(sets_for(b2))]
        gates = [torch.randn_like(gate) for _ in range(sets_for(2 * b2))]
        ops = {
            "layernorm_fwd": (lambda i: F.layer_norm(xs[i % len(xs)], (cols,), gamma, beta), 2 * b2),
            "rmsnorm_fwd": (lambda i: F.rms_norm(xs[i % len(xs)], (cols,), gamma), 2 * b2),
            "softmax_fwd": (lambda i: torch.softmax(xs[i % len(xs)], dim=-1), 2 * b2),
            "gelu_fwd": (lambda i: F.gelu(xs[i % len(xs)]), 2 * b2),
            "swiglu_fwd": (lambda i: (lambda a, b: F.silu(a) * b)(*gates[i % len(gates)].chunk(2, -1)),
                           3 * b2),
            "dropout_fwd": (lambda i: F.dropout(xs[i % len(xs)], 0.1, True), 2 * b2),
            "add": (lambda i: xs[i % len(xs)] + x, 3 * b2),
        }
        for name, (fn, nbytes) in ops.items():
            t = median_us(fn, 30)
            w.writerow([name, el, cols, "bf16", nbytes, f"{t:.3f}", f"{nbytes / t / 1e3:.1f}"])
        # AdamW (fused, fp32 master weights, grads and two moments): reads p, g, m, v; writes p, m, v.
        p = torch.randn(el, device="cuda", requires_grad=True)
        p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        t = median_us(lambda i: opt.step(), 30)
        nbytes = 7 * 4 * el
        w.writerow(["adam", el, 0, "fp32", nbytes, f"{t:.3f}", f"{nbytes / t / 1e3:.1f}"])
        del x, xs, gates, gate, p, opt
        torch.cuda.empty_cache()
    # The copy ceiling (METHOD.md): a large device-to-device copy, bytes read plus written.
    src = torch.randn(1 << 28, device="cuda")
    dst = torch.empty_like(src)
    t = median_us(lambda i: dst.copy_(src), 20)
    w.writerow(["copy", src.numel(), 0, "fp32", 8 * src.numel(), f"{t:.3f}",
                f"{8 * src.numel() / t / 1e3:.1f}"])


def ops_sweep(out):
    """PyTorch's kernels for eventsim's memory-bound ops, forward and backward, named by eventsim
    signatures (torch_ops.csv -> scripts/gpu/torch_to_profile.py -> `eventsim calibrate --kernels`):
    what a framework's kernels reach, as opposed to eventsim's own (the cuBLAS sweep's profile)."""
    w = csv.writer(open(os.path.join(out, "torch_ops.csv"), "w"))
    w.writerow(["signature", "time_us"])
    bf = torch.bfloat16

    def fwd_bwd(name_fwd, name_bwd, fn, inputs, reps=20):
        ins = [t.requires_grad_(True) for t in inputs]
        t_f = median_us(lambda i: fn(*ins), reps)
        y = fn(*ins)
        dy = torch.randn_like(y)
        t_b = median_us(lambda i: torch.autograd.grad(y, ins, dy, retain_graph=True), reps)
        w.writerow([name_fwd, f"{t_f:.3f}"])
        if name_bwd:
            w.writerow([name_bwd, f"{t_b:.3f}"])

    for e in (20, 22, 24, 26, 28):
        n = 1 << e
        fwd_bwd(f"gelu_fwd elems={n} dtype=bf16", f"gelu_bwd elems={n} dtype=bf16",
                lambda x: F.gelu(x, approximate="tanh"), [torch.randn(n, device="cuda", dtype=bf)])
        fwd_bwd(f"dropout_fwd elems={n} dtype=bf16", f"dropout_bwd elems={n} dtype=bf16",
                lambda x: F.dropout(x, 0.1, True), [torch.randn(n, device="cuda", dtype=bf)])
        a, b = (torch.randn(n, device="cuda", dtype=bf) for _ in range(2))
        w.writerow([f"add elems={n} dtype=bf16", f"{median_us(lambda i: a + b, 20):.3f}"])
        for cols in (1024, 4096):
            rows = n // cols
            fwd_bwd(f"layernorm_fwd rows={rows} cols={cols} dtype=bf16",
                    f"layernorm_bwd rows={rows} cols={cols} dtype=bf16",
                    lambda x, g, bb: F.layer_norm(x, (x.shape[-1],), g, bb),
                    [torch.randn(rows, cols, device="cuda", dtype=bf),
                     torch.randn(cols, device="cuda", dtype=bf),
                     torch.randn(cols, device="cuda", dtype=bf)])
            fwd_bwd(f"softmax_fwd rows={rows} cols={cols} dtype=bf16",
                    f"softmax_bwd rows={rows} cols={cols} dtype=bf16",
                    lambda x: torch.softmax(x, dim=-1),
                    [torch.randn(rows, cols, device="cuda", dtype=bf)])
        p = torch.randn(n, device="cuda", requires_grad=True)
        p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        w.writerow([f"adam params={n} dtype=fp32", f"{median_us(lambda i: opt.step(), 20):.3f}"])
        del a, b, p, opt
        torch.cuda.empty_cache()
    for rows in (4096, 16384):
        for vocab in (32000, 50304):
            logits = torch.randn(rows, vocab, device="cuda", dtype=bf)
            tgt = torch.randint(0, vocab, (rows,), device="cuda")
            fwd_bwd(f"cross_entropy_fwd rows={rows} cols={vocab} dtype=bf16",
                    f"cross_entropy_bwd rows={rows} cols={vocab} dtype=bf16",
                    lambda x: F.cross_entropy(x, tgt), [logits], reps=10)
            for hidden in (1024, 4096):
                table = torch.randn(vocab, hidden, device="cuda", dtype=bf)
                fwd_bwd(f"embedding_fwd tokens={rows} hidden={hidden} vocab={vocab} dtype=bf16",
                        f"embedding_bwd tokens={rows} hidden={hidden} vocab={vocab} dtype=bf16",
                        lambda t: F.embedding(tgt, t), [table], reps=10)
            torch.cuda.empty_cache()


def host_sweep(out):
    """The fixed time of a tiny kernel on the GPU, and PyTorch eager's host time per op."""
    w = csv.writer(open(os.path.join(out, "torch_host.csv"), "w"))
    w.writerow(["what", "value_us", "how"])
    x = torch.randn(1024, device="cuda")
    n = 2000
    # GPU side: a graph of n tiny kernels replays with no host launch in between, so the replay's
    # time over n is the kernel's own time plus the device's gap between kernels.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1.0)
    g.replay()
    t = median_us(lambda i: g.replay(), 10, warmup=2)
    w.writerow(["tiny_kernel_device", f"{t / n:.3f}", f"cuda graph of {n} x.add_(1) on 1024 floats"])
    # Host side: n eager launches back to back; wall time over n once the queue is the bottleneck.
    for name, fn in (("add_", lambda: x.add_(1.0)),
                     ("linear_1x1", (lambda lin, inp: (lambda: lin(inp)))(
                         torch.nn.Linear(64, 64, device="cuda"), torch.randn(8, 64, device="cuda"))),
                     ("layer_norm", (lambda inp: (lambda: F.layer_norm(inp, (64,))))(
                         torch.randn(8, 64, device="cuda")))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        w.writerow([f"eager_host_per_op_{name}", f"{(time.perf_counter() - t0) / n * 1e6:.3f}",
                    f"wall time of {n} eager calls / {n}"])
    # Backward: autograd adds its own host time per op.
    lin = torch.nn.Linear(64, 64, device="cuda")
    inp = torch.randn(8, 64, device="cuda", requires_grad=True)
    for _ in range(50):
        lin(inp).sum().backward()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(500):
        lin(inp).sum().backward()
    torch.cuda.synchronize()
    w.writerow(["eager_host_linear_fwd_bwd", f"{(time.perf_counter() - t0) / 500 * 1e6:.3f}",
                "wall time of 500 x (linear, sum, backward) / 500"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", default="gemm,attention,membound,ops,host")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    for part in a.only.split(","):
        t0 = time.time()
        {"gemm": gemm_sweep, "attention": attention_sweep, "membound": membound_sweep,
         "ops": ops_sweep, "host": host_sweep}[part](a.out)
        print(f"torch_sweep {part}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
