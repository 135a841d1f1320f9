#!/usr/bin/env python3
"""What-if: the busiest stage of Meta's Llama 3.1 405B plan (scripts/memory_published.py) held the
way PyTorch FSDP1 holds it, on eventsim's own timeline (read from `simulate --csv`, not modelled
anew). An audit of eventsim's `--zero 2 --grad-reduce-sync step` memory walk
(modeler/pending_reductions.h), docs/VALIDATION.md "Session 27, meta29".

Usage: scripts/fsdp1_meta_whatif.py [--eventsim build/eventsim] [--gpus 8192] [--rank 512]

eventsim's `--zero 2` is ZeRO-2 as DeepSpeed runs it: all 16-bit weights held all step; the
bucket being filled counted whole from its gradient task's start (DeepSpeed's IPG buffer,
torch.empty(reduce_bucket_size) at each backward()); at its issue a wire-dtype (fp32) copy of its
own per queued reduction, its model-dtype source freed there. The Llama 3 paper's data
parallelism is FSDP (Zhao et al. 2023), with "TORCH_NCCL_AVOID_RECORD_STREAMS" enabled. What
PyTorch FSDP1 (torch/distributed/fsdp/_runtime_utils.py, 2.1-2.5) holds instead, one mechanism a
letter, each switchable:

  W  the unsharded 16-bit weights: _post_backward_hook calls _post_backward_reshard, which frees
     them when _should_free_in_backward, true while _sync_gradients (a reduce-scatter every
     micro-batch, as the plan runs) for SHARD_GRAD_OP too; the chunk's next task gathers them
     again (the paper's "asynchronously prefetching sharded model weights"). A chunk is held from
     the start of its first task after a free to the end of its next backward.
  S  the model-dtype unit gradient is record_stream'ed onto the post-backward stream and so held
     until that stream has passed its own reduce-scatter (its end); the fp32 copy is allocated on
     that stream, and ProcessGroupNCCL under TORCH_NCCL_AVOID_RECORD_STREAMS stashes it until
     work.wait(), which blocks that stream on the NCCL end event, so the copy is freed
     stream-ordered and the next unit's copy reuses the block: one fp32 block, holding each
     reduction's copy from its start (the previous one's end) to its end.
  G  the unit's gradient grows as autograd makes it: each weight-gradient GEMM's m x n elements
     (model dtype) from that GEMM's end (eventsim's timeline), the rest (norm gains) at the task's
     end; there the flat parameter's split backward concatenates them into one unit gradient
     (both copies held at that instant), then the hook reshards (W) and casts.

Printed: eventsim's own walk re-derived from the CSV (its figure above the activations' peak must
equal the summary's pending_reduction_bytes: the check that the CSV reading is eventsim's walk),
then each variant's top of (activations + weights + buckets) and the device figure it implies
(the summary's device bytes + the difference; the other components unchanged).
Limits: one bucket per chunk (Meta's one-block chunks; DeepSpeed's 5e8-element bucket holds a
block's 398.5 M parameters), one model dtype; the SP transients (a plateau's 2 e T h, a hook
instant's e T h) are the summary's, not re-walked.
"""
import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import tempfile

META = ["--model", "llama3.1-405b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "16",
        "--micro-batch", "1", "--global-batch", "2048", "--sequence-parallel", "--zero", "2",
        "--grad-reduce-sync", "step", "--schedule", "interleaved", "--virtual-stages", "8",
        "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
        "--fallback", "analytic"]
GIB = 1024.0**3
# Order of the things that happen at one instant (an interval's start or end carries one): the
# frees of what ended before it (activations at a backward's end, a reduction's buffers), the
# gradients that arrive with the task's last op, the split backward's concatenated gradient, the
# per-parameter gradients it was made from freed, the reshard's free of the weights, other
# allocations (the fp32 copy, a bucket or weights gathered at a task's start), the cast's source
# freed after its copy exists. At one (instant, order) frees come before allocations.
FREE, ARRIVE, CONCAT, PARTS_FREED, RESHARD, COPY, SOURCE_FREED = range(7)


