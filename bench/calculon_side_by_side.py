"""Side by side with Calculon over one strategy space: candidates and fitting ones per CPU second.

Calculon (https://github.com/calculon-ai/calculon, Apache-2.0) is not bundled and not fetched by
this script: fetching it is the user's step (bench/RESULTS.md, "Calculon side by side"):

    git clone https://github.com/calculon-ai/calculon /path/to/calculon
    pip install pandas psutil            # Calculon's own imports
    python3 bench/calculon_side_by_side.py --calculon /path/to/calculon [--check]

Like with like:
  * The same space. Calculon's enumeration (`llm-all-executions`) is cut to the dimensions
    eventsim has, each mapped one to one: tensor x pipeline x data sizes, pipeline interleaving
    (1 = eventsim's dapple, v > 1 = interleaved with v chunks), recomputation (full / attn_only /
    none = full / selective / none), optimizer sharding (= ZeRO 0/1), TP communication (ar /
    rs_ag = sequence parallelism off / on; rs_ag only where TP > 1, as eventsim enumerates it),
    data-parallel overlap, every micro-batch size Calculon finds valid. Left at one value:
    Calculon's p2p_rs_ag, TP overlap (none), all-gather redo (off), offloads (off), fused
    activation (on), and the network of each dimension, fixed to eventsim's Megatron placement
    (TP innermost, then DP, then PP; a dimension uses the fast NVLink tier while the product so
    far fits in it). eventsim is given the same values as search flags (and
    --allow-cross-node-tp, since Calculon places TP 16 and 32 over the network).
  * Valid means fits for both: Calculon's fitting candidates are those it returns statistics for
    (the others raise Llm.Error: out of memory or a broken rule); eventsim's are its `ok` count.
    Both fit against the same memory: Calculon's first memory tier is set to eventsim's card
    capacity (the cluster's device `memory_gib`: 79.15 GiB for the A100 80GB, CUDA's total, not
    the datasheet's 80 GiB that Calculon's a100_80g.json holds).
    Per candidate rates charge both tools the matched space's size (Calculon's count of it).
  * A sample over the whole space, not a prefix: Calculon runs every k-th candidate of the
    matched space with k a prime coprime to its size (a stride that walks the whole space once),
    so the fitting share is representative. eventsim runs the whole matched space, both
    exhaustively (every fitting candidate simulated and ranked) and with --top 10 (pruned).
  * --check first checks the harness against Calculon's own command: on a small case
    (megatron-126M on 4 GPUs, batch 8, no offload tier) the harness's evaluation of Calculon's
    full enumeration must find the same executions, the same fitting count and the same best
    sample rate as `calculon llm-optimal-execution`.
Both run on one core (Calculon in this process, eventsim with --threads 1, CPU time of each).
"""

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CALCULON_RECOMPUTE = ("full", "attn_only", "none")


def fail(message):
    print(f"calculon_side_by_side: {message}", file=sys.stderr)
    sys.exit(2)


def import_calculon(checkout):
    sys.path.insert(0, checkout)
    try:
        import calculon.io
        from calculon.llm import Llm, System
        from calculon.llm.all_executions import AllExecutions
    except ImportError as error:
        fail(f"{checkout} holds no importable Calculon ({error}); see the fetch step in --help")
    return calculon.io, Llm, System, AllExecutions


def megatron_networks(tp, dp, pp, fast_tier_size):
    """Calculon's network index per dimension for eventsim's placement: TP, then DP, then PP."""
    networks = []
    inner = 1
    for size in (tp, dp, pp):
        inner *= size
        networks.append(0 if inner <= fast_tier_size else 1)
    tn, dn, pn = networks
    return tn, pn, dn


def matched_executions(Llm, app, syst, gpus, batch, datatype):
    """Calculon execution tuples of the space eventsim's flags describe (see the module doc)."""
    fast_tier = syst.get_network(0).size
    for tp in Llm.get_all_tensor_parallelisms(gpus, app.hidden, app.attn_heads):
        for pp in Llm.get_all_pipeline_parallelisms(gpus, tp, app.num_blocks):
            dp = Llm.get_data_parallelism(gpus, tp, pp)
            if batch % dp != 0:
                continue
            tn, pn, dn = megatron_networks(tp, dp, pp, fast_tier)
            for ppint in Llm.get_valid_pipeline_interleavings(app.num_blocks, pp):
                for recompute in CALCULON_RECOMPUTE:
                    for sharding in ((True, False) if dp > 1 else (False,)):
                        for comm in (("ar", "rs_ag") if tp > 1 else ("ar",)):
                            for dp_overlap in ((True, False) if dp > 1 else (False,)):
                                for micro in Llm.get_valid_microbatch_sizes(
                                        app.seq_size, tp, dp, batch, pp):
                                    yield (gpus, tp, pp, dp, tn, pn, dn, batch, micro, datatype,
                                           True, "multihead", recompute, ppint, sharding, comm,
                                           "none", False, dp_overlap, False, False, False, True)


