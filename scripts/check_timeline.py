#!/usr/bin/env python3
"""Checks that a measured timeline (eventrun --csv) is complete and consistent.

  check_timeline.py --measured measured.csv --expected simulated.csv [--tolerance-us T]

- complete: the multiset of (rank, stream, phase, micro_batch, layer, op) keys equals the
  expected one (the simulator's CSV for the same strategy: eventrun's programs have the same keys);
- every row is provenance "measured" with a non-negative duration;
- per rank and stream, events do not overlap (Perfetto draws one slice per thread at a time);
- dependencies: a stage's forward of micro-batch i starts no earlier than the activation send of
  micro-batch i from the previous stage started, and its backward no earlier than the gradient send
  from the next stage started.
T (default 0) absorbs clock-alignment error between ranks: pass eventrun's reported residual.
Exit 0 when all hold; otherwise one line per violation (at most 20) and exit 1.
"""
import argparse
import collections
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("rank", "tp", "pp", "dp", "micro_batch"):
            r[k] = int(r[k])
        r["start_us"] = float(r["start_us"])
        r["dur_us"] = float(r["dur_us"])
        r["end_us"] = r["start_us"] + r["dur_us"]
    return rows


def key(r):
    return (r["rank"], r["stream"], r["phase"], r["micro_batch"], r["layer"], r["op"])


def check(measured, expected, tol):
    errors = []
    got = collections.Counter(key(r) for r in measured)
    want = collections.Counter(key(r) for r in expected)
    for k in sorted(want - got):
        errors.append(f"missing event {k} (x{(want - got)[k]})")
    for k in sorted(got - want):
        errors.append(f"unexpected event {k} (x{(got - want)[k]})")
    for r in measured:
        if r["provenance"] != "measured":
            errors.append(f"{key(r)}: provenance {r['provenance']}, want measured")
        if r["dur_us"] < 0:
            errors.append(f"{key(r)}: negative duration {r['dur_us']}")
    by_stream = collections.defaultdict(list)
    for r in measured:
        by_stream[(r["rank"], r["stream"])].append(r)
    for (rank, stream), rows in sorted(by_stream.items()):
        rows.sort(key=lambda r: r["start_us"])
        for a, b in zip(rows, rows[1:]):
            if b["start_us"] < a["end_us"] - tol:
                errors.append(f"rank {rank} {stream}: {a['op']} ends {a['end_us']:.3f} after "
                              f"{b['op']} starts {b['start_us']:.3f}")
    # Task starts per (rank, phase, micro_batch): the first op on compute or TP streams.
    task_start = {}
    rank_of = {}
    for r in measured:
        rank_of[(r["tp"], r["dp"], r["pp"])] = r["rank"]
        if r["stream"] in ("compute", "tp-comm") and r["phase"] in ("forward", "backward"):
            k = (r["rank"], r["phase"], r["micro_batch"])
            task_start[k] = min(task_start.get(k, float("inf")), r["start_us"])
    for r in measured:
        if r["op"] not in ("send_activation", "send_gradient"):
            continue
        forward = r["op"] == "send_activation"
        peer = rank_of.get((r["tp"], r["dp"], r["pp"] + (1 if forward else -1)))
        start = task_start.get((peer, r["phase"], r["micro_batch"]))
        if peer is None or start is None:
            errors.append(f"rank {r['rank']} {r['op']} mb {r['micro_batch']}: no receiving task")
        elif start < r["start_us"] - tol:
            errors.append(f"rank {peer} {r['phase']} mb {r['micro_batch']} starts {start:.3f} "
                          f"before rank {r['rank']}'s {r['op']} started {r['start_us']:.3f}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--tolerance-us", type=float, default=0.0)
    args = ap.parse_args()
    measured, expected = load(args.measured), load(args.expected)
    errors = check(measured, expected, args.tolerance_us)
    for e in errors[:20]:
        print(f"check_timeline: {e}")
    if errors:
        print(f"check_timeline: {len(errors)} problem(s) in {args.measured}")
        return 1
    print(f"check_timeline: {args.measured}: {len(measured)} events on "
          f"{len({r['rank'] for r in measured})} ranks, complete and consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
