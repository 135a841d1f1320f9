#!/usr/bin/env python3
"""Side by side with Calculon: candidates evaluated per CPU second, overall and per valid one.

Calculon (https://github.com/calculon-ai/calculon, Apache-2.0) is not bundled and not fetched by
this script: fetching it is the user's step (bench/RESULTS.md, "Calculon side by side"):

    git clone https://github.com/calculon-ai/calculon /path/to/calculon
    pip install pandas psutil            # Calculon's own imports
    python3 bench/calculon_side_by_side.py --calculon /path/to/calculon

What it measures, both on one core:
  * Calculon: the first --slice candidates of its own `llm-all-executions` enumeration for the
    same model and GPU count (its order, not shuffled, so the slice is fixed), each compiled and
    run through its own model code (`AllExecutions.search`); valid = candidates it returns
    statistics for (the others raise Llm.Error: they do not fit or break a rule).
  * eventsim: `eventsim search` over the same model and GPU count with --threads 1 (the widest
    GPT-3 space of bench/RESULTS.md by default), CPU time of the child process; valid = the
    report's `valid` count (candidates that break no rule and whose memory was checked), fitting =
    its `ok` count (those that fit, what Calculon's valid ones are).

It prints one line per tool and the ratios of the rates (per candidate, per valid one, per fitting
one). The two spaces are not the same candidates (Calculon enumerates weight offload, TP overlap
and network choices eventsim does not have; eventsim's default space here has no --offload): the
comparison is of rates, as issue 14 states its target (>= 100x per valid candidate).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# eventsim's widest GPT-3 1024-GPU space (bench/RESULTS.md, issue 14).
WIDEST = ("--micro-batch 1,2,4,8 --schedule gpipe,dapple,interleaved --virtual-stages "
          + ",".join(str(v) for v in range(2, 49))
          + " --recompute none,selective,full --sequence-parallel off,on --zero 0,1,2,3"
          + " --dp-overlap off,on")


def fail(message):
    print(f"calculon_side_by_side: {message}", file=sys.stderr)
    sys.exit(2)


def run_calculon(checkout, model, system, gpus, max_batch, datatype, slice_size):
    sys.path.insert(0, checkout)
    try:
        import calculon  # noqa: F401
        from calculon.llm import Llm, System
        from calculon.llm.all_executions import AllExecutions
        import calculon.io
    except ImportError as error:
        fail(f"{checkout} holds no importable Calculon ({error}); see the fetch step in --help")
    app = Llm.Application(calculon.io.read_json_file(os.path.join(checkout, model)))
    syst = System(calculon.io.read_json_file(os.path.join(checkout, system)))
    executions = []
    for execution in AllExecutions.all_executions(app, syst, gpus, max_batch, datatype, [True]):
        executions.append(execution)
        if len(executions) == slice_size:
            break
    start = time.process_time()
    good = AllExecutions.search(app, syst, executions)
    seconds = time.process_time() - start
    return len(executions), len(good), seconds


def run_eventsim(binary, model, cluster, gpus, global_batch, space):
    command = ([binary, "search", "--model", model, "--cluster", cluster, "--gpus", str(gpus),
                "--global-batch", str(global_batch), "--fallback", "analytic", "--threads", "1",
                "--top", "10", "--json"] + space.split())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        fail(f"eventsim search failed ({result.returncode}): {result.stderr.strip()}")
    report = json.loads(result.stdout)
    counts = report["counts"]
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return counts["candidates"], counts["valid"], counts["ok"], seconds


def rate(count, seconds):
    return count / seconds if seconds > 0 else float("inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calculon", default=os.environ.get("CALCULON_DIR", ""),
                        help="the user's Calculon checkout (or $CALCULON_DIR)")
    parser.add_argument("--eventsim", default=os.path.join(REPO, "build", "eventsim"))
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1536)
    parser.add_argument("--slice", type=int, default=20000,
                        help="how many of Calculon's candidates to run (its enumeration order)")
    parser.add_argument("--calculon-model", default="models/gpt3-175B.json")
    parser.add_argument("--calculon-system", default="systems/a100_80g.json")
    parser.add_argument("--datatype", default="float16")
    parser.add_argument("--model", default="gpt3-175b")
    parser.add_argument("--cluster", default="dgx-a100")
    parser.add_argument("--space", default=WIDEST, help="eventsim search flags for the space")
    args = parser.parse_args()

    if not args.calculon or not os.path.isdir(os.path.join(args.calculon, "calculon")):
        fail(f"no Calculon checkout at '{args.calculon}' (clone "
             "https://github.com/calculon-ai/calculon and pass --calculon DIR or set CALCULON_DIR)")
    if not os.access(args.eventsim, os.X_OK):
        fail(f"no eventsim binary at {args.eventsim} (build first, or pass --eventsim)")

    c_total, c_valid, c_seconds = run_calculon(args.calculon, args.calculon_model,
                                               args.calculon_system, args.gpus, args.global_batch,
                                               args.datatype, args.slice)
    e_total, e_valid, e_fitting, e_seconds = run_eventsim(args.eventsim, args.model, args.cluster, args.gpus,
                                               args.global_batch, args.space)
    for name, total, valid, seconds in (("calculon", c_total, c_valid, c_seconds),
                                        ("eventsim", e_total, e_valid, e_seconds)):
        print(f"{name}: {total} candidates, {valid} valid, {seconds:.2f} s CPU: "
              f"{rate(total, seconds):.0f} candidates/s, {rate(valid, seconds):.0f} valid/s")
    print(f"eventsim / calculon: {rate(e_total, e_seconds) / rate(c_total, c_seconds):.1f}x per "
          f"candidate, {rate(e_valid, e_seconds) / max(rate(c_valid, c_seconds), 1e-12):.1f}x "
          "per valid candidate")
    # Calculon's valid ones are those that fit (it raises for the others); eventsim's `valid`
    # also counts the OOM ones its memory model checked. Per fitting candidate, the stricter ratio:
    print(f"per fitting candidate: eventsim {e_fitting} fit ({rate(e_fitting, e_seconds):.0f}/s), "
          f"{rate(e_fitting, e_seconds) / max(rate(c_valid, c_seconds), 1e-12):.1f}x calculon")


if __name__ == "__main__":
    main()