def eventsim_space(Llm, app, gpus, batch):
    """eventsim search flags holding the same dimension values as matched_executions."""
    micro_batches, virtual_stages = set(), set()
    for tp in Llm.get_all_tensor_parallelisms(gpus, app.hidden, app.attn_heads):
        for pp in Llm.get_all_pipeline_parallelisms(gpus, tp, app.num_blocks):
            dp = Llm.get_data_parallelism(gpus, tp, pp)
            if batch % dp != 0:
                continue
            micro_batches.update(Llm.get_valid_microbatch_sizes(app.seq_size, tp, dp, batch, pp))
            virtual_stages.update(v for v in Llm.get_valid_pipeline_interleavings(
                app.num_blocks, pp) if v > 1)
    join = lambda values: ",".join(str(v) for v in sorted(values))
    return ["--micro-batch", join(micro_batches), "--schedule", "dapple,interleaved",
            "--virtual-stages", join(virtual_stages), "--recompute", "none,selective,full",
            "--sequence-parallel", "off,on", "--zero", "0,1", "--dp-overlap", "off,on",
            "--allow-cross-node-tp"]


def prime_stride(count, samples):
    """A prime stride coprime to count: indices i*k mod count for i < samples are distinct."""
    k = max(2, count // max(samples, 1))
    while True:
        if all(k % d for d in range(2, int(math.isqrt(k)) + 1)) and count % k != 0:
            return k
        k += 1


def evaluate(Llm, app, syst, execution):
    """What Calculon's own searches do per candidate: compile, run, statistics (None: rejected)."""
    import logging
    try:
        model = Llm(app, logging.Logger("sub"))
        model.compile(syst, Llm.Execution(*execution))
        model.run(syst)
        return model.get_stats_values()
    except Llm.Error:
        return None


def device_memory_gib(cluster):
    """The card capacity eventsim fits against: the cluster's device's `memory_gib` (GiB)."""
    import yaml  # PyYAML, from Debian's python3-yaml (scripts/install_deps.sh)
    configs = os.path.join(REPO, "configs")
    def load(path):
        try:
            with open(path) as handle:
                return yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as error:
            fail(f"cannot read {path} ({error})")
    cluster_path = os.path.join(configs, "clusters", f"{cluster}.yaml")
    device = (load(cluster_path).get("node") or {}).get("device")
    if not isinstance(device, str):
        fail(f"{cluster_path} names no bundled device (node.device)")
    device_path = os.path.join(configs, "devices", f"{device}.yaml")
    gib = (load(device_path).get("datasheet") or {}).get("memory_gib")
    if gib is None:
        fail(f"{device_path} has no datasheet.memory_gib")
    return float(gib)


def run_calculon(calculon_io, Llm, System, checkout, args):
    app = Llm.Application(calculon_io.read_json_file(os.path.join(checkout, args.calculon_model)))
    system_json = calculon_io.read_json_file(os.path.join(checkout, args.calculon_system))
    system_gib = system_json["mem1"]["GiB"]
    system_json["mem1"]["GiB"] = args.memory_gib  # the capacity eventsim fits against (above)
    syst = System(system_json)
    space = list(matched_executions(Llm, app, syst, args.gpus, args.global_batch, args.datatype))
    samples = min(args.samples, len(space))
    stride = prime_stride(len(space), samples)
    start = time.process_time()
    fitting = sum(evaluate(Llm, app, syst, space[(i * stride) % len(space)]) is not None
                  for i in range(samples))
    seconds = time.process_time() - start
    return app, len(space), samples, stride, fitting, seconds, system_gib


def run_eventsim(binary, args, space, top):
    command = ([binary, "search", "--model", args.model, "--cluster", args.cluster, "--gpus",
                str(args.gpus), "--global-batch", str(args.global_batch), "--fallback", "analytic",
                "--threads", "1", "--json", "--top", str(top)] + space)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        fail(f"eventsim search failed ({result.returncode}): {result.stderr.strip()}")
    counts = json.loads(result.stdout)["counts"]
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return counts["candidates"], counts["ok"], seconds


def check_harness(calculon_io, Llm, System, AllExecutions, checkout):
    """The harness's evaluation against `calculon llm-optimal-execution` on a small case."""
    model, gpus, batch = os.path.join(checkout, "models/megatron-126M.json"), 4, 8
    app = Llm.Application(calculon_io.read_json_file(model))
    # The A100 system without its second memory tier: no offload variants, 6,424 executions.
    system_json = calculon_io.read_json_file(os.path.join(checkout, "systems/a100_80g.json"))
    system_json["mem2"]["GiB"] = 0
    syst = System(system_json)
    rate_index = Llm.get_stats_fields().index("sample_rate")
    total, rates = 0, []
    for execution in AllExecutions.all_executions(app, syst, gpus, batch, "float16", [True]):
        total += 1
        stats = evaluate(Llm, app, syst, execution)
        if stats is not None:
            rates.append(stats[rate_index])
    with tempfile.TemporaryDirectory() as scratch:
        output, system = os.path.join(scratch, "best.json"), os.path.join(scratch, "system.json")
        with open(system, "w") as handle:
            json.dump(system_json, handle)
        result = subprocess.run(
            [sys.executable, os.path.join(checkout, "bin", "calculon"), "llm-optimal-execution",
             model, str(gpus), str(batch), "float16", system, output, "-c", "1"],
            capture_output=True, text=True, cwd=checkout,
            env=dict(os.environ, PYTHONPATH=checkout))
        if result.returncode != 0:
            fail(f"calculon llm-optimal-execution failed: {result.stderr.strip()[-300:]}")
        log = result.stdout + result.stderr
        with open(output) as handle:
            best = json.load(handle)["0"]["stats"]["sample_rate"]

    def logged(name):
        found = re.search(rf"{name} executions: (\d+)", log)
        return int(found.group(1)) if found else None

    ok = (logged("Total") == total and logged("Good") == len(rates)
          and math.isclose(max(rates), best, rel_tol=1e-12))
    print(f"check: harness {total} executions, {len(rates)} fitting, best {max(rates):.6g} "
          f"samples/s; llm-optimal-execution {logged('Total')}, {logged('Good')}, {best:.6g}: "
          f"{'same' if ok else 'DIFFERENT'}")
    if not ok:
        fail("the harness does not reproduce Calculon's own search")


def rate(count, seconds):
    return count / seconds if seconds > 0 else float("inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calculon", default=os.environ.get("CALCULON_DIR", ""),
                        help="the user's Calculon checkout (or $CALCULON_DIR)")
    parser.add_argument("--eventsim", default=os.path.join(REPO, "build", "eventsim"))
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1024,
                        help="a multiple of every data-parallel size, so that Calculon's batch "
                             "(the largest multiple of D not above it) is the same for every D")
    parser.add_argument("--samples", type=int, default=3000,
                        help="Calculon candidates run, a prime stride through the matched space")
    parser.add_argument("--check", action="store_true",
                        help="first check the harness against `calculon llm-optimal-execution`")
    parser.add_argument("--calculon-model", default="models/gpt3-175B.json")
    parser.add_argument("--calculon-system", default="systems/a100_80g.json")
    parser.add_argument("--datatype", default="float16")
    parser.add_argument("--model", default="gpt3-175b")
    parser.add_argument("--cluster", default="dgx-a100")
    args = parser.parse_args()

    if not args.calculon or not os.path.isdir(os.path.join(args.calculon, "calculon")):
        fail(f"no Calculon checkout at '{args.calculon}' (clone "
             "https://github.com/calculon-ai/calculon and pass --calculon DIR or set CALCULON_DIR)")
    if not os.access(args.eventsim, os.X_OK):
        fail(f"no eventsim binary at {args.eventsim} (build first, or pass --eventsim)")
    args.memory_gib = device_memory_gib(args.cluster)
    calculon_io, Llm, System, AllExecutions = import_calculon(args.calculon)
    if args.check:
        check_harness(calculon_io, Llm, System, AllExecutions, args.calculon)

    app, c_space, c_run, stride, c_fit, c_seconds, system_gib = run_calculon(
        calculon_io, Llm, System, args.calculon, args)
    space = eventsim_space(Llm, app, args.gpus, args.global_batch)
    print(f"space: {args.model} on {args.gpus} GPUs, global batch {args.global_batch}; "
          f"eventsim flags: {' '.join(space)}")
    print(f"memory: both fit against {args.memory_gib:g} GiB a GPU (eventsim's {args.cluster} "
          f"device memory_gib; Calculon's {args.calculon_system} mem1 set to it from "
          f"{system_gib:g})")
    c_rate, c_fit_rate = rate(c_run, c_seconds), rate(c_fit, c_seconds)
    print(f"calculon: {c_space} candidates in the matched space; ran {c_run} (stride {stride}), "
          f"{c_fit} fit ({100.0 * c_fit / c_run:.1f}%), {c_seconds:.2f} s CPU: "
          f"{c_rate:.0f} candidates/s, {c_fit_rate:.1f} fitting/s")
    for label, top in (("exhaustive", 0), ("--top 10", 10)):
        e_total, e_fit, e_seconds = run_eventsim(args.eventsim, args, space, top)
        # eventsim's own count also holds the (M, P, D, micro-batch) combinations that Calculon
        # never enumerates (a micro-batch not dividing B/D): per candidate, both are charged
        # the matched space's size.
        print(f"eventsim {label}: {e_total} candidates enumerated, {e_fit} fit, {e_seconds:.2f} s "
              f"CPU: {rate(c_space, e_seconds) / c_rate:.0f}x calculon per matched candidate, "
              f"{rate(e_fit, e_seconds) / max(c_fit_rate, 1e-12):.0f}x per fitting candidate")


if __name__ == "__main__":
    main()
