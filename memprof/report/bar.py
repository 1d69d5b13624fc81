"""``RankEstimate`` as one terminal bar of the GPU's total, for the estimate's table.

A rank's memory as one bar of the GPU's total: weights / KV / scratch / activation / graphs /
non-torch / slack / headroom, each segment as many cells as its share, a legend below.

``segments`` and ``cells`` are pure (no rich): the terminal bar and the ``--plot`` figure draw
the same segments. The bar fits any width (80 columns included): every line is at most as
wide as the console, the cells sum to the bar's width and each segment has the floor or the
ceiling of its exact share (largest remainders).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from memprof.base.units import fmt_bytes

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from memprof.core.estimate import Estimate, RankEstimate


class Segment(NamedTuple):
    """One part of the bar: its legend name, the character that draws it, its colour, bytes."""

    name: str
    char: str
    color: str
    bytes: int


# (component category or pseudo-category, legend name, char, colour), in the bar's order
KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("weights", "weights", "█", "blue"),
    ("kv_cache", "KV", "▓", "green"),
    ("scratch", "scratch", "#", "red"),
    ("activation", "activation", "▒", "magenta"),
    ("cudagraph", "graphs", "░", "cyan"),
    ("non_torch", "non-torch", "=", "yellow"),
    ("allocator", "slack", "~", "bright_black"),
    ("rest", "unused", "-", "bright_black"),
    ("headroom", "headroom", "·", "white"),
)


def segments(r: RankEstimate, total: int) -> list[Segment]:
    """The bar's segments of rank ``r`` on a GPU of ``total`` bytes: one per category of its
    components, ``unused`` for the part of the engine's budget no whole KV block fills
    (total − components − headroom, a fraction of a block), then the run-time headroom
    (0 when negative: the components then exceed ``total``). Segments of 0 bytes are kept, so
    every bar has the same legend order; they draw no cell."""
    by_cat = {cat: r.category_bytes(cat) for cat, *_ in KINDS[:7]}
    used = sum(by_cat.values())
    headroom = max(r.headroom_bytes, 0)
    by_cat["rest"] = max(total - used - headroom, 0)
    by_cat["headroom"] = headroom
    return [Segment(name, char, color, max(by_cat[cat], 0)) for cat, name, char, color in KINDS]


def cells(sizes: list[int], width: int) -> list[int]:
    """Cells of each size in a bar ``width`` cells wide: they sum to ``width`` (when any size is
    positive) and each is the floor or the ceiling of its exact share (largest remainders)."""
    whole = sum(max(s, 0) for s in sizes)
    if whole <= 0 or width <= 0:
        return [0] * len(sizes)
    exact = [max(s, 0) * width / whole for s in sizes]
    out = [int(x) for x in exact]
    order = sorted(range(len(sizes)), key=lambda i: (out[i] - exact[i], -sizes[i], i))
    for i in order[: width - sum(out)]:
        out[i] += 1
    return out


def title(e: Estimate, r: RankEstimate) -> str:
    who = f"rank {r.coord.rank}" if len(r.same_as) == 1 else (
        f"{len(r.same_as)} ranks like rank {r.coord.rank}")
    return f"memory of {who}: {fmt_bytes(e.gpu.total_bytes)} of {e.gpu.name}"


def lines(e: Estimate, r: RankEstimate, width: int) -> list[list[tuple[str, str]]]:
    """The bar of rank ``r`` as lines of (text, colour) runs, none wider than ``width``: a title,
    the bar, a marker of the GPU's total when the components exceed it, the legend."""
    total = e.gpu.total_bytes
    segs = segments(r, total)
    whole = sum(s.bytes for s in segs)
    n = cells([s.bytes for s in segs], width)
    out: list[list[tuple[str, str]]] = [[(title(e, r), "bold")]]
    out.append([(s.char * k, s.color) for s, k in zip(segs, n, strict=True) if k])
    if whole > total:  # over the GPU: mark where its total ends
        at = min(width - 1, round(total * width / whole))
        over = f"over by {fmt_bytes(whole - total)}"
        right, left = f"▲ GPU total ({over})", f"GPU total ({over}) ▲"
        text = (" " * at + right if at + len(right) <= width
                else " " * max(at + 1 - len(left), 0) + left)
        out.append([(text, "bold red")])
    entries = [(s, f"{s.char} {s.name} {fmt_bytes(s.bytes)} ({100 * s.bytes / total:.1f}%)")
               for s, k in zip(segs, n, strict=True)
               if (s.bytes and (k or s.name != "unused")) or s.name == "headroom"]
    if r.headroom_bytes < 0:
        entries = [x for x in entries if x[0].name != "headroom"]
        entries.append((segs[-1], f"{segs[-1].char} headroom −{fmt_bytes(-r.headroom_bytes)}"))
    line: list[tuple[str, str]] = []
    used = 0
    for s, text in entries:
        gap = 2 if line else 0
        if line and used + gap + len(text) > width:
            out.append(line)
            line, used, gap = [], 0, 0
        if gap:
            line.append(("  ", ""))
        line += [(text[:1], s.color), (text[1:width], "")]
        used += gap + min(len(text), width)
    if line:
        out.append(line)
    return out


class MemoryBar:
    """The rich renderable of ``lines``, as wide as the console allows."""

    def __init__(self, e: Estimate, r: RankEstimate) -> None:
        self.e, self.r = e, r

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        for runs in lines(self.e, self.r, options.max_width):
            text = Text(no_wrap=True, overflow="crop", end="\n")
            for chunk, style in runs:
                text.append(chunk, style=style or None)
            yield text


def plain(e: Estimate, r: RankEstimate, width: int = 80) -> Iterator[str]:
    """The bar as plain text lines (no colour)."""
    for runs in lines(e, r, width):
        yield "".join(chunk for chunk, _ in runs)
