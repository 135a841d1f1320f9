#!/usr/bin/env python3
"""Validates eventsim's device model against real A100 measurements (../shared/calibration).

1. Imports the NCCL all-reduce curves (2, 4, 8 GPUs) with `eventsim import-nccl-tests`.
2. Fits the A100 device model with `eventsim calibrate --cross-validate hidden`: the compute and
   host parameters on the h=1024 runs predict the h=2048 runs and the reverse, then one fit on all.
3. Reports, over all 1,440 vTrain runs: MAPE, median and worst error, and the mean Kendall tau-b of
   predicted vs measured within each group of runs sharing model, GPU count and global batch -
   cross-validated (each run predicted by the fold that did not see it) and in-sample.
4. Checks the fitted all-reduce curves against every measured size (1 MiB - 1 GiB).
5. Runs a sample of the rows through `eventsim simulate` with the written device file (the same
   numbers must come out), and every row with the datasheet roofline (the model before
   calibration) for comparison.

Usage: scripts/validate_calibration.py [--build build] [--out out/calibration] [--install]
(--install copies the fitted device file over configs/devices/a100-sxm4-80gb.yaml).
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALIBRATION = os.path.join(os.path.dirname(ROOT), "shared", "calibration")
RUNS = os.path.join(CALIBRATION, "vtrain_single_node.csv")


def run(cmd):
    # From the project root with relative paths, so the sources written into the device file
    # ("fitted: ... of ../shared/calibration/...") read the same on every machine.
    cmd = [os.path.relpath(c, ROOT) if os.path.isabs(c) and c.startswith(os.path.dirname(ROOT))
           else c for c in cmd]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"validate_calibration: {' '.join(cmd)} failed ({result.returncode}):\n"
                 f"{result.stderr.strip()}")
    return result.stdout


def kendall_tau_b(xs, ys):
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator > 0 else None


def accuracy(rows, column):
    errors = [100 * (float(r[column]) / float(r["measured_ms"]) - 1) for r in rows]
    absolute = [abs(e) for e in errors]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["hidden"], r["layers"], r["gpus"], r["global_batch"])].append(r)
    taus = []
    for members in groups.values():
        if len(members) < 2:
            continue
        tau = kendall_tau_b([float(r[column]) for r in members],
                            [float(r["measured_ms"]) for r in members])
        if tau is not None:
            taus.append(tau)
    worst = max(range(len(rows)), key=lambda i: absolute[i])
    return {
        "mape": statistics.mean(absolute),
        "median": statistics.median(absolute),
        "worst": errors[worst],
        "worst_line": rows[worst]["line"],
        "bias": statistics.mean(errors),
        "tau": statistics.mean(taus),
        "groups": len(taus),
        "tau_positive": sum(1 for t in taus if t > 0),
    }


def load_yaml(path):
    import yaml  # PyYAML, from Debian's python3-yaml
    with open(path) as f:
        return yaml.safe_load(f)


def curve_us(curve, group, size):
    factor = 2 * (group - 1) / group
    scale = 1.0  # all-reduce over the curve's own group
    ll = curve["ll_latency_us"] * scale + factor * size / (curve["ll_busbw_gb_s"] * 1e3)
    simple = curve["simple_latency_us"] * scale + factor * size / (curve["simple_busbw_gb_s"] * 1e3)
    return max(curve["floor_us"], min(ll, simple))


def check_curves(device):
    out = []
    curves = {c["group"]: c for c in device["model"]["allreduce_curves"]}
    for group in (2, 4, 8):
        with open(os.path.join(CALIBRATION, f"nccl_allreduce_a100_{group}gpu.csv")) as f:
            rows = list(csv.reader(f))[1:]
        errors = [abs(curve_us(curves[group], group, int(r[0])) / (float(r[3]) / 1e3) - 1) * 100
                  for r in rows]
        out.append((group, len(errors), statistics.mean(errors), max(errors),
                    100 * sum(1 for e in errors if e <= 10) / len(errors)))
    return out


def model_yaml(r):
    h, layers = int(r["hidden"]), int(r["layers"])
    return (f"name: vtrain-h{h}-l{layers}\ndtype: fp16\nhidden_size: {h}\nnum_heads: {r['heads']}\n"
            f"ffn_hidden_size: {4 * h}\nseq_length: {r['seq']}\nvocab_size: 50257\nlayers:\n"
            f"  - {{type: embedding}}\n  - {{type: decoder, count: {layers}, "
            f"cross_attention: false}}\n  - {{type: head}}\n")


def simulate_ms(eventsim, r, cluster, work):
    model = os.path.join(work, f"h{r['hidden']}-l{r['layers']}-a{r['heads']}-s{r['seq']}.yaml")
    if not os.path.exists(model):
        with open(model, "w") as f:
            f.write(model_yaml(r))
    out = run([eventsim, "simulate", "--model", model, "--cluster", cluster, "--tp", r["tp"],
               "--pp", r["pp"], "--dp", r["dp"], "--micro-batch", r["micro_batch"],
               "--global-batch", r["global_batch"], "--schedule", "dapple", "--recompute", "full",
               "--fallback", "analytic", "--json"])
    import json
    return json.loads(out)["iteration_time_ms"]


def cluster_with_device(work, device_text):
    """dgx-a100's node and links with the given device (a file path or an inline mapping)."""
    path = os.path.join(work, f"cluster-{abs(hash(device_text))}.yaml")
    with open(path, "w") as f:
        f.write("name: dgx-a100-validation\nnode:\n  gpus: 8\n"
                f"  device: {device_text}\n"
                "  intra_link: {name: NVSwitch, bandwidth_gb_s: 300, latency_us: 3}\n"
                "network: {name: 8x HDR, bandwidth_gb_s: 200, latency_us: 5}\n")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "calibration"))
    parser.add_argument("--install", action="store_true",
                        help="copy the fitted device over configs/devices/a100-sxm4-80gb.yaml")
    parser.add_argument("--sample-every", type=int, default=48,
                        help="simulate every Nth run through eventsim simulate (consistency)")
    args = parser.parse_args()
    eventsim = os.path.join(args.build, "eventsim")
    os.makedirs(args.out, exist_ok=True)

    profile = os.path.join(args.out, "nccl_a100.yaml")
    for i, group in enumerate((2, 4, 8)):
        csv_path = os.path.join(CALIBRATION, f"nccl_allreduce_a100_{group}gpu.csv")
        run([eventsim, "import-nccl-tests", csv_path, "--group", str(group), "-o", profile]
            + (["--append"] if i > 0 else []))
    device_path = os.path.join(args.out, "a100-sxm4-80gb.yaml")
    predictions = os.path.join(args.out, "predictions.csv")
    command = [eventsim, "calibrate", "--cluster", "dgx-a100", "--collectives", profile, "--runs",
               RUNS, "--cross-validate", "hidden", "-o", device_path, "--predictions", predictions]
    print("$ " + " ".join(os.path.relpath(c, ROOT) if os.path.isabs(c) else c for c in command))
    print(run(command))

    with open(predictions) as f:
        rows = [r for r in csv.DictReader(f) if r["set"] != "skipped"]
    print(f"{len(rows)} runs")
    for label, column in (("cross-validated (fit h=1024 -> test h=2048 and the reverse)",
                           "cross_validated_ms"), ("in-sample (fit on all runs)", "predicted_ms")):
        a = accuracy(rows, column)
        print(f"{label}: MAPE {a['mape']:.2f}%, median {a['median']:.2f}%, worst {a['worst']:+.1f}% "
              f"(line {a['worst_line']}), mean error {a['bias']:+.2f}%, mean Kendall tau-b "
              f"{a['tau']:.3f} over {a['groups']} groups ({a['tau_positive']} positive)")

    device = load_yaml(device_path)
    for group, points, mean, worst, within in check_curves(device):
        print(f"all-reduce {group} GPUs: {points} sizes 1 MiB-1 GiB, mean error {mean:.1f}%, "
              f"worst {worst:.1f}%, {within:.0f}% of sizes within 10%")

    with tempfile.TemporaryDirectory() as work:
        fitted_cluster = cluster_with_device(work, os.path.abspath(device_path))
        mismatch = 0
        sample = rows[::args.sample_every]
        for r in sample:
            ms = simulate_ms(eventsim, r, fitted_cluster, work)
            if abs(ms / float(r["predicted_ms"]) - 1) > 1e-3:
                mismatch += 1
                print(f"  line {r['line']}: simulate {ms:.3f} ms, calibrate {r['predicted_ms']} ms")
        print(f"eventsim simulate with the fitted device: {len(sample)} sampled runs, "
              f"{mismatch} differ from calibrate's prediction by > 0.1%")
        roofline = cluster_with_device(
            work, "{name: A100, peak_tflops: {fp16: 312, bf16: 312, fp32: 19.5}, "
                  "memory_bandwidth_gb_s: 2039, memory_gib: 79.15}")
        for r in rows:
            r["roofline_ms"] = simulate_ms(eventsim, r, roofline, work)
        a = accuracy(rows, "roofline_ms")
        print(f"datasheet roofline (before calibration): MAPE {a['mape']:.2f}%, median "
              f"{a['median']:.2f}%, worst {a['worst']:+.1f}%, mean error {a['bias']:+.2f}%, mean "
              f"Kendall tau-b {a['tau']:.3f} over {a['groups']} groups")

    if args.install:
        target = os.path.join(ROOT, "configs", "devices", "a100-sxm4-80gb.yaml")
        shutil.copyfile(device_path, target)
        print(f"installed {os.path.relpath(target, ROOT)}")


if __name__ == "__main__":
    main()
