#!/usr/bin/env python3
"""scripts/row_kernel_rates.py: FLOPs of hand-written event signatures, and the GEMM FLOPs of a
tiny-gpt step counted by hand against the script's sum over eventsim's own timeline.

    row_kernel_rates_test.py EVENTSIM REPO_DIR
"""
import os
import sys
import unittest

EVENTSIM, REPO = sys.argv[1:3]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import row_kernel_rates as rates  # noqa: E402


class EventFlops(unittest.TestCase):
    def test_signatures(self):
        # 2 m n k: Llama 3 8B's QKV GEMM at 4,096 tokens.
        self.assertEqual(rates.event_flops("gemm m=4096 n=6144 k=4096 layout=nt dtype=bf16"),
                         2 * 4096 * 6144 * 4096)
        # x batch: 4 heads' scores, 32 x 32 over 16 channels.
        self.assertEqual(rates.event_flops("bgemm batch=4 m=32 n=32 k=16 layout=nt dtype=fp32"),
                         2 * 4 * 32 * 32 * 16)
        # Causal forward: 4 s^2 d per head, halved: 4 * 4096^2 * 128 * 32 / 2 = 137,438,953,472.
        self.assertEqual(rates.event_flops(
            "flash_attn_fwd batch=32 groups=8 seq=4096 dim=128 causal=1 dtype=bf16"),
            137438953472)
        # Backward 2.5x; no mask: not halved.
        self.assertEqual(rates.event_flops(
            "flash_attn_bwd batch=32 groups=8 seq=4096 dim=128 causal=1 dtype=bf16"),
            2.5 * 137438953472)
        self.assertEqual(rates.event_flops(
            "flash_attn_fwd batch=1 groups=1 seq=1024 dim=64 causal=0 dtype=bf16"),
            4 * 1024 * 1024 * 64)
        # Memory-bound ops have no FLOP count of their own here.
        self.assertIsNone(rates.event_flops("rmsnorm_fwd rows=4096 cols=4096 dtype=bf16"))
        self.assertIsNone(rates.event_flops(
            "memory_pass read_bytes=16 write_bytes=8 dtype=bf16"))


class TinyGpt(unittest.TestCase):
    def test_gemm_flops_of_one_step(self):
        # tiny-gpt (configs/models/tiny-gpt.yaml): hidden 64, 4 heads of 16, FFN 256, seq 32,
        # vocab 512, 4 decoder layers; one micro-batch of one sequence (32 tokens) on one GPU.
        # Weight GEMMs, forward + dgrad + wgrad = 6 x weights x tokens: per layer QKV 64 x 192,
        # projection 64 x 64, fc1 64 x 256, fc2 256 x 64 = 49,152; 4 layers and the 64 x 512 output
        # layer: 229,376 weights -> 6 x 229,376 x 32 = 44,040,192.
        # Unfused attention (no flash kernel on this cluster): per layer and head the scores
        # (32 x 32 x 16) and the context (32 x 16 x 32) bGEMMs forward and two each backward, 6 of
        # 2 x 4 heads x 32 x 32 x 16 = 131,072 flops: 4 layers x 786,432 = 3,145,728.
        table = rates.rates([EVENTSIM, "simulate", "--model", "tiny-gpt", "--cluster", "cpu-local",
                             "--strategy", "1M1P1D", "--micro-batch", "1", "--global-batch", "1",
                             "--fallback", "analytic"])
        ms, flops = table["GEMM bf16"]
        self.assertEqual(flops, 44040192 + 3145728)
        self.assertGreater(ms, 0)
        # Classes without a FLOP count of their own carry None, not 0.
        self.assertIsNone(table["fused elementwise/norm/emb"][1])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