def fail(message):
    """Bad input: one line on stderr, exit 2 (the project's convention)."""
    print(f"fsdp1_meta_whatif: {message}", file=sys.stderr)
    sys.exit(2)


def top(intervals):
    """The most bytes held at once: `intervals` are (start, start_order, end, end_order, bytes);
    at one instant events run in (time, order) order, a free before an allocation of the same
    order. Returns (bytes, time)."""
    events = []
    for start, start_order, end, end_order, b in intervals:
        events.append((start, start_order, 1, b))
        events.append((end, end_order, 0, -b))
    events.sort()
    held, best = 0, (0, None)
    for t, _, _, b in events:
        held += b
        if held > best[0]:
            best = (held, t)
    return best


def read_timeline(path, rank):
    """Tasks {(phase, chunk, mb): [start, end, [(arrival_time, bytes)]]} and the reductions
    [(start, end, wire_bytes, wire_dtype_bytes)] in issue order, from eventsim's CSV."""
    tasks = collections.defaultdict(lambda: [float("inf"), float("-inf"), []])
    reductions = []
    layers = set()
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["rank"] != str(rank):
                continue
            s, d = float(r["start_us"]), float(r["dur_us"])
            if r["op"] == "zero2_grad_reduce_scatter":
                ev = dict(kv.split("=") for kv in r["event"].split()[1:])
                reductions.append((s, s + d, int(ev["bytes"]), 4 if ev["dtype"] == "fp32" else 2))
                continue
            if r["phase"] not in ("forward", "backward") or r["stream"] == "pp-comm":
                continue
            layers.add(int(r["layer"]))
            key = (r["phase"], int(r["layer"]), int(r["micro_batch"]))
            t = tasks[key]
            t[0], t[1] = min(t[0], s), max(t[1], s + d)
            if r["phase"] == "backward" and r["op"].endswith("_wgrad"):
                ev = dict(kv.split("=") for kv in r["event"].split()[1:])
                t[2].append((s + d, int(ev["m"]) * int(ev["n"])))
    chunk_of = {layer: i for i, layer in enumerate(sorted(layers))}
    out = {(p, chunk_of[layer], mb): v for (p, layer, mb), v in tasks.items()}
    reductions.sort()
    return out, reductions


def activation_intervals(tasks, activation_bytes):
    """Each chunk's saved activations of one micro-batch: from its forward's end to its
    backward's end."""
    out = []
    fwd_end = {}
    for (phase, chunk, mb), (start, end, _) in sorted(tasks.items(), key=lambda kv: kv[1][0]):
        if phase == "forward":
            fwd_end[(chunk, mb)] = end
        elif (chunk, mb) not in fwd_end:
            fail(f"the backward of chunk {chunk} micro-batch {mb} has no forward before it")
        else:
            out.append((fwd_end.pop((chunk, mb)), COPY, end, FREE, activation_bytes))
    return out


