#!/usr/bin/env python3
"""Compares eventsim's peak memory with published runs that report it (read, never fitted), and
prints Meta's Llama 3.1 405B plans' verdicts with their breakdown by component.

Usage: scripts/memory_published.py [--eventsim build/eventsim] [--markdown] [--stages]

--stages adds, for Meta's plans, every pipeline stage's breakdown (activation chunks in flight and
each component, GiB): which stage peaks and why the others do not.

torchtitan rows: pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torch 1963fc8,
torchtitan 9dec370, Dec 2024), Grand Teton H100s with 96 GB HBM2e at 500 W (`--cluster
grand-teton-h100`), seq 8192 unless the row says; torchtitan logs the caching allocator's reserved
peak (components/metrics.py), the maximum over all GPUs, so eventsim's reserved peak of its busiest
stage is compared. Most rows ran with torch.compile, whose fusions eventsim does not model (its
activations are the eager ones), and some with AsyncTP, which eventsim refuses: such rows are
labelled and their errors reported apart from the eager rows.

Meta's rows: Dubey et al. 2024 (The Llama 3 Herd of Models), Table 4 and section 3.3.2: TP 8,
PP 16, b 1, seq 8192, 2,048 sequences per step, interleaved with one layer per virtual stage and
the first / last virtual stage holding only the embedding / the output layer and loss, optimizer
state and gradients sharded (FSDP, parameters not resharded after the forward: `--zero 2`), no
activation checkpointing. They report no peak, only that the plan trained: the verdict is the row.
Section 3.3.2 also says data parallelism sits outermost "because it can tolerate longer network
latency by asynchronously prefetching sharded model weights and reducing gradients": the rows run
`--grad-reduce-sync step` (each micro-batch's reductions queued, waited for only at the step; each
bucket's gradients counted in the peak from its first gradient to its reduction's end,
modeler/pending_reductions.h).
"""
import argparse
import json
import subprocess
import sys

GIB = 1024.0**3

# torchtitan 9dec370's build_optimizers passed fused=False, foreach=True (fused became its default
# on 2025-02-24): foreach AdamW's step temporary is part of these runs (docs/TECHNIQUES.md).
# Its apply_fsdp put the embedding, final norm and output in the root's FSDP group and kept the last
# block gathered (torchtitan gave them groups of their own on 2025-07-28, 83e694105): --fsdp-wrap
# root (--fsdp-wrap below gives the other reading).
TT = ["--cluster", "grand-teton-h100", "--framework", "fsdp", "--fallback", "analytic",
      "--optimizer-impl", "foreach"]
WRAP = "root"
FP8 = ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"]
SEL_OP = ["--recompute", "selective-op"]
FULL = ["--recompute", "full"]


def tt8b(gpus, table, label, measured, extra, eager):
    return {"source": f"torchtitan Table {table}", "label": label, "measured": measured,
            "eager": eager,
            "args": ["--model", "llama3-8b", "--gpus", str(gpus), "--micro-batch", "2",
                     "--global-batch", str(2 * gpus)] + TT + SEL_OP + extra}


def tt_cp(cp):
    # PyTorch's context parallelism of Dec 2024 rotates K/V with an all-gather by default
    # (torch.distributed.tensor.experimental._attention, _cp_options.rotate_method = ALL_GATHER;
    # torchtitan 9dec370 does not change it).
    return ["--cp", str(cp)] + (["--cp-comm-type", "allgather"] if cp > 1 else [])


def tt8b_cp(cp, seq, measured):
    dp = 8 // cp
    return {"source": "torchtitan Table 2", "label": f"8B FSDP {dp} CP {cp} seq {seq}, compile+fp8",
            "measured": measured, "eager": False,
            "args": ["--model", "llama3-8b", "--gpus", "8", "--seq-length", str(seq),
                     "--micro-batch", "1", "--global-batch", str(dp)] + tt_cp(cp) + TT + FULL +
            FP8}


