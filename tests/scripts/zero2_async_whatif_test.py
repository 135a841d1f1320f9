#!/usr/bin/env python3
"""scripts/zero2_async_whatif.py: its queue, interval and chunk arithmetic on numbers worked by
hand, and two identities on eventsim's own timeline of a small plan.

    zero2_async_whatif_test.py EVENTSIM REPO_DIR
"""
import os
import sys
import unittest

EVENTSIM, REPO = sys.argv[1:3]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import zero2_async_whatif as w  # noqa: E402


class Arithmetic(unittest.TestCase):
    def test_fifo(self):
        # Issued at 0, 10, 50 for 20, 20, 5: the second waits for the first (20 -> 40), the third
        # finds the stream free (50 -> 55).
        self.assertEqual(w.fifo([0, 10, 50], [20, 20, 5]), [20, 40, 55])

    def test_most_pending(self):
        # At 0 one in flight; at 10 two (0-20 and 10-40); at 50 one (50-55).
        ready, finish = [0, 10, 50], [20, 40, 55]
        self.assertEqual(w.most_pending(ready, finish), 2)
        self.assertEqual(w.most_pending(ready, finish, until=5), 1)

    def test_intervals(self):
        self.assertEqual(w.merged([(5, 10), (0, 6), (20, 30)]), [(0, 10), (20, 30)])
        # [0, 10) meets [5, 20) for 5; [15, 30) meets it for 5 and [25, 40) for 5.
        self.assertEqual(w.overlap_us([(0, 10), (15, 30)], [(5, 20), (25, 40)]), 15)
        self.assertEqual(w.overlap_us([(0, 4)], [(5, 20)]), 0)

    def test_memory_walk(self):
        # Two chunks of 10 activation bytes: forwards end at 0 and 1, backwards at 2 and 3, each
        # backward's 4-byte gradient pending until 5 and 6. Held: 10, 20 (the activations' peak),
        # at 2: 10 + 4 = 14, at 3: 0 + 8 = 8, then 4, 0. Together 20, alone 20.
        self.assertEqual(w.memory_walk([0, 1], [2, 3], [5, 6], 10, [4, 4]), (20, 20))
        # Gradients of 15: at 2, 10 + 15 = 25 (5 above the activations' peak); at 3, 0 + 30.
        self.assertEqual(w.memory_walk([0, 1], [2, 3], [5, 6], 10, [15, 15]), (30, 20))
        # One chunk at a time (forwards end at 0 and 3, backwards at 2 and 4), the first gradient
        # reduced at 3 as the second forward ends: the free comes first, so 10 at 3, not 14.
        self.assertEqual(w.memory_walk([0, 3], [2, 4], [3, 6], 10, [4, 4]), (10, 10))

    def test_virtual_stage(self):
        # Chunks of 0, 2, 2, 0 blocks (the embedding and the head alone at the ends).
        starts = [(0, 0), (0, 2), (2, 2), (4, 0)]
        self.assertEqual(w.virtual_stage("embedding", starts, 4), 0)
        self.assertEqual(w.virtual_stage("0", starts, 4), 1)
        self.assertEqual(w.virtual_stage("3", starts, 4), 2)
        self.assertEqual(w.virtual_stage("head", starts, 4), 3)
        self.assertEqual(w.virtual_stage("7", [(0, 7), (7, 8)], 2), 1)
        with self.assertRaises(ValueError):
            w.virtual_stage("15", [(0, 7), (7, 8)], 2)

    def test_gradient_elements(self):
        self.assertEqual(w.gradient_elements("gemm m=16128 n=16384 k=8192 layout=tn dtype=bf16"),
                         16128 * 16384)
        self.assertEqual(w.gradient_elements("gemm m=8192 n=16384 k=16128 layout=nn dtype=bf16"), 0)
        self.assertEqual(w.gradient_elements(
            "embedding_bwd tokens=8192 hidden=16384 vocab=16128 dtype=bf16"), 16128 * 16384)
        self.assertEqual(w.gradient_elements("rmsnorm_bwd rows=1024 cols=16384 dtype=bf16"), 0)


class OnEventsimsTimeline(unittest.TestCase):
    """Llama 3 8B, TP 4, PP 2, DP 4, 1F1B, m = 4 (eventsim's own timeline)."""

    @classmethod
    def setUpClass(cls):
        cls.summary, cls.devices = w.whatif(EVENTSIM, [
            "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "4", "--pp", "2",
            "--gpus", "32", "--micro-batch", "1", "--global-batch", "16", "--sequence-parallel",
            "--fallback", "analytic"])

    def test_every_micro_batch_reduces_what_the_step_reduces_once(self):
        # The chunk gradients counted from the weight-gradient GEMMs and the embedding (norm
        # gains aside, < 0.01% here) are the bytes of the once-a-step buckets, at the same time per
        # byte: m times the once-a-step sync.
        for d in self.devices:
            self.assertEqual(d["micro_batches"], 4)
            self.assertAlmostEqual(d["dp_busy_us"] / (4 * d["sync_us"]), 1, delta=1e-3)

    def test_a_drained_queue_ends_the_step_as_once_a_step_does(self):
        # Stage 1 (pipeline rank > 0: Megatron reduces its one chunk in one bucket after its last
        # backward): when nothing is queued at its last backward, the last micro-batch's reduction
        # is the once-a-step one (same bytes, same start), so the step ends at the same time, but
        # for the norm gains the script leaves out (0.014% of stage 1's elements: ~4 us of 28.9 ms).
        d = self.devices[1]
        tolerance = 1e-3 * d["sync_us"]
        self.assertAlmostEqual(d["queue_past_compute_us"], d["dp_busy_us"] / 4, delta=tolerance)
        self.assertAlmostEqual(d["async_end_us"], d["zero1_end_us"], delta=tolerance)
        # Stage 0's chunk is bucketed during its last backward under zero-1, so there the what-if
        # (one reduction when the chunk's backward ends) finishes later.
        self.assertGreater(self.devices[0]["async_end_us"], self.devices[0]["zero1_end_us"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
