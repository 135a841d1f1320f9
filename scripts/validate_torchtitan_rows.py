#!/usr/bin/env python3
"""Published torchtitan Llama 3.1 8B runs on 8 H100s (FSDP2) against eventsim.

Each row is a published run (tokens/s per GPU, as torchtitan logs it) and the eventsim command
that describes it: model, plan, activation checkpointing, torch.compile on or off, Float8. The
published figures and their sources are in docs/VALIDATION.md (Issue 30, dense BF16 misses); the
torchtitan runs used Grand Teton H100s (96 GB HBM2e, 500 W), hence the default cluster.

Usage: scripts/validate_torchtitan_rows.py [--build build] [--cluster grand-teton-h100]
                                          [--compile blocks|on] [--torchao-optimizer fused|foreach]
                                          [--fsdp-wrap root|separate] [--by-class]
Prints one line per row: published, predicted, error (predicted / published - 1), then the
compile speed-up of Table 1, published and predicted. --by-class adds a table of each row's
compute-stream time per op class (rank 0's timeline CSV; docs/KERNELS.md, session 17).
"""

import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import tempfile

# Both sources ran torchtitan from before 2025-04-02 (Table 1/2: commit 9dec370, 2024-12-26; the
# torchao README: torchtitan 0.0.2 with torchao 0.10.0 nightlies, 2025-03-12), whose train.py left
# the loss uncompiled ("compiling loss function causes CUDA errors"): compile = "blocks".
COMPILED = "blocks"

# AdamW's implementation as each source ran it (--optimizer-impl): torchtitan's Tables 1-2 ran
# 9dec370 (2024-12-26), whose build_optimizers passed fused=False, foreach=True; fused became the
# default on 2025-02-24 (6e4988550), before the torchao README rows were run (torchao
# 0.10.0+git890e0ac8, a commit of 2025-02-28, with torchtitan cloned as its README says), so those
# ran fused (--torchao-optimizer foreach gives the other reading).
TABLES = "foreach"

# FSDP2's wrapping (--fsdp-wrap): every row ran torchtitan from before 2025-07-28 (83e694105, which
# gave the embedding and [norm, output] FSDP groups of their own), whose apply_fsdp put the
# embedding, final norm and output in the root's group and kept the last block gathered: "root".
WRAP = "root"

# (label, published tokens/s/GPU, micro-batch, compile, extra eventsim flags); the torchao rows
# take --torchao-optimizer, the Table rows TABLES.
TORCHAO = "torchao"
ROWS = [
    ("torchao README: bf16, b 1, per-op SAC, compile", 6150.0, 1, COMPILED,
     ["--recompute", "selective-op", "--optimizer-impl", TORCHAO]),
    ("torchao README: fp8 tensorwise, fp8 all-gather, b 1, compile", 7689.5, 1, COMPILED,
     ["--recompute", "selective-op", "--fp8-recipe", "tensorwise", "--optimizer-impl", TORCHAO]),
    ("torchtitan Table 1: FSDP, b 2, eager", 5762.0, 2, "off",
     ["--recompute", "selective-op", "--optimizer-impl", TABLES]),
    ("torchtitan Table 1: FSDP + compile, b 2", 6667.0, 2, COMPILED,
     ["--recompute", "selective-op", "--optimizer-impl", TABLES]),
    ("torchtitan Table 1: FSDP + compile + Float8, b 2", 8532.0, 2, COMPILED,
     ["--recompute", "selective-op", "--fp8-recipe", "tensorwise", "--optimizer-impl", TABLES]),
    ("torchtitan Table 2: seq 32K, full AC, compile + Float8, b 1", 3890.0, 1, COMPILED,
     ["--recompute", "full", "--seq-length", "32768", "--fp8-recipe", "tensorwise",
      "--optimizer-impl", TABLES]),
]
# Table 1's compile speed-up: the compiled row over the eager one (published 6,667 / 5,762).
SPEEDUP = ("torchtitan Table 1: FSDP + compile, b 2", "torchtitan Table 1: FSDP, b 2, eager")