def tt405b(label, table, measured, schedule, cp=1, seq=8192, local_batch=32):
    # torchtitan 9dec370 splits the local batch into pipeline_parallel_microbatches, by default
    # the PP degree (8): Table 5's local batch 32 ran as 8 micro-batches of 4, Table 6's 8 as 8
    # of 1 (torchtitan/parallelisms/pipeline_llama.py, pipelining_utils.py).
    dp = 8 // cp
    micro_batch = local_batch // 8
    args = ["--model", "llama3.1-405b", "--gpus", "512", "--tp", "8", "--sequence-parallel",
            "--pp", "8", "--seq-length", str(seq), "--micro-batch", str(micro_batch),
            "--global-batch", str(local_batch * dp)] + tt_cp(cp) + schedule + TT + FULL + FP8
    return {"source": f"torchtitan Table {table}", "label": label, "measured": measured,
            "eager": False, "args": args}


def torchtitan_rows():
    return [
        tt8b(8, 1, "8B FSDP 8, b 2, op SAC, eager", 82.4, [], True),
        tt8b(8, 1, "8B FSDP 8, b 2, op SAC, compile", 77.0, [], False),
        tt8b(8, 1, "8B FSDP 8, b 2, op SAC, compile+fp8", 76.8, FP8, False),
        tt8b_cp(1, 32768, 83.9),
        tt8b_cp(2, 65536, 84.2),
        tt8b_cp(4, 131072, 84.0),
        tt8b_cp(8, 262144, 84.5),
        tt8b(128, 3, "8B FSDP 128, b 2, op SAC, eager", 67.0, [], True),
        tt8b(128, 3, "8B FSDP 128, b 2, op SAC, compile", 62.0, [], False),
        tt8b(128, 3, "8B FSDP 128, b 2, op SAC, compile+fp8", 61.8, FP8, False),
        {"source": "torchtitan Table 4", "label": "70B FSDP 32 TP 8, b 16, full AC, compile+fp8",
         "measured": 71.9, "eager": False,
         "args": ["--model", "llama3-70b", "--gpus", "256", "--tp", "8", "--sequence-parallel",
                  "--micro-batch", "16", "--global-batch", "512"] + TT + FULL + FP8},
        tt405b("405B FSDP 8 TP 8 PP 8 1F1B, 8 micro-batches of 4, full AC, compile+fp8+AsyncTP", 5, 82.5,
               ["--schedule", "1f1b"]),
        tt405b("405B FSDP 8 TP 8 PP 8 interleaved v2, full AC, compile+fp8+AsyncTP", 5, 72.7,
               ["--schedule", "interleaved", "--virtual-stages", "2"]),
        tt405b("405B 4D FSDP 8 CP 1 seq 32K 1F1B, 8 micro-batches of 1, full AC, compile+fp8+AsyncTP", 6, 75.3,
               ["--schedule", "1f1b"], 1, 32768, 8),
        tt405b("405B 4D FSDP 4 CP 2 seq 64K 1F1B", 6, 75.9, ["--schedule", "1f1b"], 2, 65536, 8),
        tt405b("405B 4D FSDP 2 CP 4 seq 128K 1F1B", 6, 77.1, ["--schedule", "1f1b"], 4, 131072, 8),
        tt405b("405B 4D FSDP 1 CP 8 seq 256K 1F1B", 6, 84.9, ["--schedule", "1f1b"], 8, 262144, 8),
    ]


META = ["--model", "llama3.1-405b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "16",
        "--micro-batch", "1", "--global-batch", "2048", "--sequence-parallel", "--zero", "2",
        "--grad-reduce-sync", "step",
        "--schedule", "interleaved", "--virtual-stages", "8",
        "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
        "--fallback", "analytic"]


