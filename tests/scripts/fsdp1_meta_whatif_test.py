#!/usr/bin/env python3
"""scripts/fsdp1_meta_whatif.py: its instant ordering and each mechanism's lifetimes on a
timeline worked by hand, the identity that its reading of eventsim's CSV is eventsim's walk, and
bad input.

    fsdp1_meta_whatif_test.py EVENTSIM REPO_DIR
"""
import os
import subprocess
import sys
import unittest

EVENTSIM, REPO = sys.argv[1:3]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import fsdp1_meta_whatif as w  # noqa: E402

# One chunk, two micro-batches: F0 [0, 1], F1 [1, 2], B0 [2, 4], B1 [4, 6]; B0's one weight-
# gradient GEMM (6 elements) ends at 3, B1's at 5. Reductions of 10 fp32 elements (40 bytes):
# r0 [4, 10] (issued at B0's end), r1 [10, 12] (issued at 6, queued behind r0). Activations 10
# bytes a micro-batch, bf16 model: the bucket fills 20 bytes, the chunk's weights are 20 bytes.
TASKS = {("forward", 0, 0): [0, 1, []], ("forward", 0, 1): [1, 2, []],
         ("backward", 0, 0): [2, 4, [(3, 6)]], ("backward", 0, 1): [4, 6, [(5, 6)]]}
REDUCTIONS = [(4, 10, 40, 4), (10, 12, 40, 4)]
C, F, P, R, Y, S = w.COPY, w.FREE, w.PARTS_FREED, w.RESHARD, w.COPY, w.SOURCE_FREED


def lifetimes(**flags):
    return sorted(w.intervals(TASKS, REDUCTIONS, 10, 2, **flags))


class Top(unittest.TestCase):
    def test_frees_before_allocations_at_one_instant(self):
        # 30 held over [0, 5); at 5 it is freed before 40 is allocated: the top is 40, not 70.
        self.assertEqual(w.top([(0, C, 5, F, 30), (5, C, 9, F, 40)]), (40, 5))

    def test_a_source_outlives_its_copy_s_allocation(self):
        # A 20-byte source freed after its 40-byte copy exists (SOURCE_FREED after COPY): 60.
        self.assertEqual(w.top([(0, C, 5, S, 20), (5, C, 9, F, 40)]), (60, 5))


class Lifetimes(unittest.TestCase):
    def test_eventsim(self):
        # Activations from a forward's end to its backward's end; all weights for the whole
        # step; each bucket whole from its backward's start to its issue, its own fp32 copy from
        # the issue to its reduction's end.
        self.assertEqual(lifetimes(), sorted([
            (1, C, 4, F, 10), (2, C, 6, F, 10), (0, C, 6, F, 20),
            (2, C, 4, S, 20), (4, C, 10, F, 40), (4, C, 6, S, 20), (6, C, 12, F, 40)]))
        # Top at B0's end: A1 10 + weights 20 + B1's bucket 20 + r0's copy 40 + B0's source 20.
        self.assertEqual(w.top(lifetimes()), (110, 4))

    def test_weights_freed_after_each_backward(self):
        # W: gathered at F0's start, freed by B0's reshard, gathered again for B1.
        got = lifetimes(w=True)
        self.assertIn((0, C, 4, R, 20), got)
        self.assertIn((4, C, 6, R, 20), got)
        self.assertNotIn((0, C, 6, F, 20), got)
        # At B0's end the reshard (order RESHARD) frees them before r0's copy and B1's gather:
        # 52 - 10 (A0) - 20 (weights) + 20 (B1's bucket) + 40 (r0's copy) + 20 (weights) = 110,
        # then B0's source freed: the same top as eventsim's, the chunk being needed again.
        self.assertEqual(w.top(got), (110, 4))

    def test_sources_held_to_their_reduction_and_one_copy_block(self):
        # S: B0's source until r0 ends (10), B1's until r1 ends (12); r1's copy from r0's end.
        got = lifetimes(s=True)
        self.assertIn((2, C, 10, F, 20), got)
        self.assertIn((4, C, 12, F, 20), got)
        self.assertIn((4, C, 10, F, 40), got)
        self.assertIn((10, C, 12, F, 40), got)
        # What outlives r0 (ends after 10): B1's source from 4 and the block r1's copy takes over
        # at 10, 60; eventsim holds only r1's own copy there (from 6), 40.
        self.assertEqual(w.top([iv for iv in got if iv[2] > 10]), (60, 10))
        self.assertEqual(w.top([iv for iv in lifetimes() if iv[2] > 10]), (40, 6))
        # The step's top is the same 110 at B0's end (B0's source, r0's copy, B1's bucket).
        self.assertEqual(w.top(got), (110, 4))

    def test_gradients_grow_then_concatenate(self):
        # G: B0's GEMM gradient 12 bytes from 3, the other 8 at 4, the concatenated 20 at 4
        # (before the parts are freed), freed after the cast.
        got = lifetimes(g=True)
        for iv in [(3, C, 4, P, 12), (4, w.ARRIVE, 4, P, 8), (4, w.CONCAT, 4, S, 20)]:
            self.assertIn(iv, got)
        # At B0's end: A0 freed (52 -> 42), the last 8 arrive (50), the concatenation (70), the
        # parts freed (50), r0's copy (90), the source freed (70): B1's gradients are not there
        # yet, so 90 where eventsim holds 110. At B1's end (6; the toy's step ends there, so the
        # weights and A1 are freed first: 52 -> 22 + 8 + 20 = 50 after B1's 12 at 5) r0's copy
        # is still in flight: 60 after the parts, + r1's copy 40 = 100, the top.
        self.assertEqual(w.top(got), (100, 6))


class OnEventsimsTimeline(unittest.TestCase):
    def test_reading_is_eventsims_walk(self):
        out = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "fsdp1_meta_whatif.py"),
                              "--eventsim", EVENTSIM], capture_output=True, text=True, cwd=REPO)
        self.assertEqual(out.returncode, 0, out.stderr)
        first = out.stdout.splitlines()[0]
        above = first.split("buckets above it ")[1].split(" B")[0]
        summary = first.split("pending_reduction_bytes ")[1].split(")")[0]
        self.assertEqual(above, summary, first)
        self.assertEqual(len(out.stdout.splitlines()), 7)

    def test_a_rank_off_the_busiest_stage_is_refused(self):
        out = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "fsdp1_meta_whatif.py"),
                              "--eventsim", EVENTSIM, "--rank", "0"],
                             capture_output=True, text=True, cwd=REPO)
        self.assertEqual(out.returncode, 2)
        self.assertEqual(out.stderr, "fsdp1_meta_whatif: --rank 0 is on pipeline stage 0, the "
                                     "busiest stage is 1\n")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
