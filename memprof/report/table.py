"""``EstimateReport`` (``memprof estimate``) as a table.

The ``table`` reporter: an estimate as tables, one block per distinct rank: its components
(one line each, 80 columns included), the budget, a bar of the GPU's memory. The report is
first laid out as ``Block``s (text with a style, or a table with a title); a terminal gets them
through rich, in colour; a pipe or a file gets the same bytes from ``memprof.report.plain``
without importing rich, unless a block is one that module cannot lay out as rich would."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, NamedTuple

from memprof.base.units import fmt_bytes
from memprof.core.contract import EstimateReport
from memprof.report import bar, plain
from memprof.report.estimate_rows import (
    NO_COMPONENT_CHANGES,
    budget_lines,
    compare_rows,
    compare_title,
    headline,
    rank_title,
    remedy_lines,
    rows,
    verdict_line,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

    from memprof.core.estimate import Estimate, RankEstimate

VERDICT_STYLE = {"fits": "bold green", "runtime_oom": "bold yellow", "startup_oom": "bold red"}


NOTE_MARKS = {"before the engine's baseline": "†", "outside the budget": "‡",
              "placeholder: not modelled yet": "*"}
SUPERSCRIPTS = "¹²³⁴⁵⁶⁷⁸⁹ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ"
# shorter forms of a name that does not fit its column, tried in order (the legend keeps the
# whole name)
SHORTER = ((" (profile run)", ""), (" (simulated)", ""), (" (WorkspaceManager)", ""),
           ("RoPE cos/sin cache", "RoPE cache"), ("communicator", "comm."),
           ("above the estimate", "above estimate"), (" (workspace)", ""))
COLUMNS = (("category", "category", "left"), ("each", "count × each", "right"),
           ("total", "total", "right"), ("share", "% GPU", "right"),
           ("profiled", "prof.", "center"))


def short_name(name: str, room: int) -> str:
    """``name`` in at most ``room`` cells: shortened by ``SHORTER``, then cut with "…"."""
    for old, new in SHORTER:
        if len(name) <= room:
            break
        name = name.replace(old, new)
    return name if len(name) <= room else name[: max(room - 1, 1)].rstrip() + "…"


class TableBlock(NamedTuple):
    """A table of the report: its title, (header, justify) per column, rows of cells and a
    style per row (``None``: plain); every column is one line per cell (no wrap)."""

    title: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, ...], ...]
    styles: tuple[str | None, ...]


class TextBlock(NamedTuple):
    """Text of the report, wrapped at word boundaries, with one style (``None``: plain)."""

    text: str
    style: str | None = None


class BarBlock(NamedTuple):
    """The bar of one rank's memory (``memprof.report.bar``)."""

    e: Estimate
    r: RankEstimate


Block = TableBlock | TextBlock | BarBlock


def component_table(e: Estimate, r: RankEstimate, width: int) -> tuple[TableBlock, list[str]]:
    """The components of rank ``r``, one line each at ``width`` columns: a note becomes a mark
    after the name (†, ‡, *), and a name too long for its column is shortened, with a numbered
    mark and the whole name in the legend; returns the table and its legend lines."""
    rs = rows(e, r)
    cells = [[getattr(x, k).replace(" × ", "×") for k, _, _ in COLUMNS] for x in rs]
    # what the other columns take: their widest cell and 2 cells between columns
    others = sum(max(len(h), *(len(c[i]) for c in cells)) + 2
                 for i, (_, h, _) in enumerate(COLUMNS))
    room = max(width - others, 16)
    legend: list[str] = []
    marks: list[str] = []
    body: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for row, cs in zip(rs, cells, strict=True):
        mark = NOTE_MARKS.get(row.note, "")
        if mark and mark not in marks:
            marks.append(mark)
        styles.append("dim" if row.note.startswith("placeholder") else (
            "yellow" if row.profiled == "NO" else None))
        body.append((fit_name(row.name, f" {mark}" if mark else "", room, legend), *cs))
    notes = [f"{m} {n}" for n, m in NOTE_MARKS.items() if m in marks]
    t = TableBlock(rank_title(r), (("component", "left"), *((h, j) for _, h, j in COLUMNS)),
                   tuple(body), tuple(styles))
    return t, [*_pack(legend, width), *_pack(notes, width)]


def fit_name(name: str, tail: str, room: int, legend: list[str]) -> str:
    """``name`` + ``tail`` in ``room`` cells: a name too long is shortened and marked with the
    next superscript, its whole form appended to ``legend``."""
    if len(name) + len(tail) <= room:
        return name + tail
    if len(legend) < len(SUPERSCRIPTS):
        sup = SUPERSCRIPTS[len(legend)]
        legend.append(f"{sup} {name}")
        tail = sup + tail
    return short_name(name, room - len(tail)) + tail