def run(eventsim, args):
    out = subprocess.run([eventsim, "simulate"] + args + ["--json"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"
    return json.loads(out.stdout), None


def breakdown(j):
    """The busiest stage's components, GiB (summary JSON `stages[i].memory`)."""
    stage = max(j["stages"], key=lambda s: s["peak_memory_bytes"])
    m = stage["memory"]
    return stage["stage"], {k: v / GIB for k, v in m.items() if k.endswith("_bytes")}, m


STAGE_COLUMNS = ["weights", "gradients", "optimizer", "activations", "pending_reduction",
                 "tp_cp_buffer", "pp_buffer", "dp_buffer", "embedding_gradient", "loss_transient",
                 "workspace", "overhead", "device"]


def print_stages(j):
    """Every stage's memory components (summary JSON `stages[i].memory`), GiB, as a table."""
    print("| stage | chunks in flight | " + " | ".join(STAGE_COLUMNS) + " |")
    print("|---" * (len(STAGE_COLUMNS) + 2) + "|")
    for stage in j["stages"]:
        m = stage["memory"]
        print(f"| {stage['stage']} | {m['activations_in_flight']} | " +
              " | ".join(f"{m[c + '_bytes'] / GIB:.2f}" for c in STAGE_COLUMNS) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eventsim", default="build/eventsim")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--fsdp-wrap", default=WRAP, choices=["root", "separate", ""],
                        help="--fsdp-wrap of the torchtitan rows (default: root, see WRAP; \"\" "
                             "passes none, for binaries from before the flag)")
    parser.add_argument("--stages", action="store_true",
                        help="print every pipeline stage's breakdown of Meta's plans")
    args = parser.parse_args()
    wrap = ["--fsdp-wrap", args.fsdp_wrap] if args.fsdp_wrap else []

    print("| source | run | measured GiB | allocated GiB | reserved GiB | error (reserved) |")
    print("|---|---|---|---|---|---|")
    errs = {True: [], False: []}
    for row in torchtitan_rows():
        j, err = run(args.eventsim, row["args"] + wrap)
        if j is None:
            print(f"| {row['source']} | {row['label']} | {row['measured']} | eventsim: {err} | | |")
            continue
        alloc = j["allocated_memory_bytes"] / GIB
        res = j["reserved_memory_bytes"] / GIB
        e = res / row["measured"] - 1
        errs[row["eager"]].append((abs(e), row["label"]))
        print(f"| {row['source']} | {row['label']} | {row['measured']:.1f} | {alloc:.1f} | "
              f"{res:.1f} | {100 * e:+.1f}% |")
    for eager, name in ((True, "eager rows"), (False, "compile/AsyncTP rows")):
        if errs[eager]:
            worst = max(errs[eager])
            print(f"\n{name}: mean |error| {100 * sum(e for e, _ in errs[eager]) / len(errs[eager]):.1f}%"
                  f", worst {100 * worst[0]:.1f}% ({worst[1]}), {len(errs[eager])} rows")
    every = errs[True] + errs[False]
    if every:
        worst = max(every)
        print(f"all rows: mean |error| {100 * sum(e for e, _ in every) / len(every):.1f}%, "
              f"worst {100 * worst[0]:.1f}% ({worst[1]}), {len(every)} rows")

    print("\nMeta's Llama 3.1 405B plans (trained; the verdict is the row):")
    for gpus in (8192, 16384):
        j, err = run(args.eventsim, META + ["--gpus", str(gpus)])
        if j is None:
            print(f"{gpus} GPUs: eventsim: {err}")
            continue
        stage, gib, m = breakdown(j)
        usable = j.get("usable_memory_bytes", 0) / GIB
        print(f"{gpus} GPUs: busiest stage {stage}: " +
              ", ".join(f"{k[:-6]} {v:.2f}" for k, v in gib.items() if v > 0.005) +
              ("; at a bucket's cast (SP: the kept gather buffer alone, half the SP term)"
               if m.get("peak_at_bucket_cast") else "") +
              f"; usable {usable:.2f} GiB; verdict {j.get('memory_verdict', '?')}" +
              (f" (margin to the card {j['device_margin_bytes'] / GIB:.2f} GiB)"
               if "device_margin_bytes" in j else ""))
        if args.stages:
            print_stages(j)


if __name__ == "__main__":
    sys.exit(main())
