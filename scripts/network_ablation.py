#!/usr/bin/env python3
"""The network model's effects switched off one at a time (docs/VALIDATION.md, issue 28 item 7).

Two data sets:
  fit   - every row of the one- and two-node nccl-tests files in ../shared/calibration/network
          (what the clusters were fitted to: in-sample);
  scale - the published points issue 28 quotes at 4-32 nodes (NOT fitted; sanity only): busbw of
          the p5 32 MiB all-gather at 16 and 256 GPUs, the ndv4 16 MiB and 1 GiB all-reduce at 16
          and 128 GPUs, the p5 1 GiB all-to-all at 16 and 256 GPUs.
Rows (mean |busbw error|):
  full model           - eventsim collective as shipped;
  algorithm choice off - every collective forced to the ring (--nccl-algo ring, as NCCL_ALGO);
  LL channels off      - the clusters without net.ll_channel_us (LL's cost per channel across
                         nodes), every other fitted term as shipped;
  latency growth off   - the two-node prediction held at any scale (bus bandwidth constant, the
                         ring volume factor: eventsim's behaviour before issue 28);
  oversubscription     - the two clusters are non-blocking and the data is at most 32 nodes: no
                         data tells it apart (printed as such).
And whole iterations (mean |model TFLOP/s per GPU error|) against the published Llama 3.1 405B
pre-training runs of scripts/validate_public_runs.sh (8,192 and 16,384 H100s, both of eventsim's
nearest schedules; not fitted), with ZeRO-2's reductions as Meta's paper describes them (Dubey et
al. 2024, The Llama 3 Herd of Models, section 3.3.2: data parallelism outermost "because it can
tolerate longer network latency by asynchronously prefetching sharded model weights and reducing
gradients"): `--grad-reduce-sync step`, queued and waited for only at the optimizer step:
  full model           - as shipped;
  link sharing off     - --link-sharing off: every transfer at its standalone time;
  overlap slowdown off - --overlap-slowdown off: compute beside communication at full speed.

  scripts/network_ablation.py [--eventsim build/eventsim]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fit_network  # noqa: E402

ROOT = fit_network.ROOT
MIB = 1 << 20
GIB = 1 << 30

# (cluster, op, gpus, bytes, published busbw GB/s) from issue 28's text.
SCALE = [
    ("p5-h100", "all-gather", 16, 32 * MIB, 131.0),
    ("p5-h100", "all-gather", 256, 32 * MIB, 12.4),
    ("ndv4-a100", "all-reduce", 16, 16 * MIB, 86.0),
    ("ndv4-a100", "all-reduce", 128, 16 * MIB, 66.0),
    ("ndv4-a100", "all-reduce", 16, GIB, 125.0),
    ("ndv4-a100", "all-reduce", 128, GIB, 125.0),
    ("p5-h100", "alltoall", 16, GIB, 78.0),
    ("p5-h100", "alltoall", 256, GIB, 39.0),
]


def bus_factor(op, n):
    return {"all-reduce": 2 * (n - 1) / n}.get(op, (n - 1) / n)


def busbw(op, n, size, time_us):
    return size / time_us / 1e3 * bus_factor(op, n)


CLUSTER_DIR = os.path.join(ROOT, "configs", "clusters")


def cluster_file(name):
    return os.path.join(CLUSTER_DIR, name + ".yaml")


def without_ll_channels(tmpdir):
    """A copy of every bundled cluster used here without net.ll_channel_us; returns its folder."""
    for name in ("ndv4-a100", "p5-h100"):
        with open(cluster_file(name)) as f:
            text = f.read()
        values = fit_network.block_values(text)
        values.pop(("net", "ll_channel_us", ""), None)
        with open(os.path.join(tmpdir, name + ".yaml"), "w") as f:
            f.write(fit_network.with_block(text, values, "ablation: no LL channel term"))
    return tmpdir


def fit_errors(eventsim, sets, algo, folder=None):
    errs = []
    for name, rows in sets.items():
        path = os.path.join(folder, name + ".yaml") if folder else cluster_file(name)
        for op, gpus, per_node, data in rows:
            res = fit_network.predict(eventsim, path, op, gpus,
                                      [b for b, _ in data], algo, per_node)
            errs += [abs(r["time_us"] / t - 1) for r, (_, t) in zip(res, data)]
    return 100 * sum(errs) / len(errs), len(errs)


def scale_errors(eventsim, mode, folder=None):
    errs = []
    for name, op, gpus, size, published in SCALE:
        path = os.path.join(folder, name + ".yaml") if folder else cluster_file(name)
        # The two-node group of the same collective: what eventprof measures.
        two = 16
        if mode == "constant":
            r = fit_network.predict(eventsim, path, op, two, [size])[0]
            predicted = busbw(op, two, size, r["time_us"])
        else:
            algo = "ring" if mode == "ring" else None
            r = fit_network.predict(eventsim, path, op, gpus, [size], algo)[0]
            predicted = busbw(op, gpus, size, r["time_us"])
        errs.append(abs(predicted / published - 1))
    return 100 * sum(errs) / len(errs), len(errs)


# (GPUs, reported TFLOP/s per GPU, schedule flags): validate_public_runs.sh's rows.
ITERATIONS = [
    (8192, 430.0, ["--schedule", "dapple"]),
    (16384, 400.0, ["--schedule", "dapple"]),
    (8192, 430.0, ["--schedule", "interleaved", "--virtual-stages", "2"]),
    (16384, 400.0, ["--schedule", "interleaved", "--virtual-stages", "2"]),
]


def iteration_errors(eventsim, switch):
    errs = []
    for gpus, reported, schedule in ITERATIONS:
        cmd = [eventsim, "simulate", "--model", "llama3.1-405b", "--cluster", "dgx-h100",
               "--tp", "8", "--pp", "16", "--gpus", str(gpus), "--micro-batch", "1",
               "--global-batch", "2048", "--sequence-parallel", "--zero", "2",
               "--overlap-grad-reduce", "--grad-reduce-sync", "step",  # the paper's (above)
               "--fallback", "analytic", "--json"] + schedule + switch
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        tflops = json.loads(out)["model_tflops_per_gpu"]
        errs.append(abs(tflops / reported - 1))
    return 100 * sum(errs) / len(errs), len(errs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eventsim", default=os.path.join(ROOT, "build", "eventsim"))
    ap.add_argument("--data", default="/work/shared/calibration/network")
    args = ap.parse_args()
    data = args.data if os.path.isdir(args.data) else os.path.join(ROOT, "tests", "data", "network")
    sets = fit_network.datasets(data)
    fit_full, n_fit = fit_errors(args.eventsim, sets, None)
    fit_ring, _ = fit_errors(args.eventsim, sets, "ring")
    sc_full, n_sc = scale_errors(args.eventsim, "full")
    sc_ring, _ = scale_errors(args.eventsim, "ring")
    sc_const, _ = scale_errors(args.eventsim, "constant")
    with tempfile.TemporaryDirectory() as tmpdir:
        no_ll = without_ll_channels(tmpdir)
        fit_noll, _ = fit_errors(args.eventsim, sets, None, no_ll)
        sc_noll, _ = scale_errors(args.eventsim, "full", no_ll)
    print(f"| effect switched off | fit set: {n_fit} rows, 1-2 nodes (time) "
          f"| scale: {n_sc} published points, 2-32 nodes (busbw) |")
    print("|---|---|---|")
    print(f"| none (full model) | {fit_full:.1f}% | {sc_full:.1f}% |")
    print(f"| algorithm choice (ring only) | {fit_ring:.1f}% | {sc_ring:.1f}% |")
    print(f"| LL's per-channel cost (net.ll_channel_us) | {fit_noll:.1f}% | {sc_noll:.1f}% |")
    print(f"| latency growth (two-node busbw held) | {fit_full:.1f}% (same: 2 nodes) "
          f"| {sc_const:.1f}% |")
    print("| oversubscription | no data (non-blocking clusters) | no data |")
    it_full, n_it = iteration_errors(args.eventsim, [])
    it_share, _ = iteration_errors(args.eventsim, ["--link-sharing", "off"])
    it_slow, _ = iteration_errors(args.eventsim, ["--overlap-slowdown", "off"])
    print()
    print(f"| effect switched off | whole iterations: {n_it} published Llama 3.1 405B runs, "
          f"8,192-16,384 H100s (model TFLOP/s per GPU) |")
    print("|---|---|")
    print(f"| none (full model) | {it_full:.1f}% |")
    print(f"| link sharing (--link-sharing off) | {it_share:.1f}% |")
    print(f"| overlap slowdown (--overlap-slowdown off) | {it_slow:.1f}% |")


if __name__ == "__main__":
    main()
