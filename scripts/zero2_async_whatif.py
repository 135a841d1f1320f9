#!/usr/bin/env python3
"""What-if: ZeRO-2's per-micro-batch reductions with no compute waiting for them (read from
eventsim's own timeline, not a model of eventsim's).

Superseded by `eventsim simulate --grad-reduce-sync step` (session 23), which queues the
reductions in the timing engine itself; kept as the earlier bound. Its memory walk differs from
the simulator's (modeler/pending_reductions.h): it holds a chunk's gradient from its backward's
end, where the simulator holds each bucket from its first gradient (model dtype while it fills),
so this script's pending-memory figures are lower.

eventsim's `--zero 2` makes each chunk's backward wait for its last reduce-scatter (DeepSpeed's
epilogue, FSDP's and Megatron-FSDP's root post-backward wait: docs/VALIDATION.md, Session 22,
meta29). The Llama 3 paper says its data parallelism "can tolerate longer network latency by
asynchronously ... reducing gradients". This script bounds that reading without changing the
timing engine:

  1. it simulates the plan with `--zero 1 --overlap-grad-reduce` (reductions once per step, so the
     compute timeline carries no per-micro-batch DP wait) and writes the timeline of one rank per
     pipeline stage (TP 0, DP 0) as CSV;
  2. per device, every chunk-backward task (its compute and TP ops) issues, when it ends, one
     reduce-scatter of the chunk's gradients: the weight-gradient GEMMs' m x n elements plus the
     embedding table's, in the wire dtype of the plan's own final reduce-scatter, at the time per
     byte that reduce-scatter takes in the same timeline (same group, same links);
  3. the reductions run first-in first-out on the device's DP stream and nothing waits for them
     but the step: the device finishes at max(last backward, last reduction) plus what followed
     its once-a-step sync (the optimizer and the parameter all-gather).

Printed per device: the DP stream's busy time, how far its queue runs past the compute, the most
reductions pending at once (each holds its chunk's unsharded gradient until it is reduced), and
how far those gradients and the saved activations together rise above the activations' own peak
(each chunk taken to save the stage's peak activations over its chunks in flight at that peak);
then the iteration and model TFLOP/s per GPU (zero-1's scaled by the iteration ratio), and an upper
figure that adds the overlap slowdown (`--slowdown`, the device file's network factor) to every
compute op's overlap with the DP stream. A chunk of several blocks is reduced in one piece after
its backward (a framework would start block by block during it): later, so conservative for the
time and pessimistic for the memory of such chunks; exact for Meta's one-block chunks. Not
modelled here: link sharing between the reductions and
the pipeline's sends on the same NIC (the sends are ~1% of the bytes in Meta's plan), and compute
delayed by the slowdown moving later reductions.

  scripts/zero2_async_whatif.py [--eventsim build/eventsim] [--slowdown 1.095] -- SIMULATE ARGS
"""
import argparse
import bisect
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = float(1 << 30)


def fifo(ready, durations):
    """Finish times of transfers issued at `ready` (ascending) on one stream, each after the last."""
    out, free = [], 0.0
    for r, d in zip(ready, durations):
        free = max(free, r) + d
        out.append(free)
    return out


def most_pending(ready, finish, until=float("inf")):
    """The most transfers issued but not finished at once, looked at when each is issued (the
    moments the count can grow), over issues at or before `until`."""
    best = 0
    for t in ready:
        if t > until:
            break
        best = max(best, sum(1 for a, f in zip(ready, finish) if a <= t < f))
    return best


def overlap_us(spans, busy):
    """Total time the intervals `spans` spend inside the union of the disjoint, sorted `busy`."""
    starts = [b[0] for b in busy]
    total = 0.0
    for s, e in spans:
        i = max(0, bisect.bisect_right(starts, s) - 1)
        while i < len(busy) and busy[i][0] < e:
            total += max(0.0, min(e, busy[i][1]) - max(s, busy[i][0]))
            i += 1
    return total


