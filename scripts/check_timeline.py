#!/usr/bin/env python3
"""Checks that a measured timeline (eventrun --csv) is complete and consistent.

  check_timeline.py --measured measured.csv --expected simulated.csv [--tolerance-us T]

- complete: the multiset of (rank, stream, phase, micro_batch, layer, op) keys equals the
  expected one (the simulator's CSV for the same strategy: eventrun's programs have the same keys);
- every row is provenance "measured" with a non-negative duration;
- per rank and stream, events do not overlap (Perfetto draws one slice per thread at a time);
- dependencies: the forward of micro-batch i on virtual stage (model chunk) k starts no earlier
  than the activation send of micro-batch i from chunk k-1 started, and its backward (recompute
  included) no earlier than the gradient send from chunk k+1 started. The CSV has no chunk column:
  chunks are found from layer numbers (along a pipeline, ordered by layer, each maximal run of
  layers on one device is a chunk; with interleaving a device holds several), and a send belongs to
  the chunk whose task of the same phase and micro-batch on that rank started last before it.
T (default 0) absorbs clock-alignment error between ranks: pass eventrun's reported residual. It
applies only where two ranks' clocks meet (a send and its receiving task) or to a stream's order.
eventrun puts every rank on rank 0's clock, each within its own half round trip, and reports the
largest: two ranks other than 0 can then be off by T each, in opposite directions, so where a send
and its receiver both lie off rank 0 the slack is 2 T (T where one of them is rank 0).
Exit 0 when all hold; otherwise one line per violation (at most 20) and exit 1. A file that
cannot be read as a timeline is one line and exit 2.
"""
import argparse
import collections
import csv
import math
import sys


INTEGERS = ("rank", "tp", "pp", "dp", "micro_batch")
COLUMNS = INTEGERS + ("stream", "start_us", "dur_us", "phase", "op", "layer", "provenance")


def fail(message):
    """A file that cannot be read as a timeline: one line, exit code 2 (problems found in a
    readable timeline are exit code 1)."""
    print(f"check_timeline: error: {message}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [k for k in COLUMNS if k not in (reader.fieldnames or [])]
            if missing:
                fail(f"{path}:1: not a timeline CSV (no column {', '.join(missing)}; expected "
                     "eventsim simulate --csv or eventrun --csv)")
            rows = []
            for r in reader:
                where = f"{path}:{reader.line_num}"
                try:
                    for k in INTEGERS:
                        r[k] = int(r[k])
                    r["start_us"] = float(r["start_us"])
                    r["dur_us"] = float(r["dur_us"])
                except (TypeError, ValueError):
                    fail(f"{where}: {', '.join(INTEGERS)} must be integers and start_us, dur_us "
                         "numbers")
                if not (math.isfinite(r["start_us"]) and math.isfinite(r["dur_us"])):
                    fail(f"{where}: start_us and dur_us must be finite")
                r["end_us"] = r["start_us"] + r["dur_us"]
                rows.append(r)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except (UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: not a CSV file ({e})")
    return rows


def key(r):
    return (r["rank"], r["stream"], r["phase"], r["micro_batch"], r["layer"], r["op"])


TASK_PHASES = {"forward": "forward", "backward": "backward", "recompute": "backward"}

# Slack for comparing two timestamps of one rank: the CSV's microsecond rounding only.
SAME_CLOCK_US = 0.001


def layer_order(layer):
    """Position of a CSV layer along the model: embedding first, head last."""
    if layer == "embedding":
        return -1
    if layer == "head":
        return float("inf")
    return int(layer)


def virtual_stages(measured):
    """{(tp, dp): [(pp, set of layers) per chunk k]}: along each pipeline, layers sorted; a maximal
    run of layers on one device stage is one chunk."""
    owner = collections.defaultdict(dict)  # (tp, dp) -> layer -> pp
    for r in measured:
        if r["stream"] != "pp-comm" and r["phase"] == "forward":
            owner[(r["tp"], r["dp"])][r["layer"]] = r["pp"]
    out = {}
    for pipe, layers in owner.items():
        chunks = []
        for layer in sorted(layers, key=layer_order):
            pp = layers[layer]
            if not chunks or chunks[-1][0] != pp:
                chunks.append((pp, set()))
            chunks[-1][1].add(layer)
        out[pipe] = chunks
    return out


def check_dependencies(measured, tol):
    errors = []
    stages = virtual_stages(measured)
    chunk_of = {}  # (tp, dp, layer) -> k
    for (tp, dp), chunks in stages.items():
        for k, (_, layers) in enumerate(chunks):
            for layer in layers:
                chunk_of[(tp, dp, layer)] = k
    # Task starts per (tp, dp, k, phase, micro_batch): the first op of the task on any stream but
    # pp-comm (recomputed ops open their backward task); task_rank: the rank running it.
    task_start = {}
    task_rank = {}
    for r in measured:
        phase = TASK_PHASES.get(r["phase"])
        if r["stream"] == "pp-comm" or phase is None:
            continue
        k = chunk_of.get((r["tp"], r["dp"], r["layer"]))
        if k is None:
            errors.append(f"rank {r['rank']} {r['op']} layer {r['layer']}: layer has no forward")
            continue
        t = (r["tp"], r["dp"], k, phase, r["micro_batch"])
        task_start[t] = min(task_start.get(t, float("inf")), r["start_us"])
        task_rank[t] = r["rank"]
    for r in measured:
        if r["op"] not in ("send_activation", "send_gradient"):
            continue
        forward = r["op"] == "send_activation"
        chunks = stages.get((r["tp"], r["dp"]), [])
        # The sending chunk: this device's task of that phase and micro-batch that started last
        # before the send (the send follows its task). Task and send share the rank's clock, so
        # no alignment tolerance applies here: with it, a later chunk's task starting within T
        # after the send (tiny tasks, a loaded machine's large T) was taken as the sender.
        sender, sender_start = None, None
        for k, (pp, _) in enumerate(chunks):
            start = task_start.get((r["tp"], r["dp"], k, r["phase"], r["micro_batch"]))
            if pp != r["pp"] or start is None or start > r["start_us"] + SAME_CLOCK_US:
                continue
            if sender_start is None or start > sender_start:
                sender, sender_start = k, start
        receiver = None if sender is None else sender + (1 if forward else -1)
        received = (r["tp"], r["dp"], receiver, r["phase"], r["micro_batch"])
        start = task_start.get(received)
        what = f"rank {r['rank']} {r['op']} mb {r['micro_batch']}"
        if sender is None:
            errors.append(f"{what}: no sending task before it")
        elif start is None:
            errors.append(f"{what} (chunk {sender}): no receiving task on chunk {receiver}")
        elif start < r["start_us"] - tol * ((r["rank"] != 0) + (task_rank[received] != 0)):
            errors.append(f"chunk {receiver} (pp {chunks[receiver][0]}) {r['phase']} mb "
                          f"{r['micro_batch']} starts {start:.3f} before {what} (chunk {sender}) "
                          f"started {r['start_us']:.3f}")
    return errors


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
    errors += check_dependencies(measured, tol)
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
