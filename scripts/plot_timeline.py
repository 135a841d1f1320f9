#!/usr/bin/env python3
"""Draw the timeline of chosen ranks from a per-device timeline CSV as a PNG.

Usage:
    eventsim simulate ... --csv timeline.csv          # or eventrun --csv: the same format
    python3 scripts/plot_timeline.py timeline.csv -o timeline.png [--ranks 0,4-7]
                                     [--start-ms T0] [--end-ms T1] [--title TEXT]

One row per (rank, stream): compute, then the tp-comm, pp-comm, dp-comm, cp-comm, ep-comm and host
streams any chosen rank uses (hatched). Each op is a rectangle coloured by its phase (forward, backward, recompute,
grad-sync, optimizer); idle time, pipeline bubbles included, is empty space. Long enough runs of
one micro-batch on a compute row carry its number. Time is in ms from the file's first event;
--start-ms/--end-ms zoom into a window of it. Default ranks: the first pipeline in the file (the
lowest dp, then the lowest tp: one rank per stage), at most 16. The file is streamed and only the
drawn ranks' rows are parsed (issue 34, item 4: 2,048 ranks in seconds and tens of MB). A
per-timeline CSV (`simulate --ranks all`: each simulated timeline once, with a rank map) is read
the same way, a rank drawn from its timeline's rows. Needs matplotlib (Debian:
apt-get install python3-matplotlib; /usr/bin/python3 has it).
"""

import argparse
import math
import os
import sys
from collections import namedtuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_common  # noqa: E402  (this folder)

# modeler/timeline_csv.h: the header `eventsim simulate --csv` and `eventrun --csv` write (cp and
# ep last); files of the older 13-column header read as cp = ep = 0.
OLD_HEADER = "rank,tp,pp,dp,stream,event,start_us,dur_us,micro_batch,phase,op,layer,provenance"
HEADER = OLD_HEADER + ",cp,ep"
# The first line of a per-timeline CSV (simulate --ranks all), then "# timeline T: ranks 0-3,...".
MAP_COMMENT = "# eventsim timeline CSV, one row set per simulated timeline; the ranks of each:"
STREAMS = ("compute", "tp-comm", "pp-comm", "dp-comm", "cp-comm", "ep-comm", "host")
PHASE_COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "recompute": "tab:purple",
                 "grad-sync": "tab:red", "optimizer": "tab:green"}
MAX_DEFAULT_RANKS = 16
CANONICAL = {name: name for name in STREAMS + tuple(PHASE_COLOURS)}

Op = namedtuple("Op", "rank tp pp dp stream start_us dur_us micro_batch phase cp ep")
Rect = namedtuple("Rect", "row x width colour hatch phase micro_batch")


def fail(message):
    plot_common.fail("plot_timeline.py", message)


def import_pyplot():
    return plot_common.import_pyplot("plot_timeline.py")


def row_op(f, where, columns=15):
    """The Op of one row's fields (15, or 13 under the old header), checked as
    modeler/timeline_csv.cpp checks them."""
    if len(f) != columns:
        fail(f"{where}: {len(f)} columns, expected {columns}")
    try:
        rank, tp, pp, dp, mb = (int(f[i]) for i in (0, 1, 2, 3, 8))
        cp, ep = (int(f[13]), int(f[14])) if columns == 15 else (0, 0)
        start, dur = float(f[6]), float(f[7])
    except ValueError:
        fail(f"{where}: rank, tp, pp, dp, micro_batch, cp, ep must be integers, "
             "start_us, dur_us numbers")
    if min(rank, tp, pp, dp, cp, ep) < 0 or mb < -1 or dur < 0 or not math.isfinite(start + dur):
        fail(f"{where}: a negative coordinate or duration, or a time that is not finite")
    # The module's own strings, not the row's copies: 2 x ~60 bytes less a kept op.
    stream, phase = CANONICAL.get(f[4]), CANONICAL.get(f[9])
    if stream not in STREAMS:
        fail(f"{where}: stream '{f[4]}' is not one of {', '.join(STREAMS)}")
    if phase not in PHASE_COLOURS:
        fail(f"{where}: phase '{f[9]}' is not one of {', '.join(PHASE_COLOURS)}")
    return Op(rank, tp, pp, dp, stream, start, dur, mb, phase, cp, ep)


