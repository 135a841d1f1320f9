#!/usr/bin/env python3
"""Reproduces the memory development set (calibration/memory/zero_bubble_table4_memory.csv: peak
memory per pipeline schedule, Megatron-LM GPT on A100 80GB, Qi et al. ICLR'24 Table 4) with
`eventsim simulate --json` and prints eventsim's allocated and reserved peaks (GiB, the busiest
stage) beside the measured figure, one row per line, and the mean absolute error of each.

Usage: scripts/memory_devset.py [--eventsim build/eventsim] [--csv PATH]

Each row is run as Megatron ran it: TP = DP = 1, the first and last stages one layer fewer
(--account-for-embedding/loss-in-pipeline-split), m = the first of the row's micro-batch counts
(the paper: memory does not change with m). 1F1B-I is interleaved 1F1B with one layer per chunk.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

SCHEDULES = {"1F1B": "dapple", "ZB-1p": "zbh1", "ZB-2p": "zbh2", "1F1B-I": "interleaved"}
GIB = 1024.0**3


def default_csv():
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.join(here, "..", "..", "shared"), "/work/shared"):
        path = os.path.join(root, "calibration", "memory", "zero_bubble_table4_memory.csv")
        if os.path.exists(path):
            return path
    return None


def rows(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines))


def command(eventsim, row):
    layers, hidden, heads = int(row["layers"]), int(row["hidden"]), int(row["heads"])
    pp, b = int(row["pp"]), int(row["micro_batch"])
    m = int(row["m_values"].split("/")[0])
    schedule = SCHEDULES[row["schedule"]]
    cmd = [eventsim, "simulate", "--model", "gpt2-345m", "--cluster", "dgx-a100",
           "--num-layers", str(layers), "--hidden-size", str(hidden),
           "--num-attention-heads", str(heads), "--ffn-hidden-size", str(4 * hidden),
           "--tp", "1", "--pp", str(pp), "--dp", "1", "--micro-batch", str(b),
           "--global-batch", str(b * m), "--schedule", schedule,
           "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
           "--fallback", "analytic", "--json"]
    if schedule == "interleaved":
        # One layer per chunk: (L + 2) / P chunks per stage.
        cmd += ["--virtual-stages", str((layers + 2) // pp)]
    return cmd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eventsim", default="build/eventsim")
    parser.add_argument("--csv", default=default_csv())
    args = parser.parse_args()
    if not args.csv or not os.path.exists(args.csv):
        sys.exit("memory_devset.py: no zero_bubble_table4_memory.csv (give --csv)")
    if not os.path.exists(args.eventsim):
        sys.exit(f"memory_devset.py: no eventsim binary at {args.eventsim} (give --eventsim)")
    print(f"{'model':>6} {'P':>3} {'b':>2} {'schedule':>8} {'measured':>9} {'allocated':>10} "
          f"{'err':>7} {'reserved':>9} {'err':>7}")
    errs_alloc, errs_res = [], []
    for row in rows(args.csv):
        out = subprocess.run(command(args.eventsim, row), capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{row['model']:>6} {row['schedule']:>8}: eventsim failed: {out.stderr.strip()}")
            continue
        j = json.loads(out.stdout)
        measured = float(row["memory_gb"])
        alloc = j["allocated_memory_bytes"] / GIB
        res = j["reserved_memory_bytes"] / GIB
        ea, er = alloc / measured - 1, res / measured - 1
        errs_alloc.append(abs(ea))
        errs_res.append(abs(er))
        print(f"{row['model']:>6} {row['pp']:>3} {row['micro_batch']:>2} {row['schedule']:>8} "
              f"{measured:>9.1f} {alloc:>10.1f} {100 * ea:>+6.1f}% {res:>9.1f} {100 * er:>+6.1f}%")
    if errs_alloc:
        print(f"mean |error|: allocated {100 * sum(errs_alloc) / len(errs_alloc):.1f}% "
              f"(max {100 * max(errs_alloc):.1f}%), reserved "
              f"{100 * sum(errs_res) / len(errs_res):.1f}% (max {100 * max(errs_res):.1f}%) "
              f"over {len(errs_alloc)} rows")


if __name__ == "__main__":
    main()
