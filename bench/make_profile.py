#!/usr/bin/env python3
"""Writes a profile database of N distinct compute entries (issue 33, item 2: load time and memory
of a large profile). Usage: make_profile.py N OUT.yaml [EVENTS.yaml ...]. 400,000 entries make
about 58 MB. With events files (`eventsim events ... -o EVENTS.yaml`) their events come first,
with made-up times, so that a simulation of those runs finds every event it needs in the profile
(and the N filler entries after them are never looked up)."""
import re
import sys

n, out, event_files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

wanted, seen = [], set()
for path in event_files:
    with open(path) as f:
        for sig in re.findall(r'^  - signature: "([^"]+)"$', f.read(), re.M):
            if sig not in seen:
                wanted.append(sig)
                seen.add(sig)


def entry(i, sig):
    text = (f'  - signature: "{sig}"\n'
            f'    kind: {sig.split()[0] if "bytes=" in sig else "compute"}\n'
            f'    time_us: {{median: {10 + i % 97}.5, min: {9 + i % 97}.25, '
            f'max: {12 + i % 97}.75, stddev: 0.125, count: 20}}\n')
    if "bytes=" not in sig:
        return text
    f = dict(kv.split("=") for kv in sig.split()[1:])
    return text + (f'    group_size: {f["group"]}\n    nodes: {f["nodes"]}\n'
                   f'    ranks_per_node: {f["rpn"]}\n    bytes: {f["bytes"]}\n'
                   f'    measured_group_size: {f["group"]}\n    scaled: false\n'
                   f'    algbw_gb_s: 10.5\n    busbw_gb_s: 20.25\n')


with open(out, "w") as f:
    f.write('schema_version: 1\nmetadata:\n  backend: cpu\n  date: "2026-11-25T00:00:00Z"\n'
            '  world_size: 1\n  ranks_per_node: 1\n  hosts: [h]\n  devices: [d]\n'
            '  versions: {}\nevents:\n')
    for i, sig in enumerate(wanted):
        f.write(entry(i, sig))
    for i in range(n):
        m, k = 64 + 64 * (i % 1000), 64 + 64 * (i // 1000)
        sig = f"gemm m={m} n=4096 k={k} layout=nt dtype=bf16"
        if sig not in seen:
            f.write(entry(i, sig))