def expand_ranges(text):
    """'0-2,5' -> [0, 1, 2, 5] (the rank map of a per-timeline CSV)."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def scan(path, choose=None):
    """Reads the CSV line by line and keeps the ops of the chosen ranks only: None keeps every
    rank, "first" the first pipeline (lowest dp, then lowest tp), a set those ranks. Rows of other
    ranks are skipped unparsed but for a rank's first row (its coordinates), so a 3 M-row file of
    2,048 ranks costs the rows drawn. A per-timeline CSV (simulate --ranks all) is read through its
    rank map: a rank's rows are its timeline's. Returns (ops, coords of every rank in the file,
    timeline of each rank or None for a per-rank CSV)."""
    if not os.path.exists(path):
        fail(f"{path}: no such file")
    ops, coords, timeline_of, keys = [], {}, None, {}
    try:
        with open(path) as f:
            number, line = 1, f.readline().rstrip("\r\n")
            if line == MAP_COMMENT:
                timeline_of = {}
                for line in f:
                    number += 1
                    line = line.rstrip("\r\n")
                    if not line.startswith("# timeline "):
                        break
                    key, _, ranks = line[len("# timeline "):].partition(": ranks ")
                    try:
                        for r in expand_ranges(ranks):
                            timeline_of[r] = key
                    except ValueError:
                        fail(f"{path}:{number}: not a rank map line ('# timeline T: ranks 0-3')")
                prefix = "timeline,"
            else:
                prefix = ""
            if line not in (prefix + HEADER, prefix + OLD_HEADER):
                fail(f"{path}:{number}: not a timeline CSV (expected the header '{prefix + HEADER}')")
            columns = 15 if line == prefix + HEADER else 13
            skip = 1 if timeline_of is not None else 0  # the timeline column
            wanted = None
            if isinstance(choose, set):
                wanted = {str(r) for r in choose} if timeline_of is None else \
                    {timeline_of[r] for r in choose if r in timeline_of}
            best, last, keep = None, None, False
            for line in f:
                number += 1
                line = line.rstrip("\r\n")
                if not line:
                    continue
                key = line[:line.find(",")]
                if key != last:  # a rank's (a timeline's) first row: its coordinates
                    last = key
                    op = row_op(line.split(",")[skip:], f"{path}:{number}", columns)
                    rank, tp, pp, dp, cp = op.rank, op.tp, op.pp, op.dp, op.cp
                    coord = (tp, pp, dp, cp, op.ep)
                    if coords.setdefault(rank, coord) != coord or \
                            keys.setdefault(rank, key) != key:
                        fail(f"{path}:{number}: rank {rank} has two different (tp, cp, pp, dp); "
                             "the file mixes strategies")
                    if choose is None:
                        keep = True
                    elif wanted is not None:
                        keep = key in wanted
                    else:  # the first pipeline: lowest dp, then lowest cp, then lowest tp
                        if best is None or (dp, cp, tp) < best:
                            best, ops = (dp, cp, tp), []
                        keep = (dp, cp, tp) == best
                if keep:
                    ops.append(row_op(line.split(",")[skip:], f"{path}:{number}", columns))
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read ({e})")
    if not coords:
        fail(f"{path}: no events after the header")
    return ops, coords, timeline_of


def load(path):
    """Every op of a timeline CSV (the per-timeline form: one set per timeline)."""
    return scan(path)[0]


def parse_ranks(text, present):
    """'0,4-7' -> [0, 4, 5, 6, 7]; every rank must be in the file."""
    ranks = parse_rank_list(text)
    check_present(ranks, present)
    return ranks


def check_present(ranks, present):
    for r in ranks:
        if r not in present:
            fail(f"--ranks: rank {r} is not in the file "
                 f"(it holds ranks {compact(sorted(present))})")


def parse_rank_list(text):
    ranks = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not dash:
            hi = lo
        if not lo.isdigit() or not hi.isdigit():
            fail(f"--ranks '{text}': '{part}' is not a rank or a range like 4-7")
        if int(hi) < int(lo):
            fail(f"--ranks '{text}': range '{part}' is empty")
        ranks += [r for r in range(int(lo), int(hi) + 1) if r not in ranks]
    return ranks


def compact(ranks):
    """[0, 1, 2, 5] -> '0-2,5'."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