def merged(intervals):
    """The union of intervals, as disjoint sorted intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def memory_walk(forward_ends, backward_ends, finish, activation, gradients):
    """(most bytes held at once by saved activations and pending reductions together, most by the
    activations alone): a chunk's activations (`activation` bytes) from its forward's end to its
    backward's end, its unsharded gradient (`gradients[i]` bytes) from backward i's end until its
    reduction `finish[i]`. At one instant frees come before allocations."""
    events = [(t, 1, activation, 0) for t in forward_ends]
    events += [(t, 0, -activation, 0) for t in backward_ends]
    events += [(t, 1, 0, g) for t, g in zip(backward_ends, gradients)]
    events += [(t, 0, 0, -g) for t, g in zip(finish, gradients)]
    act = grad = best = best_act = 0
    for _, _, d_act, d_grad in sorted(events):
        act += d_act
        grad += d_grad
        best = max(best, act + grad)
        best_act = max(best_act, act)
    return best, best_act


def virtual_stage(layer, starts, n_virtual):
    """The virtual stage a timeline op's `layer` label belongs to: block numbers by the chunk
    split's starts (cumulative blocks per chunk, virtual-stage order), the embedding to the first,
    the head to the last."""
    if layer == "embedding":
        return 0
    if layer == "head":
        return n_virtual - 1
    block = int(layer)
    # The last chunk starting at or before the block that holds blocks (empty chunks hold none).
    best = None
    for v, (start, count) in enumerate(starts):
        if count > 0 and start <= block < start + count:
            best = v
    if best is None:
        raise ValueError(f"block {block} is in no chunk of {starts}")
    return best


def gradient_elements(event):
    """Gradient elements an op's event produces: a weight-gradient GEMM's m x n ("tn" layout), an
    embedding backward's vocabulary x hidden, else 0."""
    fields = dict(f.split("=", 1) for f in event.split()[1:] if "=" in f)
    kind = event.split()[0]
    if kind == "gemm" and fields.get("layout") == "tn":
        return int(fields["m"]) * int(fields["n"])
    if kind == "embedding_bwd":
        return int(fields["vocab"]) * int(fields["hidden"])
    return 0


def event_bytes(event):
    return int(re.search(r"bytes=(\d+)", event).group(1))


def device_whatif(rows, starts, n_virtual, activation_bytes=0):
    """One device's what-if from its timeline rows (dicts of the CSV), `activation_bytes` saved by
    each chunk's forward (for the memory walk). Returns a dict of times (us) and bytes."""
    for r in rows:
        r["s"], r["d"] = float(r["start_us"]), float(r["dur_us"])
    sync = [r for r in rows if r["op"] == "grad_bucket_reduce_scatter"]
    if not sync:
        raise ValueError("no once-a-step reduce-scatter in the timeline (is D > 1?)")
    sync_end = max(r["s"] + r["d"] for r in sync)
    end = max(r["s"] + r["d"] for r in rows)
    us_per_byte = sum(r["d"] for r in sync) / sum(event_bytes(r["event"]) for r in sync)
    wire = 4 if "dtype=fp32" in sync[0]["event"] else 2
    tasks, forward_tasks = {}, {}  # (micro-batch, virtual stage) -> [end, gradient elements]
    for r in rows:
        if r["phase"] not in ("forward", "backward") or r["micro_batch"] == "-1":
            continue
        if r["stream"] not in ("compute", "tp-comm"):
            continue
        key = (int(r["micro_batch"]), virtual_stage(r["layer"], starts, n_virtual))
        task = (tasks if r["phase"] == "backward" else forward_tasks).setdefault(key, [0.0, 0])
        task[0] = max(task[0], r["s"] + r["d"])
        task[1] += gradient_elements(r["event"])
    order = sorted(tasks.values())
    ready = [t[0] for t in order]
    durations = [t[1] * wire * us_per_byte for t in order]
    finish = fifo(ready, durations)
    last_backward = ready[-1]
    forwards = [r["s"] + r["d"] for r in rows if r["phase"] == "forward" and r["stream"] == "compute"]
    last_forward = max(forwards) if forwards else 0.0
    busy = merged([(f - d, f) for f, d in zip(finish, durations)])
    compute = [(r["s"], r["s"] + r["d"]) for r in rows if r["stream"] == "compute"]
    chunk_bytes = max(t[1] for t in order) * wire
    held, held_activations = memory_walk([t[0] for t in forward_tasks.values()], ready, finish,
                                         activation_bytes, [t[1] * wire for t in order])
    return {
        "memory_above_activations_bytes": held - held_activations,
        "zero1_end_us": end,
        "async_end_us": max(finish[-1], last_backward) + (end - sync_end),
        "dp_busy_us": sum(durations),
        "sync_us": sum(r["d"] for r in sync),
        "queue_past_compute_us": max(0.0, finish[-1] - last_backward),
        "pending_steady": most_pending(ready, finish, last_forward),
        "pending_any": most_pending(ready, finish),
        "largest_chunk_bytes": chunk_bytes,
        "overlapped_compute_us": overlap_us(compute, busy),
        "micro_batches": 1 + max(k[0] for k in tasks),
    }


