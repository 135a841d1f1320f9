#!/usr/bin/env python3
"""Published NVIDIA NeMo / Megatron-Bridge Llama 3 runs on DGX H100 against eventsim.

Held-out rows (no constant in eventsim was fitted to them): NVIDIA's own published step times
for the plans its performance recipes tune, BF16 and FP8, 8 to 2,048 H100s. Each row is the
published figure, its exact source, and the eventsim command for the recipe's plan and flags.

Sources (git objects of the public repositories, read this session):
- DGXC: NVIDIA/dgxc-benchmarking, "Expected Performance" tables ("Training step time (seconds
  per step)", weak scaling, seq 8,192, MBS 1):
    v25.04.01 (commit 85380ff, llama3.1/README.md; NeMo 25.02.01 container, NeMo 2.0
      scripts/performance/llm/pretrain_llama31.py);
    v25.02 (commit 8f5cbb3, llama3.1/README_70b.md; NeMo 24.12, NeMo-Launcher llama3.1_70b.yaml);
    v24.11.1 (commit 35a9aec, llama3.1/README_70b.md; NeMo 24.09).
- MB: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, "25.09 NeMo Container",
  DGX-H100, LLAMA3_70B (tokens/s/GPU).
- NeMo 24.07: NVIDIA/NeMo docs/source/performance/performance_summary.md (commit a2aa70a228^),
  LLAMA3-70B FP8 (tokens/s/GPU).

The recipes' flags (all rows): Megatron with the distributed optimizer (--zero 1), gradient
reduce and parameter gather overlapped, gradients reduced in bf16 (NeMo's grad_sync_dtype bf16 /
grad_reduce_in_fp32 False), no activation recomputation, flash attention; with TP > 1 sequence
parallelism and Transformer Engine's userbuffers TP overlap (ub_tp_comm_overlap: true, the
userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192 configs); with PP > 1 the interleaved
schedule. FP8: NeMo 24.x/25.0x's bf16_with_fp8_mixed (delayed scaling), Megatron-Bridge's FP8-CS
(current = tensorwise scaling).

Llama 3.1 405B (DGXC v25.04.01, 512-2,048 GPUs, TP8 PP8 CP2 VP8; the 32-128-GPU "405b-Proxy" rows
are truncated models and left out) added in session 19: its 126 layers split with the embedding
and the loss counted as a layer each, as NeMo's 405B recipes set (account_for_embedding_in_
pipeline_split, account_for_loss_in_pipeline_split; NVIDIA's llama31_405b recipes and
Megatron-Bridge's 405B configs).

Usage: scripts/validate_nemo_rows.py [--build build] [--cluster dgx-h100] [--no-tp-overlap]
                                     [--by-class]
Prints per row: published and predicted tokens/s per GPU, the error (predicted / published - 1),
eventsim's model TFLOP/s per GPU and MFU (its own FLOP count: causal attention, no input
embedding), then the mean error by precision.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_torchtitan_rows import CLASSES, by_class  # noqa: E402

SEQ = 8192
DGXC_2504 = "DGXC v25.04.01 (85380ff llama3.1/README.md)"
DGXC_2502 = "DGXC v25.02 (8f5cbb3 llama3.1/README_70b.md)"
DGXC_2409 = "DGXC v24.11.1 (35a9aec llama3.1/README_70b.md)"
MB_2509 = "Megatron-Bridge 25.09 (performance-summary-archive.md)"
NEMO_2407 = "NeMo 24.07 (performance_summary.md)"

# (source, model, precision, gpus, tp, pp, cp, vp, global batch, published value, unit)
# unit "s": seconds per step; "tok": tokens/s per GPU.
ROWS = [
    (DGXC_2504, "llama3-8b", "bf16", 8, 1, 1, 2, 1, 128, 12.27, "s"),
    (DGXC_2504, "llama3-8b", "bf16", 128, 1, 1, 2, 1, 2048, 12.33, "s"),
    (DGXC_2504, "llama3-8b", "fp8", 8, 1, 1, 2, 1, 128, 9.33, "s"),
    (DGXC_2504, "llama3-8b", "fp8", 128, 1, 1, 2, 1, 2048, 9.54, "s"),
    (DGXC_2504, "llama3-70b", "bf16", 64, 4, 4, 2, 5, 128, 14.66, "s"),
    (DGXC_2504, "llama3-70b", "bf16", 256, 4, 4, 2, 5, 512, 14.68, "s"),
    (DGXC_2504, "llama3-70b", "bf16", 1024, 4, 4, 2, 5, 2048, 14.65, "s"),
    (DGXC_2504, "llama3-70b", "bf16", 2048, 4, 4, 2, 5, 4096, 14.66, "s"),
    (DGXC_2504, "llama3-70b", "fp8", 64, 4, 8, 1, 5, 128, 9.86, "s"),
    (DGXC_2504, "llama3-70b", "fp8", 1024, 4, 8, 1, 5, 2048, 10.08, "s"),
    (DGXC_2504, "llama3.1-405b", "bf16", 512, 8, 8, 2, 8, 256, 19.78, "s"),
    (DGXC_2504, "llama3.1-405b", "bf16", 1024, 8, 8, 2, 8, 512, 19.84, "s"),
    (DGXC_2504, "llama3.1-405b", "bf16", 2048, 8, 8, 2, 8, 1024, 19.87, "s"),
    (DGXC_2504, "llama3.1-405b", "fp8", 512, 8, 8, 2, 8, 256, 12.37, "s"),
    (DGXC_2504, "llama3.1-405b", "fp8", 1024, 8, 8, 2, 8, 512, 12.42, "s"),
    (DGXC_2504, "llama3.1-405b", "fp8", 2048, 8, 8, 2, 8, 1024, 12.56, "s"),
    (DGXC_2502, "llama3-70b", "bf16", 64, 4, 4, 2, 5, 128, 14.61, "s"),
    (DGXC_2502, "llama3-70b", "bf16", 1024, 4, 4, 2, 5, 2048, 14.86, "s"),
    (DGXC_2502, "llama3-70b", "fp8", 64, 4, 4, 2, 5, 128, 10.46, "s"),
    (DGXC_2502, "llama3-70b", "fp8", 1024, 4, 4, 2, 5, 2048, 10.83, "s"),
    (DGXC_2409, "llama3-70b", "bf16", 1024, 4, 4, 2, 5, 2048, 14.92, "s"),
    (DGXC_2409, "llama3-70b", "fp8", 1024, 4, 4, 2, 5, 2048, 11.28, "s"),
    (MB_2509, "llama3-70b", "fp8-cs", 64, 4, 8, 1, 5, 128, 1619.0, "tok"),
    (NEMO_2407, "llama3-70b", "fp8", 64, 4, 4, 2, 5, 128, 1524.0, "tok"),
]


def command(build, cluster, row, tp_overlap=True):
    _, model, precision, gpus, tp, pp, cp, vp, gbs, _, _ = row
    d = gpus // (tp * pp * cp)
    cmd = [f"{build}/eventsim", "simulate", "--model", model, "--cluster", cluster,
           "--strategy", f"{tp}M{pp}P{d}D", "--micro-batch", "1", "--global-batch", str(gbs),
           "--zero", "1", "--dp-overlap", "--overlap-param-gather", "--grad-reduce-in-bf16",
           "--fallback", "analytic", "--json"]
    if cp > 1:
        cmd += ["--cp", str(cp)]
    if pp > 1:
        cmd += ["--schedule", "interleaved", "--virtual-stages", str(vp)]
    if tp > 1:
        cmd += ["--sequence-parallel"] + (["--tp-comm-overlap"] if tp_overlap else [])
    if model == "llama3.1-405b":
        # 126 layers over PP 8 x VP 8 = 64 chunks: NeMo's 405B recipe counts the embedding and the
        # loss as a layer each in the split (account_for_{embedding,loss}_in_pipeline_split), so
        # the first and last chunks hold one decoder layer, the others two.
        cmd += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    if precision == "fp8":
        cmd += ["--fp8-recipe", "delayed"]
    elif precision == "fp8-cs":
        cmd += ["--fp8-recipe", "tensorwise"]
    return cmd


def published_tokens(row):
    gpus, gbs, value, unit = row[3], row[8], row[9], row[10]
    return value if unit == "tok" else SEQ * gbs / value / gpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--cluster", default="dgx-h100")
    parser.add_argument("--no-tp-overlap", action="store_true",
                        help="simulate without --tp-comm-overlap (the recipes run with it)")
    parser.add_argument("--by-class", action="store_true",
                        help="also print each row's rank-0 compute time per op class (ms)")
    args = parser.parse_args()
    errors = {}
    classes = []
    print(f"cluster {args.cluster}; tokens/s per GPU (published step times converted as "
          f"seq x GBS / step / GPUs)")
    for row in ROWS:
        source, model, precision, gpus, tp, pp, cp, vp, gbs, _, _ = row
        cmd = command(args.build, args.cluster, row, not args.no_tp_overlap)
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        predicted = out["throughput_tokens_per_s"] / gpus
        published = published_tokens(row)
        error = predicted / published - 1
        kind = "bf16" if precision == "bf16" else "fp8"
        errors.setdefault(kind, []).append(error)
        label = f"{model} {precision} {gpus} GPUs TP{tp} PP{pp} CP{cp} VP{vp} GBS {gbs}"
        print(f"{source:50s} {label:46s} published {published:8.1f}  eventsim {predicted:8.1f}"
              f"  {100 * error:+6.1f}%  ({out['iteration_time_ms'] / 1000:.2f} s/step, "
              f"{out['model_tflops_per_gpu']:.0f} TFLOP/s, MFU {100 * out['mfu']:.1f}%)")
        if args.by_class:
            classes.append((label, SEQ * gbs / gpus / published * 1000,
                            out["iteration_time_ms"], by_class([c for c in cmd if c != "--json"])))
    for kind, errs in errors.items():
        print(f"{kind}: {len(errs)} rows, mean error {100 * sum(errs) / len(errs):+.1f}%, "
              f"mean |error| {100 * sum(abs(e) for e in errs) / len(errs):.1f}%")
    if classes:
        print("\nms per step (rank 0): published, predicted, compute by op class, not compute")
        print("| row | published | predicted | " + " | ".join(CLASSES) + " | other compute | "
              "not compute |")
        for label, published_ms, ms, sums in classes:
            named = sum(sums[c] for c in CLASSES)
            other = sum(sums.values()) - named
            cells = " | ".join(f"{sums[c]:.0f}" for c in CLASSES)
            print(f"| {label} | {published_ms:.0f} | {ms:.0f} | {cells} | {other:.0f} | "
                  f"{ms - sum(sums.values()):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