def first_pipeline(ops):
    """The ranks of the lowest dp and, within it, the lowest cp and tp, by stage."""
    dp, cp, tp = min((o.dp, o.cp, o.tp) for o in ops)
    return sorted({(o.pp, o.rank) for o in ops if (o.dp, o.cp, o.tp) == (dp, cp, tp)})


def layout(ops, ranks, begin_us, window=(-math.inf, math.inf)):
    """Rows [(rank, stream)] top to bottom and one Rect per op of those ranks that overlaps the
    window (ms from begin_us); x and width in ms, unclipped. Every chosen rank gets the same
    streams: those any of them uses, so rows line up from rank to rank."""
    chosen = set(ranks)
    used = {o.stream for o in ops if o.rank in chosen}
    rows = [(r, s) for r in ranks for s in STREAMS if s in used]
    index = {row: i for i, row in enumerate(rows)}
    rects = []
    for o in ops:
        x = (o.start_us - begin_us) / 1000.0
        width = o.dur_us / 1000.0
        if o.rank in chosen and x <= window[1] and x + width >= window[0]:
            rects.append(Rect(index[(o.rank, o.stream)], x, width, PHASE_COLOURS[o.phase],
                              None if o.stream == "compute" else "////", o.phase, o.micro_batch))
    return rows, rects


def micro_batch_runs(rects):
    """Runs of consecutive compute ops of one micro-batch's forward or backward pass per row:
    [row, x0, x1, micro-batch, pass]. Recomputation is part of the backward pass (it alternates
    with the backward layer by layer)."""
    runs = []
    for r in sorted((r for r in rects if r.hatch is None and r.micro_batch >= 0),
                    key=lambda r: (r.row, r.x)):
        last = runs[-1] if runs else None
        key = [r.micro_batch, "forward" if r.phase == "forward" else "backward"]
        if last and last[0] == r.row and last[3:] == key:
            last[2] = max(last[2], r.x + r.width)
        else:
            runs.append([r.row, r.x, r.x + r.width] + key)
    return runs


def merge(spans, gap):
    """(x, width) spans sorted and joined where less than `gap` apart: touching rectangles would
    leave light antialiasing seams between them, and a gap under half a pixel cannot be drawn."""
    out = []
    for x, w in sorted(spans):
        if out and x - (out[-1][0] + out[-1][1]) < gap:
            out[-1][1] = max(out[-1][1], x + w - out[-1][0])
        else:
            out.append([x, w])
    return out


def bars_path(spans, y, height):
    """One path of every (x, width) span's rectangle from y to y + height."""
    from matplotlib.path import Path
    vertices, codes = [], []
    for x, w in spans:
        vertices += [(x, y), (x + w, y), (x + w, y + height), (x, y + height), (x, y)]
        codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    return Path(vertices, codes)


def bar_patch(spans, row, colour, hatch):
    """A row's spans of one colour and hatch as one patch: the pixels of one bar per span
    (broken_barh's collection), drawn in one fill. In a collection Agg renders a hatched path's
    hatch tile once per path: at 2,048 GPUs and 1,536 micro-batches (13,729 hatched spans) that was
    most of the drawing time. snap=True snaps every rectangle to the pixel grid as a collection's
    five-vertex paths are (Agg snaps a path automatically only up to 1,024 vertices)."""
    from matplotlib.patches import PathPatch
    return PathPatch(bars_path(spans, row - 0.4, 0.8), facecolor=colour, hatch=hatch, linewidth=0,
                     edgecolor="white" if hatch else colour, snap=True)


