#!/usr/bin/env python3
"""scripts/plot_search.py: bar labels tell apart candidates that differ only in techniques
(hand-written JSON and CSV, and a real `eventsim search` over techniques), the PNG, bad input.

    plot_search_test.py EVENTSIM REPO_DIR WORK_DIR [TEST_CLASS ...]

Exits 77 (ctest: skipped) when matplotlib cannot be imported.
"""
import csv
import json
import os
import subprocess
import sys
import unittest

EVENTSIM, REPO, WORK = sys.argv[1:4]
SCRIPT = os.path.join(REPO, "scripts", "plot_search.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import plot_search  # noqa: E402

BASE = {"strategy": "2M4P8D", "micro_batch": 1, "schedule": "dapple", "virtual_stages": 1,
        "recompute": "none", "sequence_parallel": False, "zero": 0, "status": "ok",
        "peak_memory_bytes": 2**34}
# Variants of one (strategy, micro-batch) that differ only in techniques, best first, with the
# label each must get.
VARIANTS = [
    ({}, "2M4P8D b=1 dapple"),
    ({"recompute": "selective"}, "2M4P8D b=1 dapple rc=sel"),
    ({"recompute": "full"}, "2M4P8D b=1 dapple rc=full"),
    ({"sequence_parallel": True}, "2M4P8D b=1 dapple sp"),
    ({"zero": 1}, "2M4P8D b=1 dapple z1"),
    ({"schedule": "interleaved", "virtual_stages": 2}, "2M4P8D b=1 interleaved v2"),
    ({"schedule": "interleaved", "virtual_stages": 3}, "2M4P8D b=1 interleaved v3"),
    ({"schedule": "interleaved", "virtual_stages": 3, "recompute": "selective",
      "sequence_parallel": True, "zero": 3}, "2M4P8D b=1 interleaved v3 rc=sel sp z3"),
]


def candidates():
    out = []
    for i, (change, _) in enumerate(VARIANTS):
        c = dict(BASE, throughput_samples_per_s=100.0 - i)
        c.update(change)
        out.append(c)
    # An OOM candidate that differs from the first only in ZeRO.
    out.append(dict(BASE, zero=2, status="OOM", throughput_samples_per_s=None,
                    peak_memory_bytes=2**37))
    return out


def write_json(name, cands):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        json.dump({"model": "gpt3-175b", "cluster": "dgx-a100", "gpus": 64, "global_batch": 128,
                   "candidates": cands}, f)
    return path


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


class HandWritten(unittest.TestCase):
    def test_json_labels(self):
        ok, oom, invalid, _ = plot_search.candidates_of(write_json("variants.json", candidates()))
        self.assertEqual([l for l, _ in ok], [l for _, l in VARIANTS])
        self.assertEqual(oom, [("2M4P8D b=1 dapple z2", 2.0**37)])
        self.assertEqual(invalid, 0)

    def test_title_counts_come_from_the_search_totals(self):
        # A --top 10 search of 9,528 invalid, 40 fitting, 3 OOM candidates lists 10 + 3 rows and
        # no invalid ones: the title counts its totals, not the rows.
        meta = {"counts": {"ok": 40, "oom": 3, "invalid": 9528}}
        self.assertEqual(plot_search.counts_text(10, 3, 0, meta, 10, 3),
                         "40 fit, 3 OOM, 9528 invalid (showing 10 + 3 OOM)")
        self.assertEqual(plot_search.counts_text(2, 1, 4, {}, 2, 1), "2 fit, 1 OOM, 4 invalid")

    def test_csv_labels_match_json(self):
        # The --csv file spells sequence parallelism on/off and holds every number as text.
        path = os.path.join(WORK, "variants.csv")
        keys = list(BASE) + ["throughput_samples_per_s"]
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, keys)
            writer.writeheader()
            for c in candidates():
                c["sequence_parallel"] = "on" if c["sequence_parallel"] else "off"
                writer.writerow({k: "" if c[k] is None else c[k] for k in keys})
        ok, oom, _, _ = plot_search.candidates_of(path)
        self.assertEqual([l for l, _ in ok], [l for _, l in VARIANTS])
        self.assertEqual([l for l, _ in oom], ["2M4P8D b=1 dapple z2"])

    def test_png(self):
        out = os.path.join(WORK, "variants.png")
        result = run(write_json("variants.json", candidates()), "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, f"wrote {out}: 8 strategies, 1 OOM\n")
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class Search(unittest.TestCase):
    def test_labels_unique_over_a_real_search(self):
        json_path = os.path.join(WORK, "search.json")
        csv_path = os.path.join(WORK, "search.csv")
        with open(json_path, "w") as f:
            subprocess.run([EVENTSIM, "search", "--model", "gpt2-345m", "--cluster", "dgx-a100",
                            "--gpus", "8", "--global-batch", "32", "--micro-batch", "2",
                            "--schedule", "dapple,interleaved", "--virtual-stages", "2",
                            "--recompute", "none,selective", "--sequence-parallel", "off,on",
                            "--zero", "0,1", "--dp-overlap", "off", "--fallback", "analytic",
                            "--top", "0", "--json",
                            "--csv", csv_path], stdout=f, check=True, timeout=60)
        ok, oom, _, _ = plot_search.candidates_of(json_path)
        labels = [l for l, _ in ok + oom]
        self.assertGreater(len(labels), 20)
        self.assertEqual(len(set(labels)), len(labels))
        # Some strategy appears with several technique sets, each under its own label.
        strategies = [l.split()[0] for l in labels]
        self.assertLess(len(set(strategies)), len(labels))
        csv_ok, csv_oom, _, _ = plot_search.candidates_of(csv_path)
        self.assertEqual(sorted(l for l, _ in csv_ok + csv_oom), sorted(labels))


class BadInput(unittest.TestCase):
    def assert_fails(self, cands, message):
        path = write_json("bad.json", cands)
        result = run(path, "-o", os.path.join(WORK, "bad.png"))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stderr, f"plot_search.py: error: {path}: candidate 0: {message}\n")

    def test_unknown_technique_values(self):
        self.assert_fails([dict(BASE, recompute="partial", throughput_samples_per_s=1.0)],
                          "recompute 'partial' is not none, full or selective")
        self.assert_fails([dict(BASE, sequence_parallel="yes", throughput_samples_per_s=1.0)],
                          "sequence_parallel 'yes' is not true/false or on/off")

    def test_missing_technique(self):
        cand = dict(BASE, throughput_samples_per_s=1.0)
        del cand["zero"]
        self.assert_fails([cand], "'zero' missing")


if __name__ == "__main__":
    try:
        plot_search.import_pyplot()
    except SystemExit:
        print("matplotlib is not installed: skipped")
        sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    unittest.main(argv=sys.argv[:1] + sys.argv[4:])
