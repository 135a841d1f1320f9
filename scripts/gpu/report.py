#!/usr/bin/env python3
"""Issue 18's figures from a GPU run directory (scripts/gpu/run_all.sh's WORK, as committed under
docs/gpu-runs/): CUPTI against CUDA-event kernel times, and eventsim's predictions against
eventrun and against the PyTorch step. Runs here, no GPU needed.

  python3 scripts/gpu/report.py docs/gpu-runs/2026-11-23-h100 [--eventsim build/eventsim]
"""
import argparse
import json
import os
import re
import statistics
import subprocess

import yaml

MODELS = (("tiny-gpt-bf16", 2, 8), ("medium-gpt-bf16", 8, 32), ("gpt2-345m-bf16", 4, 16))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def medians(path):
    return {r["signature"]: r["time_us"]["median"] for r in yaml.safe_load(open(path))["events"]}


def timer_table(run):
    print("## CUPTI kernel spans vs CUDA events (groups of back-to-back repetitions)\n")
    print("| model | kernels | compute-bound >= 100 us: max abs diff | GEMMs < 100 us: "
          "median events - CUPTI | memory-bound >= 50 us: range | all: median abs diff |")
    print("|---|---|---|---|---|---|")
    for m, _, _ in MODELS:
        cupti = medians(f"{run}/profile_{m}.yaml")
        events = medians(f"{run}/profile_cudaevents_{m}.yaml")
        long_compute, short_gemm_gap, memory = [], [], []
        diffs = []
        for sig, c in cupti.items():
            e = events[sig]
            d = e / c - 1
            diffs.append(abs(d))
            gemm = sig.startswith(("gemm", "bgemm"))
            if gemm and c >= 100 or sig.startswith("cross_entropy") and c >= 100:
                long_compute.append(abs(d))
            elif gemm:
                short_gemm_gap.append(e - c)
            elif c >= 50:
                memory.append(d)
        fmt = lambda v, f: f.format(v) if v is not None else "-"
        print(f"| {m} | {len(cupti)} | {fmt(max(long_compute) * 100 if long_compute else None, '{:.2f}%')} "
              f"| {fmt(statistics.median(short_gemm_gap) if short_gemm_gap else None, '{:+.2f} us')} "
              f"| {fmt(min(memory) * 100 if memory else None, '{:+.1f}%')}"
              f"{fmt(max(memory) * 100 if memory else None, ' .. {:+.1f}%')} "
              f"| {statistics.median(diffs) * 100:.1f}% |")
    print()


def simulate(eventsim, m, mb, gb, extra):
    out = subprocess.run(
        [eventsim, "simulate", "--model", f"{ROOT}/scripts/gpu/models/{m}.yaml", "--cluster",
         "dgx-h100", "--strategy", "1M1P1D", "--micro-batch", str(mb), "--global-batch",
         str(gb), "--json"] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["iteration_time_ms"]


def predictions(run, eventsim):
    host = {}  # model -> us, from lines "eventprof_events_MODEL.log:[eventprof] ... median X us"
    for line in open(f"{run}/host_enqueue.txt"):
        model = re.match(r"eventprof_events_(.+)\.log:", line).group(1)
        host[model] = float(re.search(r"median ([0-9.]+) us", line).group(1))
    print("## Iteration time: eventsim against eventrun and the PyTorch step\n")
    print("eventrun's host issue time per op: the median enqueue time eventprof --compute-timer "
          "cuda-events measured in the same run (host_enqueue.txt), passed as --host-op-us.\n")
    print("| model | eventrun ms | from profile + executor host | error | device model + executor "
          "host | error | PyTorch ms | from profile (device file host) | error | device model "
          "alone | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    compiled = []
    for m, mb, gb in MODELS:
        er = float(re.search(r"iteration ([0-9.]+) ms", open(f"{run}/eventrun_{m}.log").read())
                   .group(1))
        torch_ms = json.load(open(f"{run}/torchstep_{m}.json"))["median_ms"]
        h = ["--host-op-us", str(host[m])]
        prof = ["--profile", f"{run}/profile_{m}.yaml"]
        p_er = simulate(eventsim, m, mb, gb, prof + h)
        d_er = simulate(eventsim, m, mb, gb, ["--fallback", "analytic"] + h)
        p_pt = simulate(eventsim, m, mb, gb, prof)
        d_pt = simulate(eventsim, m, mb, gb, ["--fallback", "analytic"])
        pct = lambda p, t: f"{(p / t - 1) * 100:+.1f}%"
        compiled_file = f"{run}/torchcompiled_{m}.json"
        if os.path.exists(compiled_file):
            compiled.append((m, json.load(open(compiled_file))["median_ms"], d_pt,
                             simulate(eventsim, m, mb, gb, ["--fallback", "analytic",
                                                             "--host-op-us", "0"])))
        print(f"| {m} | {er:.2f} | {p_er:.2f} | {pct(p_er, er)} | {d_er:.2f} | {pct(d_er, er)} "
              f"| {torch_ms:.2f} | {p_pt:.2f} | {pct(p_pt, torch_ms)} | {d_pt:.2f} "
              f"| {pct(d_pt, torch_ms)} |")
    print()
    if compiled:
        print("The same step under torch.compile (Inductor fuses masking, softmax, dropout and the "
              "element-wise ops):\n")
        print("| model | compiled PyTorch ms | device model | error | device model, no host time "
              "| error |")
        print("|---|---|---|---|---|---|")
        for m, c, d, d0 in compiled:
            print(f"| {m} | {c:.2f} | {d:.2f} | {(d / c - 1) * 100:+.1f}% | {d0:.2f} "
                  f"| {(d0 / c - 1) * 100:+.1f}% |")
        print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--eventsim", default=f"{ROOT}/build/eventsim")
    a = ap.parse_args()
    timer_table(a.run)
    predictions(a.run, a.eventsim)


if __name__ == "__main__":
    main()