def draw(rows, rects, labels, window, title, subtitle, output):
    plt = import_pyplot()
    from matplotlib.patches import Patch
    from matplotlib.patheffects import withStroke
    width_in, dpi = 16.0, 110
    fig, ax = plt.subplots(figsize=(width_in, 1.6 + 0.32 * len(rows)))
    x0 = max(window[0], min(r.x for r in rects))
    x1 = min(window[1], max(r.x + r.width for r in rects))
    x1 = max(x1, x0 + 1e-3)  # zero-length ops at one instant only: a 1 us wide axis
    # Ops shorter than a pixel (a small send, a layer norm) would vanish: draw them a pixel wide.
    pixel = (x1 - x0) / (0.8 * width_in * dpi)
    groups = {}
    for r in rects:  # the rects themselves: a group's (x, width) pairs are made one group at a time
        groups.setdefault((r.row, r.colour, r.hatch), []).append(r)
    for (row, colour, hatch), members in groups.items():
        spans = [(x, max(w, pixel)) for x, w in merge(((r.x, r.width) for r in members),
                                                      pixel / 2)]
        ax.add_patch(bar_patch(spans, row, colour, hatch))
    runs = micro_batch_runs(rects)
    # A white line where each run starts sets apart runs that follow one another without a gap
    # (the cool-down's backwards); a run wide enough for its number (7 px a digit) carries it.
    ax.vlines([a for _, a, _, _, _ in runs], [row - 0.4 for row, *_ in runs],
              [row + 0.4 for row, *_ in runs], colors="white", linewidth=0.8)
    for row, a, b, mb, _ in runs:
        if b - a > (4 + 7 * len(str(mb))) * pixel and a >= x0 and b <= x1:
            # Outlined: a block can be striped with the short idle gaps between its ops.
            ax.text((a + b) / 2, row, str(mb), ha="center", va="center", fontsize=7, color="white",
                    path_effects=[withStroke(linewidth=1.5, foreground="black")])
    for i in range(1, len(rows)):
        if rows[i][0] != rows[i - 1][0]:  # a thin line between ranks
            ax.axhline(i - 0.5, color="lightgrey", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{labels[r]} {s}" for r, s in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(x0, x1)
    ax.set_xlabel("time from the file's first event (ms)")
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    phases = [p for p in PHASE_COLOURS if any(r.phase == p for r in rects)]
    handles = [Patch(color=PHASE_COLOURS[p], label=p) for p in phases]
    if any(r.hatch for r in rects):
        handles.append(Patch(facecolor="grey", hatch="////", edgecolor="white",
                             label="communication stream"))
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles),
              fontsize=8, frameon=False)
    fig.suptitle(f"{title}\n{subtitle}", fontsize=9)
    fig.tight_layout()
    tmp = output + ".tmp.png"
    fig.savefig(tmp, dpi=dpi)
    os.replace(tmp, output)


def coord_text(c, with_cp, with_ep):
    """(tp, pp, dp, cp, ep) as the trace names it: 'tp1 cp1 pp0 dp3 ep1', cp and ep where the
    file has them (some rank with cp or ep > 0)."""
    tp, pp, dp, cp, ep = c
    return (f"tp{tp}" + (f" cp{cp}" if with_cp else "") + f" pp{pp} dp{dp}" +
            (f" ep{ep}" if with_ep else ""))


