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
minimised over every fitted term jointly by coordinate descent (golden section in log space),
sweeping until a sweep no longer lowers it. Every fitted term comes from here: none is set by hand
(a change to the cost model is followed by a refit, `--write`).

  scripts/fit_network.py [--eventsim build/eventsim] [--data DIR] [--write]

The same fit takes its rows from a profile database instead (eventprof's two-node profile, or one
`eventsim import-nccl-tests` wrote), each row costed on the layout it ran on (a 2 x 2 profile's
rows as 2 nodes of 2 ranks: `eventsim collective --gpus 4 --gpus-per-node 2`), and writes the
given cluster's `nccl:` block (scripts/profile_fit_rows.py; docs/NETWORK.md):

  scripts/fit_network.py --profile PROFILE --cluster C (--output NEW.yaml | --in-place)

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

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_fit_rows  # noqa: E402

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
    """{cluster: [(op, ranks, ranks per node, [(bytes, time_us)])]}."""
    d = lambda name: os.path.join(data, name)
    return {
        "ndv4-a100": [
            ("all-reduce", 8, 8, read_log(d("azure_ndv4_a100_1node_allreduce.log"))),
            ("all-reduce", 16, 8, read_log(d("azure_ndv4_a100_2nodes_allreduce.log"))),
        ],
        "p5-h100": [
            ("all-reduce", 16, 8, read_csv(d("aws_p5_h100_2nodes_all_reduce.csv"))),
            ("all-gather", 16, 8, read_csv(d("aws_p5_h100_2nodes_all_gather.csv"))),
            ("alltoall", 16, 8, read_csv(d("aws_p5_h100_2nodes_alltoall.csv"))),
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
        # LL's cost per channel across nodes (config/network_topology.h): the tree's LL rows
        # climb 34.7 -> 73.1 us from 1 to 64 KiB as NCCL adds a channel per 4 KiB up to 16.
        ("net", "ll_channel_us", "", 2.0, 0.01, 40),
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


# The terms a profile's rows may fit (fit_network.py --profile), on any cluster: the union of the
# bundled clusters' lists, with their starting values and bounds. Only those the rows move are
# fitted (sensitive_terms); the others keep the cluster's value. As for ndv4, the tree's share of
# the NICs is the ring's (not fitted on its own).
PROFILE_TERMS = [
    ("nccl", "launch_us", "", 5.0, 0.05, 40),
    ("intra", "latency_us", "ll", 0.6, 0.05, 20), ("intra", "latency_us", "ll128", 1.9, 0.05, 40),
    ("intra", "latency_us", "simple", 3.4, 0.05, 60), ("intra", "efficiency", "ring", 0.8, 0.2, 1),
    ("net", "latency_us", "ll", 2.7, 0.05, 60), ("net", "latency_us", "ll128", 4.0, 0.05, 60),
    ("net", "latency_us", "simple", 14, 0.1, 200), ("net", "efficiency", "ring", 0.7, 0.2, 1),
    ("net", "algorithm_latency_us", "tree.ll", 5.0, 0.05, 60),
    ("net", "algorithm_latency_us", "tree.ll128", 8.5, 0.05, 80),
    ("net", "algorithm_latency_us", "tree.simple", 14, 0.1, 200),
    ("net", "ll_channel_us", "", 2.0, 0.01, 40),
    ("net", "algorithm_latency_us", "nvls_tree.simple", 14, 0.1, 1000),
    ("net", "efficiency", "nvls_tree", 0.7, 0.2, 1),
    ("net", "algorithm_latency_us", "p2p.simple", 14, 0.1, 1000),
    ("net", "efficiency", "p2p", 0.7, 0.2, 1),
]

# The nccl: keys the fit writes; every other line of a cluster's block (version, gpu_arch,
# cpu_vendor, protocols, algorithm, their comments) is kept as it is. NCCL's tuner rows
# (nccl_estimate.h) are not fitted: the bundled logs do not name the release; 2.23 - 2.27 agree on
# every table those clusters use, and both clusters' hosts are AMD EPYC (7V12 on ND A100 v4, 7R13
# on p5).
WRITTEN_KEYS = ("source", "launch_us", "intra", "net")


def nccl_span(text):
    """(start, end) of the `  nccl:` block of a cluster file's text (under topology:), or None."""
    lines = text.splitlines(keepends=True)
    pos = 0
    for i, line in enumerate(lines):
        if line.rstrip() == "  nccl:":
            end = pos + len(line)
            for rest in lines[i + 1:]:
                if rest.strip() and len(rest) - len(rest.lstrip()) <= 2:
                    break
                end += len(rest)
            return pos, end
        pos += len(line)
    return None


def kept_lines(text):
    """The lines of the block at `text` that the fit does not write (see WRITTEN_KEYS)."""
    span = nccl_span(text)
    if span is None:
        return []
    kept, keeping = [], False
    for line in text[span[0]:span[1]].splitlines()[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= 4:
            keeping = line.strip().split(":")[0] not in WRITTEN_KEYS
        if keeping:
            kept.append(line)
    return kept


def block_values(text):
    """The fitted terms a cluster file's nccl: block holds, as {(hop, kind, key): value}."""
    topo = (yaml.safe_load(text) or {}).get("topology") or {}
    nccl = topo.get("nccl") or {}
    values = {}
    if "launch_us" in nccl:
        values[("nccl", "launch_us", "")] = float(nccl["launch_us"])
    for hop in ("intra", "net"):
        for kind, terms in (nccl.get(hop) or {}).items():
            if not isinstance(terms, dict):  # a scalar term: ll_channel_us
                values[(hop, kind, "")] = float(terms)
                continue
            for key, v in (terms or {}).items():
                if kind == "algorithm_latency_us":
                    for proto, x in (v or {}).items():
                        values[(hop, kind, f"{key}.{proto}")] = float(x)
                else:
                    values[(hop, kind, key)] = float(v)
    return values


def nccl_block(values, source, kept):
    hops = {}
    for (hop, kind, key), v in values.items():
        hops.setdefault(hop, {}).setdefault(kind, {})[key] = v
    lines = ["  nccl:", f"    source: \"{source}\""] + kept
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
        if "ll_channel_us" in hops[hop]:
            lines.append(f"      ll_channel_us: {hops[hop]['ll_channel_us']['']:.4g}")
    return "\n".join(lines) + "\n"


def with_block(text, values, source):
    """`text` (a cluster file) with its nccl: block replaced by `values`; a file without one gets
    one at the end of its topology: section (or a topology: section holding only nccl:)."""
    block = nccl_block(values, source, kept_lines(text))
    span = nccl_span(text)
    if span is not None:
        return text[:span[0]] + block + text[span[1]:]
    if not text.endswith("\n"):
        text += "\n"
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.rstrip() == "topology:":
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                j += 1
            return "".join(lines[:j]) + block + "".join(lines[j:])
    return text + "topology:\n" + block


def cluster_text(name, values, source):
    with open(os.path.join(ROOT, "configs", "clusters", name + ".yaml")) as f:
        return with_block(f.read(), values, source)


def collective_cmd(eventsim, cluster_file, op, gpus, sizes, algo=None, per_node=None):
    cmd = [eventsim, "collective", "--cluster", cluster_file, "--op", op, "--gpus", str(gpus),
           "--bytes", ",".join(str(s) for s in sizes), "--json"]
    if per_node:
        cmd += ["--gpus-per-node", str(per_node)]
    if algo:
        cmd += ["--nccl-algo", algo]
    return cmd


def collective_results(cmd, done_rc, out, err):
    if done_rc != 0:  # the layout named, then eventsim's own line
        flag = lambda f: f" {f} {cmd[cmd.index(f) + 1]}" if f in cmd else ""
        what = "collective" + flag("--op") + flag("--gpus") + flag("--gpus-per-node")
        raise profile_fit_rows.RowsError(
            f"eventsim {what}: {(err.strip().splitlines() or ['failed'])[-1]}")
    return json.loads(out)["results"]


def predict(eventsim, cluster_file, op, gpus, sizes, algo=None, per_node=None):
    cmd = collective_cmd(eventsim, cluster_file, op, gpus, sizes, algo, per_node)
    done = subprocess.run(cmd, capture_output=True, text=True)
    return collective_results(cmd, done.returncode, done.stdout, done.stderr)


def predict_sets(eventsim, cluster_file, sets, algo=None):
    """predict() for every (op, ranks, per node, rows) of `sets`, the eventsim runs side by side."""
    cmds = [collective_cmd(eventsim, cluster_file, op, gpus, [b for b, _ in rows], algo, per_node)
            for op, gpus, per_node, rows in sets]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    outs = [p.communicate() + (p.returncode,) for p in procs]
    return [collective_results(c, rc, out, err) for c, (out, err, rc) in zip(cmds, outs)]


def loss(eventsim, text_of, values, sets, tmpdir, algo=None):
    """Mean squared log error of the time over every row; text_of(values) is the cluster file."""
    path = os.path.join(tmpdir, "cluster.yaml")
    with open(path, "w") as f:
        f.write(text_of(values))
    errs = []
    for res, (_, _, _, rows) in zip(predict_sets(eventsim, path, sets, algo), sets):
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


# A sweep that lowers the loss by less than this share of it ends the fit (the terms are coupled:
# ndv4's tree LL128 latency and the intra-node LL128 step share the tree rows, so one sweep moves
# the others' optimum; three sweeps stopped 1% of the loss short of it, eight reached it).
CONVERGED = 1e-4


def fit(eventsim, label, text_of, terms, values, sets, tmpdir, sweeps):
    """The one fit: every term of `terms` [(hop, kind, key, x0, lo, hi)] jointly, from `values`
    (every term the cluster file is written with), by coordinate descent: each sweep minimises
    the loss over each term in turn (golden section over its whole range, the others held), and
    sweeps repeat until one no longer lowers the loss (CONVERGED), at most `sweeps`. Each loss is
    `eventsim collective` on the cluster file as it would be written (the terms rounded as
    written), so the fitted costs are the C++ model's. Returns the fitted values."""
    values = dict(values)
    before = loss(eventsim, text_of, values, sets, tmpdir)
    for sweep in range(sweeps):
        for h, k, key, _, lo, hi in terms:
            def f(x):
                trial = dict(values)
                trial[(h, k, key)] = x
                return loss(eventsim, text_of, trial, sets, tmpdir)
            values[(h, k, key)] = golden(f, lo, hi, values[(h, k, key)])
        after = loss(eventsim, text_of, values, sets, tmpdir)
        print(f"{label}: sweep {sweep + 1}: rms log error {math.sqrt(after):.5f}", file=sys.stderr)
        if before - after <= CONVERGED * before:
            break
        before = after
    return values


def sensitive_terms(eventsim, text_of, terms, values, sets, tmpdir):
    """The terms whose value moves the loss (x1.5): the rows exercise them. A 2 x 2 profile of
    small all-reduces, say, never runs the ring's Simple protocol: its step latency stays."""
    base = loss(eventsim, text_of, values, sets, tmpdir)
    out = []
    for term in terms:
        trial = dict(values)
        trial[term[:3]] = min(term[5], trial[term[:3]] * 1.5)
        if trial[term[:3]] == values[term[:3]]:
            trial[term[:3]] = values[term[:3]] / 1.5
        if abs(loss(eventsim, text_of, trial, sets, tmpdir) - base) > 1e-12:
            out.append(term)
    return out


def fit_profile(eventsim, profile, cluster_text_in, sweeps):
    """Fits a cluster's nccl: terms to a profile's measured collectives: (new cluster text, the
    fitted terms, rows). Every term the cluster held is kept; those the rows exercise are
    refitted from the cluster's value (or PROFILE_TERMS' start where it had none)."""
    sets = profile_fit_rows.profile_rows(profile, eventsim)
    held = block_values(cluster_text_in)
    start = {t[:3]: held.get(t[:3], t[3]) for t in PROFILE_TERMS}
    start.update(held)
    text_of = lambda v: with_block(cluster_text_in, v, "fit in progress")
    with tempfile.TemporaryDirectory() as tmpdir:
        terms = sensitive_terms(eventsim, text_of, PROFILE_TERMS, start, sets, tmpdir)
        if not terms:
            raise profile_fit_rows.RowsError(f"{profile}: its rows move none of the fitted terms")
        terms = [(h, k, key, start[(h, k, key)], lo, hi) for h, k, key, _, lo, hi in terms]
        values = fit(eventsim, os.path.basename(profile), text_of, terms, start, sets, tmpdir,
                     sweeps)
    fitted = {t[:3] for t in terms}
    kept = {k: v for k, v in values.items() if k in fitted or k in held}
    source = (f"scripts/fit_network.py --profile {os.path.basename(profile)} "
              f"({sum(len(r) for *_, r in sets)} measured collective rows)")
    return with_block(cluster_text_in, kept, source), terms, sets


def report(eventsim, cluster_file, sets):
    print(f"| op | GPUs | per node | size | measured us | predicted us | error | algorithm/protocol |")
    print(f"|---|---|---|---|---|---|---|---|")
    errs = []
    for op, gpus, per_node, rows in sets:
        res = predict(eventsim, cluster_file, op, gpus, [b for b, _ in rows], None, per_node)
        for r, (b, t) in zip(res, rows):
            e = 100 * (r["time_us"] - t) / t
            errs.append(abs(e))
            print(f"| {op} | {gpus} | {per_node} | {b} | {t:.1f} | {r['time_us']:.1f} | "
                  f"{e:+.1f}% | {r['algorithm']}/{r['protocol']} |")
    print(f"\nmean |error| {sum(errs) / len(errs):.1f}% over {len(errs)} rows")


def resolve_cluster(name):
    """A cluster file path, or a bundled cluster's name."""
    if os.path.isfile(name):
        return name
    bundled = os.path.join(ROOT, "configs", "clusters", name + ".yaml")
    if os.path.isfile(bundled):
        return bundled
    raise profile_fit_rows.RowsError(f"--cluster {name}: no such file, nor a bundled cluster")


def main_profile(args):
    """--profile: fit the given cluster's nccl: block to a profile's measured collectives."""
    if not args.cluster:
        raise profile_fit_rows.RowsError("--profile needs --cluster (the hardware it ran on)")
    if bool(args.output) == bool(args.in_place):
        raise profile_fit_rows.RowsError("--profile: give --output NEW.yaml or --in-place")
    path = resolve_cluster(args.cluster)
    with open(path) as f:
        text, terms, sets = fit_profile(args.eventsim, args.profile, f.read(), args.sweeps)
    out = path if args.in_place else args.output
    tmp = f"{out}.tmp.{os.getpid()}"  # written whole, then renamed: never a partial file
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    print(f"fitted {len(terms)} terms ({', '.join('.'.join(filter(None, t[:3])) for t in terms)}) "
          f"to {sum(len(r) for *_, r in sets)} rows of {args.profile}; wrote {out}")
    report(args.eventsim, out, sets)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eventsim", default=os.path.join(ROOT, "build", "eventsim"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "..", "shared", "calibration",
                                                   "network"))
    ap.add_argument("--sweeps", type=int, default=20,
                    help="at most this many coordinate-descent sweeps (the fit stops once a sweep "
                         "no longer lowers the loss)")
    ap.add_argument("--write", action="store_true", help="update the bundled cluster files")
    ap.add_argument("--report", action="store_true",
                  help="only print the bundled clusters' error on every row")
    ap.add_argument("--profile", help="fit to this profile database's measured collectives")
    ap.add_argument("--cluster", help="with --profile: the cluster (file or bundled name) to fit")
    ap.add_argument("--output", help="with --profile: write the fitted cluster here")
    ap.add_argument("--in-place", action="store_true",
                    help="with --profile: rewrite the cluster file's nccl: block")
    args = ap.parse_args()
    if args.profile:
        try:
            main_profile(args)
        except profile_fit_rows.RowsError as e:
            print(f"fit_network: {e}", file=sys.stderr)
            sys.exit(2)
        return
    data = args.data if os.path.isdir(args.data) else "/work/shared/calibration/network"
    all_sets = datasets(data)
    for name, sets in all_sets.items():
        if args.report:
            print(f"\n### {name}\n")
            report(args.eventsim, os.path.join(ROOT, "configs", "clusters", name + ".yaml"), sets)
            continue
        text_of = lambda v, name=name: cluster_text(name, v, "fit in progress")
        start = {(h, k, key): x0 for h, k, key, x0, _, _ in FITTED[name]}
        with tempfile.TemporaryDirectory() as tmpdir:
            values = fit(args.eventsim, name, text_of, FITTED[name], start, sets, tmpdir,
                         args.sweeps)
        source = (f"scripts/fit_network.py on ../shared/calibration/network ({name} one- and "
                  f"two-node nccl-tests)")
        text = cluster_text(name, values, source)
        print(text[nccl_span(text)[0]:])
        if args.write:
            with open(os.path.join(ROOT, "configs", "clusters", name + ".yaml"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
