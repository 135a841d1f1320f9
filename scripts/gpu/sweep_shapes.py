#!/usr/bin/env python3
"""The GPU characterisation's shapes, one list for every tool that times them (issue 19).

GEMMs are the ones a Megatron transformer layer runs (QKV, attention projection, MLP up and down;
forward, data-gradient and weight-gradient passes) for several hidden sizes, token counts and
tensor-parallel splits, plus square and skinny shapes from 64 to 16384. Layout letters follow
eventsim's events: row-major A then B, "t" = stored transposed (nn.Linear's weight is [out, in], so
the forward pass is "nt", the data gradient "nn" and the weight gradient "tn").

Every shape carries `split`: "fit" or "check" (every layer shape at tokens=4096 and every third
square/skinny shape), for tools that take a held-back set by shape. `eventsim calibrate --kernels`
holds out by position instead (--hold-out-every 3, scripts/gpu/fit_h100.sh): every family loses a
third of its shapes to the check set.

  sweep_shapes.py events OUT.yaml [--dtypes bf16,fp16]   eventprof events file: the cuBLAS sweep
                                                         and eventsim's memory-bound kernels
  sweep_shapes.py csv OUT.csv                            the list itself
"""
import argparse
import csv
import sys

HIDDEN = (1024, 2048, 4096, 8192)
TOKENS = (1024, 4096, 16384)
TP = (1, 2, 8)
HELD_BACK_TOKENS = 4096


def layer_gemms():
    """(family, m, n, k, layout, split) of one transformer layer's GEMMs per (h, tokens, tp)."""
    out = []
    for h in HIDDEN:
        for t in TOKENS:
            for tp in TP:
                split = "check" if t == HELD_BACK_TOKENS else "fit"
                # (name, in features, out features) of each Linear on this TP rank
                linears = (("qkv", h, 3 * h // tp), ("proj", h // tp, h),
                           ("fc1", h, 4 * h // tp), ("fc2", 4 * h // tp, h))
                for name, fin, fout in linears:
                    out.append((f"{name}_fwd", t, fout, fin, "nt", split))
                    out.append((f"{name}_dgrad", t, fin, fout, "nn", split))
                    out.append((f"{name}_wgrad", fout, fin, t, "tn", split))
    return out


def other_gemms():
    out = []
    sizes = [64 << i for i in range(9)]  # 64 .. 16384
    for i, s in enumerate(sizes):
        out.append(("square", s, s, s, "nt", "check" if i % 3 == 1 else "fit"))
    skinny = [(s, 4096, 4096) for s in (64, 128, 256, 512)] + \
             [(4096, 4096, s) for s in (64, 256, 1024)]
    for i, (m, n, k) in enumerate(skinny):
        out.append(("skinny", m, n, k, "nt", "check" if i % 3 == 1 else "fit"))
    return out


def all_gemms():
    seen, out = set(), []
    for row in layer_gemms() + other_gemms():
        key = row[1:5]
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
    return out


MEMBOUND_COLS = 4096


def membound_signatures():
    """eventsim's memory-bound ops (kernels/cuda) from 2^16 to 2^28 elements, bf16; Adam in fp32."""
    out = []
    for e in range(16, 29, 2):
        n = 1 << e
        rows = n // MEMBOUND_COLS
        for op in ("layernorm_fwd", "layernorm_bwd", "softmax_fwd", "softmax_bwd"):
            out.append(f"{op} rows={rows} cols={MEMBOUND_COLS} dtype=bf16")
        for op in ("gelu_fwd", "gelu_bwd", "dropout_fwd", "dropout_bwd", "add"):
            out.append(f"{op} elems={n} dtype=bf16")
        out.append(f"adam params={n} dtype=fp32")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["events", "csv"])
    ap.add_argument("output")
    ap.add_argument("--dtypes", default="bf16,fp16")
    a = ap.parse_args()
    rows = all_gemms()
    with open(a.output, "w") as f:
        if a.what == "csv":
            w = csv.writer(f)
            w.writerow(["family", "m", "n", "k", "layout", "split"])
            w.writerows(rows)
        else:
            f.write("eventsim_events: 1\nevents:\n")
            for dtype in a.dtypes.split(","):
                for _, m, n, k, layout, _ in rows:
                    f.write(f'  - signature: "gemm m={m} n={n} k={k} layout={layout} '
                            f'dtype={dtype}"\n    count: 1\n')
            for sig in membound_signatures():
                f.write(f'  - signature: "{sig}"\n    count: 1\n')
    print(f"{len(rows)} GEMM shapes -> {a.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