def predict(build, cluster, micro_batch, compile_mode, extra, wrap=WRAP):
    wrap_flags = ["--fsdp-wrap", wrap] if wrap else []
    cmd = [f"{build}/eventsim", "simulate", "--model", "llama3-8b", "--cluster", cluster,
           "--strategy", "1M1P8D", "--framework", "fsdp", "--zero", "3"] + wrap_flags + [
           "--micro-batch", str(micro_batch), "--global-batch", str(8 * micro_batch),
           "--torch-compile", compile_mode, "--fallback", "analytic", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    summary = json.loads(out)
    return summary["throughput_tokens_per_s"] / 8, summary["iteration_time_ms"], cmd


# Op classes of the --by-class table, in its column order.
CLASSES = ["GEMM bf16", "GEMM fp8", "attn fwd", "attn bwd", "fused elementwise/norm/emb",
           "eager elementwise", "loss (eager)", "fp8 casts/amax", "FSDP copies",
           "optimizer/clip", "CP ring copies"]


def op_class(op, event):
    """The --by-class column of one compute op (its CSV `op` name and event signature)."""
    kind = event.split()[0]
    if kind in ("gemm", "bgemm"):
        return "GEMM fp8" if "dtype=fp8" in event else "GEMM bf16"
    if kind.startswith("flash_attn"):
        return "attn " + kind[len("flash_attn_"):]
    if kind in ("fp8_quantize", "amax"):
        return "fp8 casts/amax"
    if kind == "memory_pass":
        if op.startswith(("adamw", "grad_")):
            return "optimizer/clip"
        if op.startswith("fsdp_"):
            return "FSDP copies"
        if op.startswith("ce_"):
            return "loss (eager)"
        if op.startswith("cp_"):
            return "CP ring copies"
        return "eager elementwise"
    return "fused elementwise/norm/emb"


def by_class(cmd):
    """Rank 0's compute-stream ms per op class for a predict() command."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rank0.csv")
        subprocess.run(cmd + ["--csv", path, "--ranks", "0"], check=True, capture_output=True)
        sums = collections.defaultdict(float)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["stream"] == "compute":
                    sums[op_class(row["op"], row["event"])] += float(row["dur_us"]) / 1000
    return sums


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--cluster", default="grand-teton-h100")
    parser.add_argument("--compile", default=COMPILED,
                        help="--torch-compile of the compiled rows (default: blocks, see COMPILED)")
    parser.add_argument("--torchao-optimizer", default="fused", choices=["fused", "foreach"],
                        help="--optimizer-impl of the torchao README rows (default: fused, see "
                             "TABLES)")
    parser.add_argument("--fsdp-wrap", default=WRAP, choices=["root", "separate", ""],
                        help="--fsdp-wrap of every row (default: root, see WRAP; \"\" passes "
                             "none, for binaries from before the flag)")
    parser.add_argument("--by-class", action="store_true",
                        help="also print each row's compute time per op class (ms per step)")
    args = parser.parse_args()
    errors = []
    results = {}
    classes = []
    print(f"cluster {args.cluster}; tokens/s per GPU")
    for label, published, b, compile_mode, extra in ROWS:
        if compile_mode == COMPILED:
            compile_mode = args.compile
        extra = [args.torchao_optimizer if flag == TORCHAO else flag for flag in extra]
        predicted, ms, cmd = predict(args.build, args.cluster, b, compile_mode, extra,
                                     args.fsdp_wrap)
        error = predicted / published - 1
        errors.append(error)
        results[label] = (published, predicted)
        print(f"{label:62s} published {published:8.1f}  eventsim {predicted:8.1f}  "
              f"{100 * error:+6.1f}%  ({ms:.1f} ms)")
        print("   " + " ".join(cmd[1:]))
        if args.by_class:
            classes.append((label, published, ms, cmd, by_class(cmd)))
    mean = sum(errors) / len(errors)
    mape = sum(abs(e) for e in errors) / len(errors)
    print(f"mean error {100 * mean:+.1f}%, mean |error| {100 * mape:.1f}%")
    fast, slow = (results[label] for label in SPEEDUP)
    print(f"compile speed-up (Table 1): published {fast[0] / slow[0]:.3f}x, "
          f"eventsim {fast[1] / slow[1]:.3f}x")
    if classes:
        print("\nms per step (rank 0): published, predicted, compute by op class, not compute")
        print("| row | published | predicted | " + " | ".join(CLASSES) + " | not compute |")
        for label, published, ms, cmd, sums in classes:
            seq = int(cmd[cmd.index("--seq-length") + 1]) if "--seq-length" in cmd else 8192
            tokens = seq * int(cmd[cmd.index("--micro-batch") + 1])
            cells = " | ".join(f"{sums[c]:.0f}" for c in CLASSES)
            print(f"| {label} | {tokens / published * 1000:.0f} | {ms:.0f} | {cells} | "
                  f"{ms - sum(sums.values()):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
