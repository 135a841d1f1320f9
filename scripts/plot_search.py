#!/usr/bin/env python3
"""Draw the ranking of `eventsim search` as a bar chart (PNG), like DistSim's Figure 12.

Usage:
    eventsim search ... --json > search.json
    python3 scripts/plot_search.py search.json -o search.png [--top K] [--title TEXT]
    python3 scripts/plot_search.py search.csv  -o search.png      # the --csv file works too

One bar per candidate: throughput in samples/s, best first. Each label names the strategy, the
micro-batch size, the schedule and the techniques, as the text table of `eventsim search` does
("2M4P8D b=1 interleaved v3 rc=sel sp z1": v virtual stages, rc recomputation, sp sequence
parallelism, z ZeRO stage), so candidates that differ only in techniques have labels of their own.
Strategies that do not fit in device memory are drawn after them as grey hatched bars of zero
height labelled OOM (with their predicted peak memory per GPU). Invalid candidates are not drawn;
their count is in the title. Needs matplotlib (Debian: apt-get install python3-matplotlib;
/usr/bin/python3 has it).
"""

import argparse
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_common  # noqa: E402  (this folder)


def fail(message):
    plot_common.fail("plot_search.py", message)


def import_pyplot():
    return plot_common.import_pyplot("plot_search.py")


def number(value, what, row):
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        fail(f"{row}: {what} '{value}' is not a number")


def label(c, where):
    """The candidate's label: strategy, micro-batch, schedule, then the techniques it uses."""
    parts = [str(c["strategy"]), f"b={c['micro_batch']}", str(c["schedule"])]
    if c["schedule"] == "interleaved":
        parts.append(f"v{c['virtual_stages']}")
    recompute = {"none": None, "full": "rc=full", "selective": "rc=sel"}
    if c["recompute"] not in recompute:
        fail(f"{where}: recompute '{c['recompute']}' is not none, full or selective")
    parts.append(recompute[c["recompute"]])
    # The JSON has a boolean, the CSV on/off.
    sequence_parallel = {True: True, False: False, "on": True, "off": False}
    if c["sequence_parallel"] not in sequence_parallel:
        fail(f"{where}: sequence_parallel '{c['sequence_parallel']}' is not true/false or on/off")
    parts.append("sp" if sequence_parallel[c["sequence_parallel"]] else None)
    zero = number(c["zero"], "zero", where)
    parts.append(f"z{zero:.0f}" if zero else None)
    # DP overlap (searched with --dp-overlap off,on); older files have no such field.
    overlap = c.get("dp_overlap", False)
    if overlap not in sequence_parallel:
        fail(f"{where}: dp_overlap '{overlap}' is not true/false or on/off")
    parts.append("ov" if sequence_parallel[overlap] else None)
    # Context and expert parallelism (older files have no such fields).
    for key, short in (("cp", "cp"), ("ep", "ep")):
        size = number(c.get(key, 1), key, where)
        parts.append(f"{short}{size:.0f}" if size and size > 1 else None)
    offload = c.get("offload", "none")
    parts.append(f"off={offload}" if offload not in ("none", None, "") else None)
    return " ".join(p for p in parts if p)


