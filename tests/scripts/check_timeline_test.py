#!/usr/bin/env python3
"""scripts/check_timeline.py's dependency check on hand-written timelines: two ranks of an
interleaved pipeline (pp 0 holds layers 0 and 2, pp 1 layers 1 and 3: chunks 0-3), one micro-batch.

    check_timeline_test.py REPO_DIR
"""
import os
import sys
import unittest

REPO = sys.argv[1]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import check_timeline  # noqa: E402

PP_OF_LAYER = {0: 0, 1: 1, 2: 0, 3: 1}


def task(layer, phase, start_us, mb=0, dp=0):
    pp = PP_OF_LAYER[layer]
    return {"rank": 2 * dp + pp, "tp": 0, "pp": pp, "dp": dp, "stream": "compute",
            "phase": phase, "micro_batch": mb, "layer": str(layer), "op": "gemm",
            "start_us": start_us, "dur_us": 10.0, "end_us": start_us + 10.0}


def send(pp, op, start_us, mb=0, dp=0):
    phase = "forward" if op == "send_activation" else "backward"
    return {"rank": 2 * dp + pp, "tp": 0, "pp": pp, "dp": dp, "stream": "pp-comm",
            "phase": phase, "micro_batch": mb, "layer": "0", "op": op, "start_us": start_us,
            "dur_us": 5.0, "end_us": start_us + 5.0}


def forward_pass(chunk_starts, dp=0):
    """Forward tasks of layers 0-3 starting at the given times, each sending to the next chunk
    20 us after it starts (the last chunk sends nothing). Pipeline dp runs on ranks 2 dp (pp 0)
    and 2 dp + 1 (pp 1)."""
    rows = []
    for layer, start in enumerate(chunk_starts):
        rows.append(task(layer, "forward", start, dp=dp))
        if layer < 3:
            rows.append(send(PP_OF_LAYER[layer], "send_activation", start + 20.0, dp=dp))
    return rows


class Dependencies(unittest.TestCase):
    def test_consistent_pass_has_no_errors(self):
        self.assertEqual(check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 200.0, 300.0]), 0.0), [])

    def test_large_tolerance_does_not_move_a_send_to_a_later_chunk(self):
        # Chunk 1 (pp 1) sends at 120; chunk 3 on the same rank starts at 300, within the 2 ms
        # clock tolerance of the send. The send belongs to chunk 1 (the task that started last
        # before it on the rank's own clock), whose receiver chunk 2 started at 200: consistent.
        # Taking chunk 3 as the sender (its receiver, chunk 4, does not exist) was the CI failure.
        self.assertEqual(check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 200.0, 300.0]), 2000.0), [])

    def test_receiver_starting_before_the_send_is_reported(self):
        # Chunk 2 (pp 0) starts at 90, before chunk 1's send at 120, by more than the tolerance.
        errors = check_timeline.check_dependencies(forward_pass([0.0, 100.0, 90.0, 300.0]), 10.0)
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("chunk 2 (pp 0) forward mb 0 starts 90.000 before rank 1 send_activation "
                      "mb 0 (chunk 1) started 120.000", errors[0])

    def test_tolerance_absorbs_skew_between_ranks(self):
        # The same 30 us early start is within a 40 us clock residual.
        self.assertEqual(check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 90.0, 300.0]), 40.0), [])

    def test_ranks_off_rank_0_each_have_the_tolerance(self):
        # Pipeline 1 runs on ranks 2 and 3, each put on rank 0's clock within T = 20 us: rank 3's
        # send at 120 may truly be at 120 - 20 and rank 2's chunk 2 at 90 truly at 90 + 20, so a
        # receiver 30 us early is within 2 T; 50 us early (at 70) is not. On ranks 0 and 1 the
        # same 30 us is over T (rank 0's clock is the reference, exact).
        self.assertEqual(check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 90.0, 300.0], dp=1), 20.0), [])
        errors = check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 70.0, 300.0], dp=1), 20.0)
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("chunk 2 (pp 0) forward mb 0 starts 70.000 before rank 3 send_activation "
                      "mb 0 (chunk 1) started 120.000", errors[0])
        self.assertEqual(len(check_timeline.check_dependencies(
            forward_pass([0.0, 100.0, 90.0, 300.0]), 20.0)), 1)

    def test_backward_send_from_the_first_chunk_has_no_receiver(self):
        # A gradient send after chunk 0's backward (pp 0) has no chunk -1 to receive it.
        rows = forward_pass([0.0, 100.0, 200.0, 300.0])
        rows += [task(0, "backward", 500.0), send(0, "send_gradient", 520.0)]
        errors = check_timeline.check_dependencies(rows, 0.0)
        self.assertEqual(errors, ["rank 0 send_gradient mb 0 (chunk 0): no receiving task on "
                                  "chunk -1"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