def compare_table(e: Estimate, other: Estimate, changes: str | None,
                  width: int) -> tuple[TableBlock, list[str]]:
    """The components that differ between the two estimates, one line each (at least one:
    ``blocks`` says so when none differs)."""
    xs = compare_rows(e, other)
    cells = [[str(x.rank), x.category, fmt_bytes(x.a_bytes), fmt_bytes(x.b_bytes),
              fmt_bytes(x.delta)] for x in xs]
    heads = ("rank", "category", "now", "compare", "Δ")  # and "component" after "rank"
    room = max(width - sum(max(len(h), *(len(c[i]) for c in cells)) + 2
                           for i, h in enumerate(heads)), 16)
    legend: list[str] = []
    body = tuple((cs[0], fit_name(x.component, "", room, legend), *cs[1:])
                 for x, cs in zip(xs, cells, strict=True))
    columns = tuple((h, "left" if h in ("component", "category") else "right")
                    for h in ("rank", "component", *heads[1:]))
    t = TableBlock(compare_title(e, other, changes), columns, body, (None,) * len(body))
    return t, _pack(legend, width)


def _pack(items: list[str], width: int) -> list[str]:
    """Items joined by two spaces into lines of at most ``width`` cells (an item never split)."""
    out: list[str] = []
    for item in items:
        if out and len(out[-1]) + 2 + len(item) <= width:
            out[-1] += "  " + item
        else:
            out.append(item)
    return out


def blocks(report: EstimateReport, width: int) -> list[Block]:
    """The report at ``width`` columns, block by block, in print order."""
    e, remedies, other, changes = report.estimate, report.remedies, report.other, report.changes
    parts: list[Block] = [TextBlock(headline(e), "bold")]
    for r in e.ranks:
        t, legend = component_table(e, r, width)
        parts.append(t)
        if legend:
            parts.append(TextBlock("\n".join(legend), "dim"))
        parts.append(TextBlock("\n".join(budget_lines(e, r))))
        parts.append(BarBlock(e, r))
    parts.append(TextBlock(verdict_line(e), VERDICT_STYLE.get(e.verdict, "bold")))
    for line in remedy_lines(remedies):
        parts.append(TextBlock(line))
    if other is not None and not compare_rows(e, other):
        parts.append(TextBlock(f"{compare_title(e, other, changes)}\n{NO_COMPONENT_CHANGES}"))
    elif other is not None:
        t, legend = compare_table(e, other, changes, width)
        parts.append(t)
        if legend:
            parts.append(TextBlock("\n".join(legend), "dim"))
    for note in e.notes:
        parts.append(TextBlock(f"note: {note}", "dim"))
    return parts


def plain_lines(parts: list[Block], width: int) -> list[str] | None:
    """The blocks as the lines rich prints without colour at ``width`` columns, or ``None``
    when one of them is beyond ``memprof.report.plain``."""
    out: list[str] = []
    for b in parts:
        if isinstance(b, TextBlock):
            got = plain.wrap(b.text, width)
        elif isinstance(b, TableBlock):
            got = plain.table(b.title, b.columns, b.rows, width)
        else:
            got = [x[:width] for x in bar.plain(b.e, b.r, width)]
            got = got if all(plain.one_cell(x) for x in got) else None
        if got is None:
            return None
        out += got
    return out


def render_rich(parts: list[Block]) -> RenderableType:
    """The blocks as one rich renderable."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    out: list[RenderableType] = []
    for b in parts:
        if isinstance(b, TextBlock):
            out.append(Text(b.text, style=b.style or ""))
        elif isinstance(b, BarBlock):
            out.append(bar.MemoryBar(b.e, b.r))
        else:
            t = Table(title=b.title, title_justify="left", box=box.SIMPLE_HEAD,
                      show_edge=False, pad_edge=False, collapse_padding=True)
            for head, just in b.columns:
                t.add_column(head, justify=just, no_wrap=True)  # type: ignore[arg-type]
            for row, style in zip(b.rows, b.styles, strict=True):
                t.add_row(*row, style=style)
            out.append(t)
    return Group(*out)


def render_table(report: EstimateReport, width: int | None = None, *,
                 color: bool = False) -> str:
    """The estimate as tables, ``width`` columns wide (``None``: the terminal's, through
    rich); without colour at a known width, laid out without rich where it can be."""
    if width is not None and not color:
        lines = plain_lines(blocks(report, width), width)
        if lines is not None:
            return "\n".join(lines) + "\n"
    return render_with_rich(report, width, color=color)


def render_with_rich(report: EstimateReport, width: int | None = None, *,
                     color: bool = False) -> str:
    """The estimate drawn by rich (a terminal's width when ``width`` is None)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system="auto" if color else None,
                      force_terminal=color, highlight=False)
    console.print(render_rich(blocks(report, console.width)))
    return buf.getvalue()