def load_json(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        fail(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); expected `eventsim search --json`")
    if not isinstance(data, dict) or not isinstance(data.get("candidates"), list):
        fail(f"{path}: no 'candidates' list; expected the output of `eventsim search --json`")
    meta = {k: data.get(k) for k in ("model", "cluster", "gpus", "global_batch", "device",
                                     "counts")}
    return data["candidates"], meta


def load_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        fail(f"{path}: no rows; expected the --csv file of `eventsim search`")
    for key in ("strategy", "micro_batch", "schedule", "virtual_stages", "recompute",
                "sequence_parallel", "zero", "status", "throughput_samples_per_s",
                "peak_memory_bytes"):
        if key not in rows[0]:
            fail(f"{path}: column '{key}' missing; expected the --csv file of `eventsim search`")
    return rows, {}


def candidates_of(path):
    if not os.path.exists(path):
        fail(f"{path}: no such file")
    rows, meta = load_csv(path) if path.endswith(".csv") else load_json(path)
    ok, oom, invalid = [], [], 0
    for i, c in enumerate(rows):
        where = f"{path}: candidate {i}"
        if not isinstance(c, dict):
            fail(f"{where}: not an object")
        for key in ("strategy", "micro_batch", "schedule", "virtual_stages", "recompute",
                    "sequence_parallel", "zero", "status"):
            if c.get(key) in (None, ""):
                fail(f"{where}: '{key}' missing")
        status = str(c["status"])
        if status == "ok":
            throughput = number(c.get("throughput_samples_per_s"), "throughput_samples_per_s", where)
            if throughput is None:
                fail(f"{where}: status ok without throughput_samples_per_s")
            ok.append((label(c, where), throughput))
        elif status == "OOM":
            peak = number(c.get("peak_memory_bytes"), "peak_memory_bytes", where)
            oom.append((label(c, where), peak))
        elif status == "invalid":
            invalid += 1
        else:
            fail(f"{where}: unknown status '{status}' (ok, OOM or invalid)")
    ok.sort(key=lambda x: -x[1])
    oom.sort(key=lambda x: x[1] or 0)
    return ok, oom, invalid, meta


def counts_text(n_ok, n_oom, n_invalid, meta, shown_ok, shown_oom):
    """The title's counts: the search's own totals when the JSON has them (its candidate list
    holds only what it lists: invalid candidates only with --show-rejected, --top K rows)."""
    totals = meta.get("counts") or {}
    n_ok, n_oom = totals.get("ok", n_ok), totals.get("oom", n_oom)
    n_invalid = totals.get("invalid", n_invalid)
    text = f"{n_ok} fit, {n_oom} OOM, {n_invalid} invalid"
    if shown_ok < n_ok or shown_oom < n_oom:
        text += f" (showing {shown_ok} + {shown_oom} OOM)"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", help="eventsim search --json output (or its --csv file)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--top", type=int, default=0, help="draw only the K best ok strategies")
    parser.add_argument("--max-oom", type=int, default=10,
                        help="OOM strategies to draw after the ok ones (default 10, -1: all)")
    parser.add_argument("--title", help="chart title")
    args = parser.parse_args()
    if args.top < 0:
        fail(f"--top {args.top}: must be >= 0")

    ok, oom, invalid, meta = candidates_of(args.input)
    if not ok and not oom:
        fail(f"{args.input}: no valid candidate to draw ({invalid} invalid)")
    shown_ok = ok[: args.top] if args.top > 0 else ok
    shown_oom = oom if args.max_oom < 0 else oom[: args.max_oom]

    plt = import_pyplot()
    n = len(shown_ok) + len(shown_oom)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * n + 2) + 1.8, 5.0))  # + 1.8: the legend
    xs = list(range(n))
    best = max((t for _, t in ok), default=0)
    ax.bar(xs[: len(shown_ok)], [t for _, t in shown_ok], color="tab:blue", label="fits (simulated)")
    top = max((t for _, t in shown_ok), default=1.0)
    if shown_oom:
        # OOM: no throughput. A short grey hatched bar marks each one, labelled OOM + its peak.
        stub = 0.06 * top
        ax.bar(xs[len(shown_ok):], [stub] * len(shown_oom), color="lightgrey", hatch="//",
               edgecolor="grey", label="OOM (not simulated)")
        for x, (_, peak) in zip(xs[len(shown_ok):], shown_oom):
            text = "OOM" if peak is None else f"OOM\n{peak / 2**30:.0f} GiB"
            ax.text(x, stub, text, ha="center", va="bottom", fontsize=7, color="dimgrey")
    if best > 0:
        for x, (_, t) in zip(xs, shown_ok):
            ax.text(x, t, f"{t / best:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([l for l, _ in shown_ok] + [l for l, _ in shown_oom], rotation=90,
                       fontsize=7)
    ax.set_ylabel("throughput (samples/s)")
    ax.set_ylim(0, top * 1.18)
    ax.set_xlim(-0.6, n - 0.4)  # the default 5% margins leave bars of blank space on long charts
    title = args.title
    if not title:
        what = " on ".join(str(meta[k]) for k in ("model", "cluster") if meta.get(k))
        gpus = f", {meta['gpus']} GPUs" if meta.get("gpus") else ""
        batch = f", B={meta['global_batch']}" if meta.get("global_batch") else ""
        title = f"eventsim search{': ' + what if what else ''}{gpus}{batch}"
    counts = counts_text(len(ok), len(oom), invalid, meta, len(shown_ok), len(shown_oom))
    ax.set_title(f"{title}\n{counts}; labels: throughput relative to the best", fontsize=9)
    # Outside the axes, right: inside it would cover the labels of the tallest bars.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        fail(f"-o {args.output}: directory {out_dir} does not exist")
    tmp = args.output + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, args.output)
    print(f"wrote {args.output}: {len(shown_ok)} strategies, {len(shown_oom)} OOM")


if __name__ == "__main__":
    main()
