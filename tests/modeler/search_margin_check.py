"""The search's memory margin, in JSON and in the table, against simulate's for the same plan.

Usage: search_margin_check.py EVENTSIM SEARCH-ARGS...   (run by ctest: search.cli.memory_margin)

For every valid candidate the margin is the usable bytes (device memory x (1 - headroom), rounded
down) less its peak; the best plan's equals what `eventsim simulate` reports for it with the same
headroom; the table's "margin GiB" column is the same figure in GiB.
"""
import json
import math
import shlex
import subprocess
import sys


def main() -> int:
    exe, args = sys.argv[1], sys.argv[2:]
    headroom = 0.1
    report = json.loads(subprocess.run([exe, "search", *args, "--memory-headroom", str(headroom),
                                        "--top", "0", "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    usable = report["usable_memory_bytes"]
    assert usable == math.floor(report["device_memory_bytes"] * (1 - headroom)), report
    checked = 0
    for c in report["candidates"]:
        if c["status"] == "invalid":
            continue
        assert c["memory_headroom_bytes"] == usable - c["peak_memory_bytes"], c
        assert (c["memory_headroom_bytes"] < 0) == (c["status"] == "oom"), c
        # The margin to the card, and the verdict simulate would give (an "oom" status above the
        # usable share that still fits the card is "over_headroom").
        device_margin = report["device_memory_bytes"] - c["peak_memory_bytes"]
        assert c["device_margin_bytes"] == device_margin, c
        verdict = ("fits" if c["memory_headroom_bytes"] >= 0 else
                   "over_headroom" if device_margin >= 0 else "oom")
        assert c["memory_verdict"] == verdict, c
        checked += 1
    assert checked > 0, "no valid candidate"
    best = next(c for c in report["candidates"] if c["rank"] == 1)
    command = shlex.split(report["simulate_command"])[1:]
    sim = json.loads(subprocess.run([exe, *command, "--memory-headroom", str(headroom), "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    assert sim["memory_margin_bytes"] == best["memory_headroom_bytes"], (sim, best)
    assert sim["device_margin_bytes"] == best["device_margin_bytes"], (sim, best)
    assert sim["memory_verdict"] == best["memory_verdict"] == "fits", (sim, best)
    assert sim["fits_device_memory"], sim
    table = subprocess.run([exe, "search", *args, "--memory-headroom", str(headroom), "--top", "1"],
                           check=True, capture_output=True, text=True).stdout.splitlines()
    header = next(i for i, line in enumerate(table) if "margin GiB" in line)
    row = table[header + 1].split()
    # The margin column follows the peak column (techniques and status vary in words).
    peak = f"{best['peak_memory_bytes'] / 2**30:.2f}"
    shown = float(row[row.index(peak) + 1])
    assert abs(shown - best["memory_headroom_bytes"] / 2**30) <= 0.005, (row, best)
    print(f"{checked} candidates; best margin {best['memory_headroom_bytes']} bytes = simulate's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
