#!/usr/bin/env python3
"""Writes a profile database of N distinct compute entries (issue 33, item 2: load time and memory
of a large profile). Usage: make_profile.py N OUT.yaml. 400,000 entries make about 58 MB."""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write('schema_version: 1\nmetadata:\n  backend: cpu\n  date: "2026-11-25T00:00:00Z"\n'
            '  world_size: 1\n  ranks_per_node: 1\n  hosts: [h]\n  devices: [d]\n'
            '  versions: {}\nevents:\n')
    for i in range(n):
        m, k = 64 + 64 * (i % 1000), 64 + 64 * (i // 1000)
        f.write(f'  - signature: "gemm m={m} n=4096 k={k} layout=nt dtype=bf16"\n'
                f'    kind: compute\n'
                f'    time_us: {{median: {10 + i % 97}.5, min: {9 + i % 97}.25, '
                f'max: {12 + i % 97}.75, stddev: 0.125, count: 20}}\n')