def run(eventsim, args):
    out = subprocess.run([eventsim, "simulate"] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"zero2_async_whatif: eventsim failed: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout


def whatif(eventsim, simulate_args):
    """The plan's zero-1 summary (JSON) and the what-if of one device per stage (TP 0, DP 0)."""
    sim = simulate_args + ["--zero", "1", "--overlap-grad-reduce"]
    summary = json.loads(run(eventsim, sim + ["--json"]))
    m = re.fullmatch(r"(\d+)M(\d+)P(\d+)D", summary["strategy"])
    if not m:
        sys.exit(f"zero2_async_whatif: strategy {summary['strategy']}: only M, P and D are read")
    tp, pp, dp = (int(g) for g in m.groups())
    v = summary["virtual_stages"]
    # Blocks per model chunk in virtual-stage order: the JSON's when the split was given, else the
    # text summary's "stage layers" line (the balanced split eventsim chose).
    layers = summary["stage_layers"]
    if layers is None:
        line = re.search(r"^  stage layers +([0-9,]+)", run(eventsim, sim), re.M)
        layers = [int(x) for x in line.group(1).split(",")]
    starts, at = [], 0
    for count in layers:
        starts.append((at, count))
        at += count
    ranks = [tp * dp * s for s in range(pp)]  # Megatron's order: TP 0, DP 0 of each stage
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.csv")
        run(eventsim, sim + ["--csv", path, "--ranks", ",".join(map(str, ranks))])
        by_rank = {}
        with open(path) as f:
            for r in csv.DictReader(f):
                by_rank.setdefault(int(r["rank"]), []).append(r)
    # Saved activations per chunk: the stage's peak over the chunks in flight at that peak.
    activation = [st["memory"]["activations_bytes"] / max(1, st["peak_activations_in_flight"])
                  for st in summary["stages"]]
    return summary, [device_whatif(by_rank[rank], starts, pp * v, activation[s])
                     for s, rank in enumerate(ranks)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eventsim", default=os.path.join(ROOT, "build", "eventsim"))
    ap.add_argument("--slowdown", type=float, default=1.095,
                    help="compute slowdown beside an inter-node collective for the upper figure "
                         "(default: h100-sxm5-80gb's overlap_slowdown.network)")
    ap.add_argument("simulate", nargs=argparse.REMAINDER,
                    help="eventsim simulate arguments (after --), without --zero/--json/--csv")
    a = ap.parse_args()
    summary, devices = whatif(a.eventsim, [x for x in a.simulate if x != "--"])
    zero1_ms = summary["iteration_time_ms"]
    worst_async = worst_upper = 0.0
    print(f"{summary['model']} {summary['strategy']} {summary['schedule']} "
          f"v{summary['virtual_stages']}, m = {summary['micro_batches']}: zero-1 (once a step) "
          f"{zero1_ms:.1f} ms")
    for s, w in enumerate(devices):
        upper = w["async_end_us"] + (a.slowdown - 1) * w["overlapped_compute_us"]
        worst_async = max(worst_async, w["async_end_us"])
        worst_upper = max(worst_upper, upper)
        print(f"stage {s:2d}: DP busy {w['dp_busy_us'] / 1e3:8.1f} ms (once-a-step sync "
              f"{w['sync_us'] / 1e3:6.1f} ms x m = {w['micro_batches'] * w['sync_us'] / 1e3:8.1f}), "
              f"queue past compute {w['queue_past_compute_us'] / 1e3:7.1f} ms, pending at most "
              f"{w['pending_steady']} while forwards remain / {w['pending_any']} in all "
              f"({w['pending_any'] * w['largest_chunk_bytes'] / GIB:.2f} GiB; with the saved "
              f"activations, {w['memory_above_activations_bytes'] / GIB:.2f} GiB above their peak), end "
              f"{w['async_end_us'] / 1e3:8.1f} ms ({upper / 1e3:8.1f} with the slowdown; "
              f"zero-1 {w['zero1_end_us'] / 1e3:8.1f})")
    tflops = summary["model_tflops_per_gpu"]
    for name, us in (("asynchronous reductions", worst_async),
                     (f"the same, compute beside them slowed x{a.slowdown}", worst_upper)):
        print(f"{name}: {us / 1e3:.1f} ms, {tflops * zero1_ms * 1e3 / us:.1f} model TFLOP/s per GPU "
              f"(zero-1: {tflops:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
