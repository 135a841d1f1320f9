#!/usr/bin/env python3
"""Fits the network model's NCCL terms of the bundled ndv4-a100 and p5-h100 clusters to the one-
and two-node nccl-tests files in ../shared/calibration/network/, through `eventsim collective`
itself (the fitted model is the one that runs), and writes them into the clusters' `nccl:` blocks.

What is fitted (docs/NETWORK.md): per-step latencies by protocol (intra-node from the one-node
file, network from the two-node ones) and the achieved share of the link per algorithm. What is
not: NCCL's base latencies, protocol bandwidth fractions and tree correction (NCCL's own tables),
which algorithm and protocol runs at each size (NCCL's own tuner model chooses it:
modeler/network/nccl_estimate.h; the fit only costs the chosen pair), and everything at more than
two nodes (the model's mechanisms carry the figures there).

Objective: the mean squared log error of the predicted time over every row of a cluster's files,
minimised by coordinate descent (golden section in log space, a few sweeps).

  scripts/fit_network.py [--eventsim build/eventsim] [--data DIR] [--write]

"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def read_log(path):
    """nccl-tests stdout (mpirun's [r,i]<stdout>: tags allowed): [(bytes, time_us)]."""
    rows = []
    for line in open(path):
        line = re.sub(r"^\[[0-9,]+\]<stdout>:", "", line).strip()
        if not line or line.startswith("#"):
            continue
        t = line.split()
        if t[0].isdigit() and len(t) >= 6:
            rows.append((int(t[0]), float(t[4])))  # out-of-place time
    return rows


def read_csv(path):
    """The p5 CSVs: size in MiB and out-of-place algbw (GB/s) -> [(bytes, time_us)]."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            size = int(float(r["size(MB)"]) * MIB)
            algbw = float(r["out algbw(GB/s)"])
            rows.append((size, size / (algbw * 1e3)))
    return rows


def datasets(data):
    d = lambda name: os.path.join(data, name)
    return {
        "ndv4-a100": [
            ("all-reduce", 8, read_log(d("azure_ndv4_a100_1node_allreduce.log"))),
            ("all-reduce", 16, read_log(d("azure_ndv4_a100_2nodes_allreduce.log"))),
        ],
        "p5-h100": [
            ("all-reduce", 16, read_csv(d("aws_p5_h100_2nodes_all_reduce.csv"))),
            ("all-gather", 16, read_csv(d("aws_p5_h100_2nodes_all_gather.csv"))),
            ("alltoall", 16, read_csv(d("aws_p5_h100_2nodes_alltoall.csv"))),
        ],
    }


# Parameters fitted per cluster, with starting values and bounds: (hop, kind, key); the key of an
# algorithm's own latency is "algorithm.protocol".
FITTED = {
    # NCCL runs a tree (LL, then LL128) up to 8 MiB on two ndv4 nodes: its network step latencies
    # are the tree's own; the ring's come from its sizes (16 MiB on).
    "ndv4-a100": [
        ("intra", "latency_us", "ll", 0.6, 0.05, 20), ("intra", "latency_us", "ll128", 1.9, 0.05, 40),
        ("intra", "latency_us", "simple", 3.4, 0.05, 60), ("intra", "efficiency", "ring", 0.8, 0.2, 1),
        ("net", "latency_us", "ll128", 4.0, 0.05, 60),
        ("net", "latency_us", "simple", 14, 0.1, 80), ("net", "efficiency", "ring", 0.7, 0.2, 1),
        ("nccl", "launch_us", "", 5.0, 0.05, 40),
        ("net", "algorithm_latency_us", "tree.ll", 5.0, 0.05, 60),
        ("net", "algorithm_latency_us", "tree.ll128", 8.5, 0.05, 80),
        # Not the tree's own share of the NICs: the NICs' achieved share is the ring's. (A tree
        # on two nodes carries the buffer once over them, on more twice: modeler/network/
        # tree.cpp; a share fitted to two-node tree rows alone overstated 16 nodes.)
    ],
    # EFA runs Simple only (the cluster's protocols: [simple]): no LL/LL128 terms to fit.
    "p5-h100": [
        ("net", "latency_us", "simple", 14, 0.1, 200), ("net", "efficiency", "ring", 0.7, 0.2, 1),
        ("net", "algorithm_latency_us", "nvls_tree.simple", 14, 0.1, 1000),
        ("net", "efficiency", "nvls_tree", 0.7, 0.2, 1),
        ("net", "algorithm_latency_us", "p2p.simple", 14, 0.1, 1000),
        ("net", "efficiency", "p2p", 0.7, 0.2, 1),
    ],
}


# Lines of a cluster's nccl: block that the fit keeps (not fitted: protocols).
# NCCL's tuner rows (nccl_estimate.h): the logs do not name the release; 2.23 - 2.27 agree on every
# table these clusters use. Both clusters' hosts are AMD EPYC (7V12 on ND A100 v4, 7R13 on p5).
KEPT = {
    "ndv4-a100": ["    version: \"2.23\"", "    gpu_arch: ampere", "    cpu_vendor: amd"],
    "p5-h100": ["    version: \"2.23\"", "    gpu_arch: hopper", "    cpu_vendor: amd",
                "    protocols: [simple]  # AWS's EFA plugin (aws-ofi-nccl) runs Simple only"],
}


def nccl_block(name, values, source):
    hops = {}
    for (hop, kind, key), v in values.items():
        hops.setdefault(hop, {}).setdefault(kind, {})[key] = v
    lines = ["  nccl:", f"    source: \"{source}\""] + KEPT.get(name, [])
    if "nccl" in hops:
        lines.append(f"    launch_us: {hops['nccl']['launch_us']['']:.4g}")
    for hop in ("intra", "net"):
        if hop not in hops:
            continue
        lines.append(f"    {hop}:")
        for kind in ("latency_us", "efficiency"):
            if kind in hops[hop]:
                inner = ", ".join(f"{k}: {v:.4g}" for k, v in hops[hop][kind].items())
                lines.append(f"      {kind}: {{{inner}}}")
        if "algorithm_latency_us" in hops[hop]:
            by_algo = {}
            for k, v in hops[hop]["algorithm_latency_us"].items():
                algo, proto = k.split(".")
                by_algo.setdefault(algo, []).append(f"{proto}: {v:.4g}")
            inner = ", ".join(f"{a}: {{{', '.join(ps)}}}" for a, ps in by_algo.items())
            lines.append(f"      algorithm_latency_us: {{{inner}}}")
    return "\n".join(lines) + "\n"


def cluster_text(name, values, source):
    text = open(os.path.join(ROOT, "configs", "clusters", name + ".yaml")).read()
    head = text[: text.index("  nccl:")]
    return head + nccl_block(name, values, source)


def predict(eventsim, cluster_file, op, gpus, sizes, algo=None):
    cmd = [eventsim, "collective", "--cluster", cluster_file, "--op", op, "--gpus", str(gpus),
           "--bytes", ",".join(str(s) for s in sizes), "--json"]
    if algo:
        cmd += ["--nccl-algo", algo]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"]


def loss(eventsim, name, values, sets, tmpdir, algo=None):
    path = os.path.join(tmpdir, name + ".yaml")
    with open(path, "w") as f:
        f.write(cluster_text(name, values, "fit in progress"))
    errs = []
    for op, gpus, rows in sets:
        res = predict(eventsim, path, op, gpus, [b for b, _ in rows], algo)
        errs += [math.log(r["time_us"] / t) ** 2 for r, (_, t) in zip(res, rows)]
    return sum(errs) / len(errs)


def golden(f, lo, hi, x0, iters=18):
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    x = math.exp((a + b) / 2)
    return x if f(x) <= f(x0) else x0


def fit(eventsim, name, sets, tmpdir, sweeps):
    values = {(h, k, key): x0 for h, k, key, x0, _, _ in FITTED[name]}
    for sweep in range(sweeps):
        for h, k, key, _, lo, hi in FITTED[name]:
            def f(x):
                trial = dict(values)
                trial[(h, k, key)] = x
                return loss(eventsim, name, trial, sets, tmpdir)
            values[(h, k, key)] = golden(f, lo, hi, values[(h, k, key)])
        print(f"{name}: sweep {sweep + 1}: rms log error "
              f"{math.sqrt(loss(eventsim, name, values, sets, tmpdir)):.4f}", file=sys.stderr)
    return values


def report(eventsim, cluster_file, sets):
    print(f"| op | GPUs | size | measured us | predicted us | error | algorithm/protocol |")
    print(f"|---|---|---|---|---|---|---|")
    errs = []
    for op, gpus, rows in sets:
        res = predict(eventsim, cluster_file, op, gpus, [b for b, _ in rows])
        for r, (b, t) in zip(res, rows):
            e = 100 * (r["time_us"] - t) / t
            errs.append(abs(e))
            print(f"| {op} | {gpus} | {b} | {t:.1f} | {r['time_us']:.1f} | {e:+.1f}% | "
                  f"{r['algorithm']}/{r['protocol']} |")
    print(f"\nmean |error| {sum(errs) / len(errs):.1f}% over {len(errs)} rows")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eventsim", default=os.path.join(ROOT, "build", "eventsim"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "..", "shared", "calibration",
                                                   "network"))
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update the bundled cluster files")
    ap.add_argument("--report", action="store_true",
                  help="only print the bundled clusters' error on every row")
    args = ap.parse_args()
    data = args.data if os.path.isdir(args.data) else "/work/shared/calibration/network"
    all_sets = datasets(data)
    for name, sets in all_sets.items():
        if args.report:
            print(f"\n### {name}\n")
            report(args.eventsim, os.path.join(ROOT, "configs", "clusters", name + ".yaml"), sets)
            continue
        with tempfile.TemporaryDirectory() as tmpdir:
            values = fit(args.eventsim, name, sets, tmpdir, args.sweeps)
        source = (f"scripts/fit_network.py on ../shared/calibration/network ({name} one- and "
                  f"two-node nccl-tests)")
        text = cluster_text(name, values, source)
        print(nccl_block(name, values, source))
        if args.write:
            with open(os.path.join(ROOT, "configs", "clusters", name + ".yaml"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