def intervals(tasks, reductions, activation_bytes, model_bytes, w=False, s=False, g=False):
    """The held intervals under eventsim's rules, with FSDP1's W, S, G (module docstring)
    switched on."""
    order = sorted(tasks.items(), key=lambda kv: kv[1][0])
    backwards = [(k, v) for k, v in order if k[0] == "backward"]
    if len(backwards) != len(reductions):
        fail(f"{len(backwards)} backwards but {len(reductions)} reductions in the timeline: "
             "one bucket per chunk expected")
    out = activation_intervals(tasks, activation_bytes)
    # a chunk's weights: its bucket's elements in the model dtype
    chunk_weights = {}
    for ((_, chunk, _), _), (_, _, wire, wire_dtype) in zip(backwards, reductions):
        chunk_weights[chunk] = wire // wire_dtype * model_bytes
    first, last = order[0][1][0], max(v[1] for _, v in order)
    if w:
        held = {}
        for (phase, chunk, _), (start, end, _) in order:
            held.setdefault(chunk, start)
            if phase == "backward":
                out.append((held.pop(chunk), COPY, end, RESHARD, chunk_weights[chunk]))
        out += [(t, COPY, last, FREE, chunk_weights[c]) for c, t in held.items()]
    else:
        out += [(first, COPY, last, FREE, b) for b in chunk_weights.values()]
    previous_end = float("-inf")
    for ((_, chunk, _), (start, end, arrivals)), (_, r_end, wire, wire_dtype) in zip(
            backwards, reductions):
        fill = wire // wire_dtype * model_bytes
        source_end = (r_end, FREE) if s else (end, SOURCE_FREED)
        if g:
            arrived = 0
            for t, elements in arrivals:
                out.append((t, COPY, end, PARTS_FREED, elements * model_bytes))
                arrived += elements * model_bytes
            out.append((end, ARRIVE, end, PARTS_FREED, max(0, fill - arrived)))  # norm gains
            out.append((end, CONCAT) + source_end + (fill,))
        else:
            out.append((start, COPY) + source_end + (fill,))
        copy_start = (max(end, previous_end), COPY) if s else (end, COPY)
        out.append(copy_start + (r_end, FREE, wire))
        previous_end = r_end
    return out


def run(eventsim, args):
    out = subprocess.run([eventsim, "simulate"] + args, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"eventsim simulate failed: {out.stderr.strip()}")
    return out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eventsim", default="build/eventsim")
    p.add_argument("--gpus", type=int, default=8192)
    p.add_argument("--rank", type=int, default=512,
                   help="a rank of the busiest stage (TP 0, DP 0; 512 is stage 1 of this plan)")
    a = p.parse_args()
    args = META + ["--gpus", str(a.gpus)]
    j = json.loads(run(a.eventsim, args + ["--json"]))
    stage = max(j["stages"], key=lambda st: st["peak_memory_bytes"])
    m = stage["memory"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.csv")
        run(a.eventsim, args + ["--csv", path, "--ranks", str(a.rank)])
        with open(path) as f:
            first = next(csv.DictReader(f), None)
        if first is None:
            fail(f"eventsim wrote no timeline rows for --rank {a.rank}")
        pp = first["pp"]
        if int(pp) != stage["stage"]:
            fail(f"--rank {a.rank} is on pipeline stage {pp}, the busiest stage is "
                 f"{stage['stage']}")
        tasks, reductions = read_timeline(path, a.rank)
    act = m["activations_bytes"] // m["activations_in_flight"]
    model_bytes = 2  # bf16: the plan runs the model config's default dtype (META sets none)
    base = top(intervals(tasks, reductions, act, model_bytes))
    acts = top(activation_intervals(tasks, act))
    weights = m["weights_bytes"]
    print(f"{a.gpus} GPUs, stage {stage['stage']} (rank {a.rank}): eventsim's walk from the CSV: "
          f"activations' peak {acts[0] / GIB:.3f} GiB, buckets above it "
          f"{base[0] - weights - acts[0]} B (summary: pending_reduction_bytes "
          f"{m['pending_reduction_bytes']}), top {base[0] / GIB:.3f} GiB with the weights at "
          f"t = {base[1]:.1f} us; device {m['device_bytes'] / GIB:.2f} GiB")
    for name in ("W", "S", "G", "W+S", "S+G", "W+S+G"):
        b = top(intervals(tasks, reductions, act, model_bytes,
                          w="W" in name, s="S" in name, g="G" in name))
        d = b[0] - base[0]
        print(f"  FSDP1 {name:6s} top {b[0] / GIB:.3f} GiB at t = {b[1]:.1f} us ({d / GIB:+.3f}): "
              f"device {(m['device_bytes'] + d) / GIB:.2f} GiB")


if __name__ == "__main__":
    main()
