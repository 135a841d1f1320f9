"""Fit rows from a profile database: the measured collectives of an eventprof profile (or of one
that `eventsim import-nccl-tests` wrote) as the rows scripts/fit_network.py fits the cluster's
`nccl:` terms to. Used by fit_network.py --profile; docs/NETWORK.md, "Fitting from a profile".

A row is (op, ranks, ranks per node, bytes, time): the collective as it RAN on the profiling
cluster, which is not always the event the record is filed under. eventprof measures an event
whose group it cannot hold (16 ranks, 8 a node) on a smaller group (4 ranks, 2 on each of 2
nodes) and files the time scaled by the ring volume factor under the event's own placement
(`scaled: true`, `measured_group_size`; profiler/group_planner.h). A fit must cost what ran, so a
scaled record becomes its measured group's row, its time divided by the factor again. The
profile keeps only the measured group's size; its nodes and ranks per node follow from the
planner's rule 3 on the profiling cluster (world_size / ranks_per_node nodes of ranks_per_node),
worked out again below; a record whose measured size disagrees with that rule is left out, with
a note.

Records left out: compute events (silently); placements whose nodes are not all filled alike (3
ranks as 2 + 1: `eventsim collective` costs whole nodes; with a note on stderr). All-to-all and
broadcast are never scaled (eventprof refuses to), so their records are always the group that
ran. Send/receive (kind p2p) is costed as `eventsim collective --op sendrecv` over its 2 ranks.
"""
import os
import subprocess
import sys
import tempfile

import yaml

# Profile kind -> `eventsim collective --op`.
OPS = {"allreduce": "all-reduce", "allgather": "all-gather", "reduce_scatter": "reduce-scatter",
       "alltoall": "alltoall", "broadcast": "broadcast", "p2p": "sendrecv"}
MAX_DIRECT = 8  # profiler/group_planner.h kMaxDirectGroupSize
CBOR_MAGIC = b"\xd9\xd9\xf7"  # io/profile_cbor.h


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
    """The profile's YAML content; a binary (CBOR) profile is converted by eventsim first."""
    try:
        with open(path, "rb") as f:
            head = f.read(3)
    except OSError as e:
        raise RowsError(f"{path}: cannot read the profile ({e.strerror})")
    if head == CBOR_MAGIC:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "profile.yaml")
            done = subprocess.run([eventsim, "convert-profile", path, out], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise RowsError(f"{path}: {done.stderr.strip().splitlines()[-1]}")
            with open(out) as f:
                return yaml.safe_load(f)
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RowsError(f"{path}: not a profile database ({str(e).splitlines()[0]})")
    if not isinstance(doc, dict) or "events" not in doc or "metadata" not in doc:
        raise RowsError(f"{path}: not a profile database (no metadata and events)")
    return doc


def measured_shape(nodes, rpn, group, hosts, host_rpn):
    """profiler/group_planner.cpp's rule 3 on a cluster of `hosts` nodes of `host_rpn` ranks:
    the largest uniform nodes x ranks shape of the event's link type, then the most ranks per
    node. Returns (nodes, ranks per node) of the group eventprof measured."""
    best = (0, 0)
    max_nodes = 1 if nodes == 1 else min(nodes, hosts)
    for k in range(1 if nodes == 1 else 2, max_nodes + 1):
        for r in range(1, rpn + 1):
            if k * r > MAX_DIRECT or k * r < 2 or r > host_rpn:
                continue
            if k * r > best[0] * best[1] or (k * r == best[0] * best[1] and r > best[1]):
                best = (k, r)
    return best


def profile_rows(path, eventsim, note=lambda text: print(text, file=sys.stderr)):
    """[(op, ranks, ranks_per_node, [(bytes, time_us), ...])], one entry per measured layout, in
    the profile's order; the time is each record's median."""
    doc = load_profile(path, eventsim)
    meta = doc["metadata"] or {}
    host_rpn = int(meta.get("ranks_per_node") or 0)
    world = int(meta.get("world_size") or 0)
    if host_rpn <= 0 or world < host_rpn or world % host_rpn != 0:
        raise RowsError(f"{path}: metadata world_size {world} and ranks_per_node {host_rpn} are "
                        f"not whole nodes (the profiling cluster's layout)")
    hosts = world // host_rpn
    sets = {}
    for e in doc["events"] or []:
        kind = e.get("kind")
        if kind not in OPS:
            continue
        sig = e["signature"]
        group, nodes, rpn = int(e["group_size"]), int(e["nodes"]), int(e["ranks_per_node"])
        measured = int(e["measured_group_size"])
        time_us = float(e["time_us"]["median"])
        if e.get("scaled") or nodes > hosts or rpn > host_rpn:
            k, r = measured_shape(nodes, rpn, group, hosts, host_rpn)
            if k * r != measured:
                note(f"{path}: '{sig}': measured on {measured} ranks, not the {k} x {r} the "
                     f"profiler's rule gives on {hosts} x {host_rpn}: left out")
                continue
            time_us /= bus_factor(kind, group) / bus_factor(kind, measured)
            group, nodes, rpn = measured, k, r
        if group != nodes * rpn:
            note(f"{path}: '{sig}': {group} ranks on {nodes} nodes are not whole nodes of {rpn}: "
                 f"left out")
            continue
        if kind == "p2p":
            group = 2  # sendrecv over the pair: one node of 2, or 2 nodes of 1
        sets.setdefault((OPS[kind], group, rpn), []).append((int(e["bytes"]), time_us))
    if not sets:
        raise RowsError(f"{path}: no measured collective to fit (the profile has no "
                        f"communication records eventsim collective can cost)")
    return [(op, g, r, rows) for (op, g, r), rows in sets.items()]
