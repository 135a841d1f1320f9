#!/usr/bin/env python3
"""scripts/plot_timeline.py: the layout of a hand-written timeline (tests/data/timelines/
plot_tiny.csv), the PNG it draws, a 1F1B timeline from the simulator, and bad input.

    plot_timeline_test.py EVENTSIM REPO_DIR WORK_DIR [TEST_CLASS ...]

Exits 77 (ctest: skipped) when matplotlib cannot be imported.
"""
import os
import struct
import subprocess
import sys
import unittest

EVENTSIM, REPO, WORK = sys.argv[1:4]
SCRIPT = os.path.join(REPO, "scripts", "plot_timeline.py")
TINY = os.path.join(REPO, "tests", "data", "timelines", "plot_tiny.csv")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import plot_timeline  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def png_size(path):
    """(width, height) of a PNG, after checking its signature, IHDR chunk and IEND trailer."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    assert data[12:16] == b"IHDR", "first chunk is not IHDR"
    assert data[-8:-4] == b"IEND", "no IEND trailer"
    return struct.unpack(">II", data[16:24])


def colours(path):
    """The set of (r, g, b) bytes in a PNG, decoded by matplotlib."""
    import numpy  # matplotlib's own dependency
    image = plot_timeline.import_pyplot().imread(path)
    rgb = numpy.round(255 * image[:, :, :3]).astype(int).reshape(-1, 3)
    return {tuple(int(v) for v in px) for px in numpy.unique(rgb, axis=0)}


class Layout(unittest.TestCase):
    # plot_tiny.csv, 1M2P1D, times from the first event (500 us): rank 0 forward 0-1 ms, sends
    # 1-1.25 ms on pp-comm, idles 1.25-4 ms (the bubble), backward 4-6 ms; rank 1 receives
    # 1-1.25 ms, forward 1.25-2.25 ms, backward 2.25-3.75 ms.
    def setUp(self):
        self.ops = plot_timeline.load(TINY)
        self.begin = min(o.start_us for o in self.ops)

    def test_rows_extents_and_colours(self):
        rows, rects = plot_timeline.layout(self.ops, [0, 1], self.begin)
        self.assertEqual(rows, [(0, "compute"), (0, "pp-comm"), (1, "compute"), (1, "pp-comm")])
        got = sorted((r.row, r.x, r.width, r.colour, r.hatch) for r in rects)
        self.assertEqual(got, [
            (0, 0.0, 1.0, "tab:blue", None),
            (0, 4.0, 2.0, "tab:orange", None),
            (1, 1.0, 0.25, "tab:blue", "////"),
            (2, 1.25, 1.0, "tab:blue", None),
            (2, 2.25, 1.5, "tab:orange", None),
            (3, 1.0, 0.25, "tab:blue", "////"),
        ])

    def test_window_keeps_overlapping_ops(self):
        # 3-5 ms overlaps rank 0's backward (4-6) and rank 1's backward (2.25-3.75) only.
        _, rects = plot_timeline.layout(self.ops, [0, 1], self.begin, (3.0, 5.0))
        self.assertEqual(sorted((r.row, r.x) for r in rects), [(0, 4.0), (2, 2.25)])

    def test_one_rank_keeps_only_its_rows(self):
        rows, rects = plot_timeline.layout(self.ops, [1], self.begin)
        self.assertEqual(rows, [(1, "compute"), (1, "pp-comm")])
        self.assertEqual(len(rects), 3)

    def test_micro_batch_runs_and_merge(self):
        _, rects = plot_timeline.layout(self.ops, [0, 1], self.begin)
        self.assertEqual(plot_timeline.micro_batch_runs(rects), [
            [0, 0.0, 1.0, 0, "forward"], [0, 4.0, 6.0, 0, "backward"],
            [2, 1.25, 2.25, 0, "forward"], [2, 2.25, 3.75, 0, "backward"]])
        # Spans less than the gap apart join; 0.2 apart do not.
        self.assertEqual(plot_timeline.merge([(2.0, 1.0), (0.0, 1.0), (1.05, 0.5)], 0.1),
                         [[0.0, 1.55], [2.0, 1.0]])

    def test_kept_ops_share_the_module_strings(self):
        # Each kept op names its stream and phase with the module's string, not its row's copy.
        self.assertTrue(all(o.stream is plot_timeline.CANONICAL[o.stream] and
                            o.phase is plot_timeline.CANONICAL[o.phase] for o in self.ops))

    def test_bars_path(self):
        # Two spans, 0-1 and 2-2.5, from y = 1.5 to 2.5: two closed rectangles in one path.
        from matplotlib.path import Path
        path = plot_timeline.bars_path([(0.0, 1.0), (2.0, 0.5)], 1.5, 1.0)
        self.assertEqual(path.vertices.tolist(), [
            [0.0, 1.5], [1.0, 1.5], [1.0, 2.5], [0.0, 2.5], [0.0, 1.5],
            [2.0, 1.5], [2.5, 1.5], [2.5, 2.5], [2.0, 2.5], [2.0, 1.5]])
        shape = [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
        self.assertEqual(path.codes.tolist(), shape * 2)

    def test_one_patch_draws_the_pixels_of_one_bar_per_span(self):
        # 300 hatched spans of 1.5 to 4 px with gaps of 1 to 3 px (1,500 vertices: past the
        # 1,024 up to which Agg snaps a path by itself) and 40 plain ones: the row drawn as one
        # patch and as broken_barh's collection (one path per span) give the same pixels.
        plt = plot_timeline.import_pyplot()
        import numpy
        spans, x = [], 0.0
        for i in range(300):
            width = 1.5 + (i * 7 % 11) / 4.0
            spans.append((x, width))
            x += width + 1.0 + (i * 5 % 9) / 4.0
        plain = [(10.0 * i + 0.3, 4.2) for i in range(40)]

        def render(one_patch):
            fig, ax = plt.subplots(figsize=(16.0, 1.2))
            for row, group, hatch in ((0, spans, "////"), (1, plain, None)):
                if one_patch:
                    ax.add_patch(plot_timeline.bar_patch(group, row, "tab:blue", hatch))
                else:
                    ax.broken_barh(group, (row - 0.4, 0.8), facecolors="tab:blue", hatch=hatch,
                                   linewidth=0, edgecolor="white" if hatch else "tab:blue")
            ax.set_xlim(0.0, x)
            ax.set_ylim(1.5, -0.5)
            path = os.path.join(WORK, f"bars_{one_patch}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            return plt.imread(path)

        one, many = render(True), render(False)
        self.assertEqual(one.shape, many.shape)
        self.assertTrue(numpy.array_equal(one, many),
                        f"{int((one != many).any(axis=2).sum())} pixels differ")

    def test_default_ranks_and_title(self):
        self.assertEqual(plot_timeline.first_pipeline(self.ops), [(0, 0), (1, 1)])
        self.assertEqual(plot_timeline.describe(TINY, self.ops),
                         "plot_tiny.csv: 1M2P1D, 1 micro-batch, iteration 6.000 ms")
        self.assertEqual(plot_timeline.parse_ranks("1,0-1", {0, 1}), [1, 0])

    def test_png(self):
        out = os.path.join(WORK, "tiny.png")
        result = run(TINY, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, f"wrote {out}: 2 ranks, 4 rows, 6 ops\n")
        width, height = png_size(out)
        # 16 x (1.6 + 0.32 * 4 rows) inches at 110 dpi.
        self.assertEqual((width, height), (1760, 316))
        seen = colours(out)
        self.assertIn((0x1F, 0x77, 0xB4), seen)  # tab:blue, forward
        self.assertIn((0xFF, 0x7F, 0x0E), seen)  # tab:orange, backward


class Simulated(unittest.TestCase):
    def test_one_f_one_b_bubbles(self):
        csv = os.path.join(WORK, "1f1b.csv")
        subprocess.run([EVENTSIM, "simulate", "--model", "gpt2-345m", "--cluster", "dgx-a100",
                        "--strategy", "1M4P1D", "--micro-batch", "2", "--global-batch", "16",
                        "--schedule", "dapple", "--fallback", "analytic", "--csv", csv],
                       check=True, capture_output=True, timeout=60)
        ops = plot_timeline.load(csv)
        rows, rects = plot_timeline.layout(ops, [0, 1, 2, 3], min(o.start_us for o in ops))
        first_forward = {}
        for r in rects:
            if rows[r.row][1] == "compute" and r.phase == "forward" and r.micro_batch == 0:
                first_forward[rows[r.row][0]] = min(first_forward.get(rows[r.row][0], 1e30), r.x)
        # The warm-up bubble: stage s starts micro-batch 0 only once stages 0..s-1 are done with it.
        starts = [first_forward[s] for s in range(4)]
        self.assertEqual(starts[0], 0.0)
        self.assertEqual(starts, sorted(set(starts)))
        out = os.path.join(WORK, "1f1b.png")
        result = run(csv, "-o", out, "--start-ms", "0", "--end-ms", "50")
        self.assertEqual(result.returncode, 0, result.stderr)
        png_size(out)


class PerTimeline(unittest.TestCase):
    def test_a_rank_reads_as_its_timeline(self):
        # 2M2P2D: one pipeline class, so ranks 0-3 (stage 0) share timeline 0 and 4-7 timeline 1;
        # --ranks all writes each once. Rank 6's rows read from it are rank 6's own rows.
        per, grouped = os.path.join(WORK, "per.csv"), os.path.join(WORK, "grouped.csv")
        flags = ["simulate", "--model", "gpt2-345m", "--cluster", "dgx-a100", "--strategy",
                 "2M2P2D", "--micro-batch", "1", "--global-batch", "8", "--fallback", "analytic"]
        subprocess.run([EVENTSIM, *flags, "--csv", per], check=True, capture_output=True,
                       timeout=60)
        subprocess.run([EVENTSIM, *flags, "--ranks", "all", "--csv", grouped], check=True,
                       capture_output=True, timeout=60)
        own, coords, timeline_of = plot_timeline.scan(per, {6})
        self.assertIsNone(timeline_of)
        self.assertEqual(sorted(coords), list(range(8)))  # every rank seen, only 6's rows kept
        self.assertEqual({o.rank for o in own}, {6})
        shared, coords, timeline_of = plot_timeline.scan(grouped, {6})
        self.assertEqual(timeline_of, {0: "0", 1: "0", 2: "0", 3: "0",
                                       4: "1", 5: "1", 6: "1", 7: "1"})
        self.assertEqual(sorted(coords), [0, 4])  # the timelines' lowest ranks
        key = lambda o: (o.stream, o.start_us, o.dur_us, o.micro_batch, o.phase)  # noqa: E731
        self.assertEqual([key(o) for o in shared], [key(o) for o in own])
        out = os.path.join(WORK, "grouped.png")
        result = run(grouped, "-o", out, "--ranks", "1,6")
        self.assertEqual(result.returncode, 0, result.stderr)
        ops = len(own) + len(plot_timeline.scan(per, {1})[0])  # stage 1's rows and stage 0's
        self.assertEqual(result.stdout, f"wrote {out}: 2 ranks, 8 rows, {ops} ops\n")
        result = run(grouped, "-o", out, "--ranks", "8")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr, "plot_timeline.py: error: --ranks: rank 8 is not in the "
                                        "file (it holds ranks 0-7)\n")


    def test_context_and_expert_parallel_ranks_are_named(self):
        # tiny-moe as 1M1P2D C = 2 E = 2 (4 ranks; rank = cp + 2 dp, ep = dp): the cp-comm and
        # ep-comm streams are drawn and each rank's label names its cp and ep (issue 31, item 5).
        path = os.path.join(WORK, "cp_ep.csv")
        subprocess.run([EVENTSIM, "simulate", "--model", "tiny-moe", "--cluster", "cpu-local",
                        "--tp", "1", "--pp", "1", "--dp", "2", "--cp", "2", "--ep", "2",
                        "--micro-batch", "1", "--global-batch", "4", "--csv", path],
                       check=True, capture_output=True, timeout=60)
        ops, coords, _ = plot_timeline.scan(path)
        self.assertEqual(coords, {0: (0, 0, 0, 0, 0), 1: (0, 0, 0, 1, 0),
                                  2: (0, 0, 1, 0, 1), 3: (0, 0, 1, 1, 1)})
        self.assertTrue({"cp-comm", "ep-comm"} <= {o.stream for o in ops})
        self.assertEqual(plot_timeline.coord_text(coords[3], True, True), "tp0 cp1 pp0 dp1 ep1")
        self.assertTrue(plot_timeline.describe(path, ops, coords).startswith(
            "cp_ep.csv: 1M1P2D cp2 ep2, "))
        out = os.path.join(WORK, "cp_ep.png")
        result = run(path, "-o", out, "--ranks", "1")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_the_older_header_reads_as_cp_and_ep_zero(self):
        path = os.path.join(WORK, "old.csv")
        with open(path, "w") as f:
            f.write(plot_timeline.OLD_HEADER + "\n0,0,0,0,compute,e,0.0,1.0,0,forward,op,0,estimated\n")
        ops, coords, _ = plot_timeline.scan(path)
        self.assertEqual(coords, {0: (0, 0, 0, 0, 0)})
        self.assertEqual((ops[0].cp, ops[0].ep), (0, 0))

class BadInput(unittest.TestCase):
    def assert_fails(self, args, message):
        out = os.path.join(WORK, "bad.png")
        if os.path.exists(out):
            os.remove(out)
        result = run(*args, "-o", out)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stderr, f"plot_timeline.py: error: {message}\n")
        self.assertFalse(os.path.exists(out))

    def write(self, name, text):
        path = os.path.join(WORK, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_missing_file(self):
        self.assert_fails(["nope.csv"], "nope.csv: no such file")

    def test_header(self):
        path = self.write("header.csv", "rank,stream\n0,compute\n")
        self.assert_fails([path], f"{path}:1: not a timeline CSV (expected the header "
                                  f"'{plot_timeline.HEADER}')")

    def test_malformed_rows(self):
        good = "0,0,0,0,compute,e,0.0,1.0,0,forward,op,0,estimated,0,0"
        cases = {
            "0,0,0,0,compute,e,0.0,1.0,0,forward,op,0": "12 columns, expected 15",
            good.replace("compute", "nvlink"):
                "stream 'nvlink' is not one of compute, tp-comm, pp-comm, dp-comm, cp-comm, "
                "ep-comm, host",
            good.replace("forward", "fwd"): "phase 'fwd' is not one of forward, backward, "
                                            "recompute, grad-sync, optimizer",
            good.replace("1.0", "x"): "rank, tp, pp, dp, micro_batch, cp, ep must be integers, "
                                      "start_us, dur_us numbers",
            good.replace("1.0", "-1.0"): "a negative coordinate or duration, or a time that is "
                                         "not finite",
        }
        for row, message in cases.items():
            path = self.write("rows.csv", f"{plot_timeline.HEADER}\n{good}\n{row}\n")
            self.assert_fails([path], f"{path}:3: {message}")
        path = self.write("empty.csv", plot_timeline.HEADER + "\n")
        self.assert_fails([path], f"{path}: no events after the header")

    def test_ranks(self):
        self.assert_fails([TINY, "--ranks", "0,5"],
                          "--ranks: rank 5 is not in the file (it holds ranks 0-1)")
        self.assert_fails([TINY, "--ranks", "0,a"], "--ranks '0,a': 'a' is not a rank or a range "
                                                   "like 4-7")
        self.assert_fails([TINY, "--ranks", "1-0"], "--ranks '1-0': range '1-0' is empty")

    def test_window(self):
        self.assert_fails([TINY, "--start-ms", "7"], "no event of ranks 0-1 in the window 7 to "
                                                     "inf ms")
        self.assert_fails([TINY, "--start-ms", "2", "--end-ms", "1"],
                          "--start-ms 2 must be below --end-ms 1")


if __name__ == "__main__":
    try:
        plot_timeline.import_pyplot()
    except SystemExit:
        print("matplotlib is not installed: skipped")
        sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    unittest.main(argv=sys.argv[:1] + sys.argv[4:])