def describe(path, ops, coords=None, timeline_of=None):
    """Title from what the file says: strategy (from the coordinates of every rank in it, `coords`,
    or of `ops`; a per-timeline file: its rank map), micro-batches and iteration (of `ops`)."""
    if coords is None:
        coords = {o.rank: (o.tp, o.pp, o.dp, o.cp, o.ep) for o in ops}
    ranks = set(coords)
    m, p, d, c, e = (max(x[i] for x in coords.values()) + 1 for i in range(5))
    name = f"{m}M{p}P{d}D" + (f" cp{c}" if c > 1 else "") + (f" ep{e}" if e > 1 else "")
    strategy = name if len(ranks) == m * p * d * c else f"{len(ranks)} ranks of {name} or larger"
    if timeline_of is not None:
        strategy = f"{len(timeline_of)} ranks as {len(set(timeline_of.values()))} timelines"
    micro_batches = len({o.micro_batch for o in ops if o.micro_batch >= 0})
    iteration = (max(o.start_us + o.dur_us for o in ops) - min(o.start_us for o in ops)) / 1000
    plural = "es" if micro_batches != 1 else ""
    return (f"{os.path.basename(path)}: {strategy}, {micro_batches} micro-batch{plural}, "
            f"iteration {iteration:.3f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", help="timeline CSV (eventsim simulate --csv, eventrun --csv)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--ranks", help="ranks to draw, e.g. 0,4-7 (default: the first pipeline)")
    parser.add_argument("--start-ms", type=float, default=-math.inf, help="window start (ms)")
    parser.add_argument("--end-ms", type=float, default=math.inf, help="window end (ms)")
    parser.add_argument("--title", help="chart title (default: what the CSV says)")
    args = parser.parse_args()
    if args.start_ms >= args.end_ms:
        fail(f"--start-ms {args.start_ms:g} must be below --end-ms {args.end_ms:g}")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        fail(f"-o {args.output}: directory {out_dir} does not exist")

    chosen = parse_rank_list(args.ranks) if args.ranks else None
    ops, coords, timeline_of = scan(args.input, set(chosen) if chosen else "first")
    present = coords if timeline_of is None else timeline_of
    with_cp, with_ep = (any(c[i] for c in coords.values()) for i in (3, 4))
    labels = {r: f"rank {r} ({coord_text(c, with_cp, with_ep)})" for r, c in coords.items()}
    if chosen:
        check_present(chosen, present)
        ranks, which = chosen, "chosen"
        if timeline_of is not None:
            # A rank's rows are its timeline's, drawn under its own number.
            by_key = {}
            for o in ops:
                by_key.setdefault(timeline_of[o.rank], []).append(o)
            ops = [o._replace(rank=r) for r in ranks for o in by_key[timeline_of[r]]]
            labels = {r: f"rank {r} (timeline {timeline_of[r]}, pp{by_key[timeline_of[r]][0].pp})"
                      for r in ranks}
    else:
        ranks = [r for _, r in first_pipeline(ops)]
        which = "first pipeline"
        if len(ranks) > MAX_DEFAULT_RANKS:
            which += f", the first {MAX_DEFAULT_RANKS} of its {len(ranks)} stages; --ranks chooses"
            ranks = ranks[:MAX_DEFAULT_RANKS]
    window = (args.start_ms, args.end_ms)
    rows, rects = layout(ops, ranks, min(o.start_us for o in ops), window)
    if not rects:
        fail(f"no event of ranks {compact(sorted(ranks))} in the window {args.start_ms:g} to "
             f"{args.end_ms:g} ms")
    title = args.title or describe(args.input, ops, coords, timeline_of)
    del ops  # what is drawn is in rects now: the ops' memory is free for the drawing
    subtitle = f"ranks {compact(sorted(ranks))} ({which})"
    if math.isfinite(args.start_ms) or math.isfinite(args.end_ms):
        subtitle += f", window {args.start_ms:g} to {args.end_ms:g} ms"
    draw(rows, rects, labels, window, title, subtitle, args.output)
    print(f"wrote {args.output}: {len(ranks)} ranks, {len(rows)} rows, {len(rects)} ops")


if __name__ == "__main__":
    main()
