"""Fit rows from a profile database: the measured collectives of an eventprof profile (or of one
that `eventsim import-nccl-tests` wrote) as the rows scripts/fit_network.py fits the cluster's
`nccl:` terms to. Used by fit_network.py --profile; docs/NETWORK.md, "Fitting from a profile".

A row is (op, ranks, ranks per node, bytes, time): the collective as it RAN on the profiling
cluster, which is not always the event the record is filed under. eventprof measures an event
whose group it cannot hold (16 ranks, 8 a node) on a smaller group (4 ranks, 2 on each of 2
nodes) and files the time scaled by the ring volume factor under the event's own placement
(`scaled: true`; profiler/group_planner.h). A fit must cost what ran, so a record becomes its
measured group's row (`measured_group_size`, `measured_nodes`, `measured_ranks_per_node`, which
the profile records since session 15), a scaled one with its time divided by the factor again.

The profile is always read through `eventsim convert-profile` (YAML or binary): eventsim's loader
checks it, and fills the measured layout of a profile written before session 15 by its fallback
rule (events/measured_layout.h: the planner's rule on the metadata's cluster), so the rule has one
copy, in C++. A record whose layout that rule does not explain has none and is left out, with a
note.

Records left out: compute events (silently); layouts whose nodes are not all filled alike (3
ranks as 2 + 1: `eventsim collective` costs whole nodes; with a note on stderr). Send/receive
(kind p2p) is costed as `eventsim collective --op sendrecv` over its 2 ranks.
"""
import os
import subprocess
import sys
import tempfile

import yaml

# Profile kind -> `eventsim collective --op`.
OPS = {"allreduce": "all-reduce", "allgather": "all-gather", "reduce_scatter": "reduce-scatter",
       "alltoall": "alltoall", "broadcast": "broadcast", "p2p": "sendrecv"}


class RowsError(Exception):
    """Bad input: the caller prints one line and exits 2."""


def bus_factor(kind, n):
    """nccl-tests' bus factor (events/collectives/*.cpp): what the ring factor is the ratio of."""
    if kind == "allreduce":
        return 2 * (n - 1) / n
    if kind in ("allgather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def load_profile(path, eventsim):
    """The profile's content as eventsim writes it (YAML), read through `eventsim
    convert-profile`: checked by eventsim's loader, the measured layouts filled (above)."""
    if not os.path.isfile(path):
        raise RowsError(f"{path}: cannot read the profile (no such file)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "profile.yaml")
        done = subprocess.run([eventsim, "convert-profile", path, out, "--format", "yaml"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"eventsim exit {done.returncode}"]
            raise RowsError(lines[-1].removeprefix("eventsim: error: "))
        with open(out) as f:
            doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or "events" not in doc or "metadata" not in doc:
        raise RowsError(f"{path}: not a profile database (no metadata and events)")
    return doc


def profile_rows(path, eventsim, note=lambda text: print(text, file=sys.stderr)):
    """[(op, ranks, ranks_per_node, [(bytes, time_us), ...])], one entry per measured layout, in
    the profile's order; the time is each record's median."""
    doc = load_profile(path, eventsim)
    sets = {}
    for e in doc["events"] or []:
        kind = e.get("kind")
        if kind not in OPS:
            continue
        sig = e["signature"]
        group = int(e["group_size"])
        measured = int(e["measured_group_size"])
        if "measured_nodes" not in e:
            note(f"{path}: '{sig}': the profile does not say where it was measured, nor does the "
                 f"planner's rule on its cluster explain {measured} ranks: left out")
            continue
        nodes, rpn = int(e["measured_nodes"]), int(e["measured_ranks_per_node"])
        time_us = float(e["time_us"]["median"])
        if measured != group:  # scaled by eventprof: back to the group that ran
            time_us /= bus_factor(kind, group) / bus_factor(kind, measured)
        if measured != nodes * rpn:
            note(f"{path}: '{sig}': measured on {measured} ranks over {nodes} nodes, not whole "
                 f"nodes of {rpn}: left out")
            continue
        sets.setdefault((OPS[kind], measured, rpn), []).append((int(e["bytes"]), time_us))
    if not sets:
        raise RowsError(f"{path}: no measured collective to fit (the profile has no "
                        f"communication records eventsim collective can cost)")
    return [(op, g, r, rows) for (op, g, r), rows in sets.items()]
