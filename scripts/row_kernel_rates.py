#!/usr/bin/env python3
"""Rank 0's compute of one eventsim simulate run, by op class, as rates to hold against per-kernel
figures.

Runs the given `eventsim simulate ...` command with `--csv` on rank 0 and prints, for each op class
of validate_torchtitan_rows.op_class, the ms per step and, where the class has a FLOP count of its
own, its FLOPs and achieved TFLOP/s:
- GEMMs: 2 m n k (x batch for bgemm);
- fused attention: 4 seq^2 dim batch per forward, halved under the causal mask, and 2.5x that for
  the backward (the count the FlashAttention papers' TFLOP/s use; eventsim's `batch` is micro-batch
  x query heads of the rank);
- memory-bound classes: bytes are not in the CSV, so only their time is printed.
Used for docs/KERNELS.md "Session 20, compute30i" (a NeMo row's GEMM and attention rates against
published H100 figures).

Usage: scripts/row_kernel_rates.py build/eventsim simulate --model ... (no --csv/--ranks)
"""

import collections
import csv
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_torchtitan_rows import op_class  # noqa: E402


def event_flops(event):
    """FLOPs of a GEMM or fused-attention event signature, else None."""
    kind = event.split()[0]
    dims = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)(?=\s|$)", event)}
    if kind in ("gemm", "bgemm"):
        return 2.0 * dims.get("batch", 1) * dims["m"] * dims["n"] * dims["k"]
    if kind in ("flash_attn_fwd", "flash_attn_bwd"):
        seq, batch = dims["seq"], dims["batch"]
        flops = 4.0 * seq * seq * dims["dim"] * batch / (2 if dims.get("causal", 0) else 1)
        return flops * (2.5 if kind == "flash_attn_bwd" else 1.0)
    return None


def rates(cmd):
    """{class: [ms, flops or None]} of rank 0's compute stream for a simulate command."""
    sums = collections.defaultdict(lambda: [0.0, 0.0])
    counted = set()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rank0.csv")
        subprocess.run(cmd + ["--csv", path, "--ranks", "0"], check=True, capture_output=True)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["stream"] != "compute":
                    continue
                cls = op_class(row["op"], row["event"])
                sums[cls][0] += float(row["dur_us"]) / 1000
                flops = event_flops(row["event"])
                if flops is not None:
                    sums[cls][1] += flops
                    counted.add(cls)
    return {c: (v[0], v[1] if c in counted else None) for c, v in sums.items()}


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    table = rates(sys.argv[1:])
    print("| op class | ms per step | TFLOP per step | TFLOP/s |")
    print("|---|---|---|---|")
    for cls, (ms, flops) in sorted(table.items(), key=lambda kv: -kv[1][0]):
        if flops is None:
            print(f"| {cls} | {ms:.0f} | | |")
        else:
            print(f"| {cls} | {ms:.0f} | {flops / 1e12:.0f} | {flops / 1e12 / (ms / 1000):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
