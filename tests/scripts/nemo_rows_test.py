#!/usr/bin/env python3
"""scripts/validate_nemo_rows.py: the published step times converted as the sources' own tables
convert them, the recipes' flags in each row's command, and one row through eventsim.

    nemo_rows_test.py EVENTSIM REPO_DIR
"""
import json
import os
import subprocess
import sys
import unittest

EVENTSIM, REPO = sys.argv[1:3]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import validate_nemo_rows as rows  # noqa: E402


def row(source, model, precision, gpus):
    for r in rows.ROWS:
        if r[:4] == (source, model, precision, gpus):
            return r
    raise KeyError((source, model, precision, gpus))


class PublishedTokens(unittest.TestCase):
    def test_step_times_as_the_tables_convert_them(self):
        # DGXC v25.04.01, 70B BF16 on 1,024 H100s: 14.65 s a step of 2,048 x 8,192 tokens; the
        # table's own throughput row says 1,145,202 tokens/s (16,777,216 / 14.65), 1,118.36 a GPU.
        r = row(rows.DGXC_2504, "llama3-70b", "bf16", 1024)
        self.assertAlmostEqual(rows.published_tokens(r) * 1024, 1145202, delta=1)
        # The 8B FP8 row on 8 GPUs: 8,192 x 128 / 9.33 = 112,388 tokens/s (the table's figure).
        r = row(rows.DGXC_2504, "llama3-8b", "fp8", 8)
        self.assertAlmostEqual(rows.published_tokens(r) * 8, 112388, delta=1)
        # 405B BF16 on 1,024 GPUs: 8,192 x 512 / 19.84 = 211,406 tokens/s, FP8 on 2,048:
        # 8,192 x 1,024 / 12.56 = 667,883 (the table's throughput row, both).
        r = row(rows.DGXC_2504, "llama3.1-405b", "bf16", 1024)
        self.assertAlmostEqual(rows.published_tokens(r) * 1024, 211406, delta=1)
        r = row(rows.DGXC_2504, "llama3.1-405b", "fp8", 2048)
        self.assertAlmostEqual(rows.published_tokens(r) * 2048, 667883, delta=1)
        # Rows published as tokens/s per GPU are taken as they are.
        self.assertEqual(rows.published_tokens(row(rows.MB_2509, "llama3-70b", "fp8-cs", 64)), 1619)


class Commands(unittest.TestCase):
    def test_the_recipes_flags(self):
        cmd = rows.command("b", "dgx-h100", row(rows.DGXC_2504, "llama3-70b", "bf16", 1024))
        text = " ".join(cmd)
        # 1,024 / (TP 4 x PP 4 x CP 2) = 32 data-parallel ranks.
        self.assertIn("--strategy 4M4P32D", text)
        self.assertIn("--cp 2", text)
        self.assertIn("--schedule interleaved --virtual-stages 5", text)
        for flag in ("--sequence-parallel", "--tp-comm-overlap", "--overlap-param-gather",
                     "--grad-reduce-in-bf16", "--dp-overlap", "--zero 1"):
            self.assertIn(flag, text)
        self.assertNotIn("--fp8-recipe", text)
        # TP 1, PP 1: neither SP nor the interleaved schedule.
        text = " ".join(rows.command("b", "dgx-h100", row(rows.DGXC_2504, "llama3-8b", "fp8", 8)))
        self.assertIn("--strategy 1M1P4D", text)
        self.assertNotIn("--sequence-parallel", text)
        self.assertNotIn("--schedule", text)
        self.assertIn("--fp8-recipe delayed", text)
        self.assertNotIn("--account-for", text)
        # 405B on 512: 512 / (8 x 8 x 2) = 4 data-parallel ranks; its 126 layers split with the
        # embedding and the loss counted as layers (64 chunks of 2, the first and last holding 1).
        text = " ".join(rows.command("b", "dgx-h100", row(rows.DGXC_2504, "llama3.1-405b", "fp8",
                                                          512)))
        self.assertIn("--strategy 8M8P4D", text)
        self.assertIn("--schedule interleaved --virtual-stages 8", text)
        self.assertIn("--account-for-embedding-in-pipeline-split", text)
        self.assertIn("--account-for-loss-in-pipeline-split", text)
        mb = row(rows.MB_2509, "llama3-70b", "fp8-cs", 64)
        text = " ".join(rows.command("b", "dgx-h100", mb))
        self.assertIn("--fp8-recipe tensorwise", text)
        self.assertNotIn("--tp-comm-overlap", " ".join(rows.command(
            "b", "dgx-h100", row(rows.DGXC_2504, "llama3-70b", "bf16", 64), tp_overlap=False)))

    def test_one_row_through_eventsim(self):
        r = row(rows.DGXC_2504, "llama3-8b", "bf16", 8)
        cmd = rows.command(os.path.dirname(EVENTSIM), "dgx-h100", r)
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        self.assertEqual(out["global_batch"], 128)
        self.assertGreater(out["throughput_tokens_per_s"], 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
