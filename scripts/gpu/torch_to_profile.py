#!/usr/bin/env python3
"""PyTorch's measured kernels (torch_sweep.py's torch_gemm.csv and torch_ops.csv) as an eventsim
profile database, so `eventsim calibrate --kernels` can fit the device model to a framework's
kernels: GEMMs as "gemm m n k layout dtype" (bf16 and fp16; eventsim has no fp8 yet), the
memory-bound ops under the signatures torch_sweep.py gave them. Each record holds the sweep's
median (count 1: the CSVs keep only the median).

  python3 scripts/gpu/torch_to_profile.py MEASUREMENTS_DIR OUT.yaml [--gpu NAME] [--date ISO]
"""
import argparse
import csv
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("output")
    ap.add_argument("--gpu", default="NVIDIA H100 80GB HBM3")
    ap.add_argument("--date", default="2026-11-23T06:45:00Z")
    a = ap.parse_args()
    records = []
    gemm = os.path.join(a.dir, "torch_gemm.csv")
    if os.path.exists(gemm):
        for r in csv.DictReader(open(gemm)):
            if r["dtype"] in ("bf16", "fp16"):
                records.append((f'gemm m={r["m"]} n={r["n"]} k={r["k"]} layout={r["layout"]} '
                                f'dtype={r["dtype"]}', float(r["time_us"])))
    ops = os.path.join(a.dir, "torch_ops.csv")
    if os.path.exists(ops):
        for r in csv.DictReader(open(ops)):
            records.append((r["signature"], float(r["time_us"])))
    seen = set()
    with open(a.output, "w") as f:
        f.write("schema_version: 1\nmetadata:\n  backend: pytorch\n")
        f.write(f'  date: "{a.date}"\n  world_size: 1\n  ranks_per_node: 1\n  hosts: ["gpu"]\n')
        f.write(f'  devices: ["{a.gpu}"]\n  versions: {{torch: "torch_sweep.py"}}\nevents:\n')
        for sig, t in records:
            if sig in seen:
                continue
            seen.add(sig)
            f.write(f'  - signature: "{sig}"\n    kind: compute\n'
                    f"    time_us: {{median: {t}, min: {t}, max: {t}, stddev: 0, count: 1}}\n")
    print(f"{len(seen)} records -> {a.output}")


if __name__ == "__main__":
    main()
