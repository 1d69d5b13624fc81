"""``EstimateReport`` (``memprof estimate``) as a table.

The ``table`` reporter: an estimate as rich tables, one block per distinct rank: its
components (one line each, 80 columns included), the budget, a bar of the GPU's memory."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from memprof.base.units import fmt_bytes
from memprof.core.contract import EstimateReport
from memprof.report.bar import MemoryBar
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


def component_table(e: Estimate, r: RankEstimate, width: int) -> tuple[Table, list[str]]:
    """The components of rank ``r``, one line each at ``width`` columns: a note becomes a mark
    after the name (†, ‡, *), and a name too long for its column is shortened, with a numbered
    mark and the whole name in the legend; returns the table and its legend lines."""
    rs = rows(e, r)
    cells = [[getattr(x, k).replace(" × ", "×") for k, _, _ in COLUMNS] for x in rs]
    # what the other columns take: their widest cell and 2 cells between columns
    others = sum(max(len(h), *(len(c[i]) for c in cells)) + 2
                 for i, (_, h, _) in enumerate(COLUMNS))
    room = max(width - others, 16)
    t = Table(title=rank_title(r), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, collapse_padding=True)
    t.add_column("component", justify="left", no_wrap=True)
    for _, head, just in COLUMNS:
        t.add_column(head, justify=just, no_wrap=True)  # type: ignore[arg-type]
    legend: list[str] = []
    marks: list[str] = []
    for row, cs in zip(rs, cells, strict=True):
        mark = NOTE_MARKS.get(row.note, "")
        if mark and mark not in marks:
            marks.append(mark)
        style = "dim" if row.note.startswith("placeholder") else (
            "yellow" if row.profiled == "NO" else None)
        t.add_row(fit_name(row.name, f" {mark}" if mark else "", room, legend), *cs,
                  style=style)
    notes = [f"{m} {n}" for n, m in NOTE_MARKS.items() if m in marks]
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
                  width: int) -> tuple[Table, list[str]]:
    """The components that differ between the two estimates, one line each (at least one:
    ``render_rich`` says so when none differs)."""
    xs = compare_rows(e, other)
    cells = [[str(x.rank), x.category, fmt_bytes(x.a_bytes), fmt_bytes(x.b_bytes),
              fmt_bytes(x.delta)] for x in xs]
    heads = ("rank", "category", "now", "compare", "Δ")  # and "component" after "rank"
    room = max(width - sum(max(len(h), *(len(c[i]) for c in cells)) + 2
                           for i, h in enumerate(heads)), 16)
    t = Table(title=compare_title(e, other, changes), title_justify="left", box=box.SIMPLE_HEAD,
              show_edge=False, pad_edge=False, collapse_padding=True)
    for head in ("rank", "component", *heads[1:]):
        t.add_column(head, justify="left" if head in ("component", "category") else "right",
                     no_wrap=True)
    legend: list[str] = []
    for x, cs in zip(xs, cells, strict=True):
        t.add_row(cs[0], fit_name(x.component, "", room, legend), *cs[1:])
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


def render_rich(report: EstimateReport, width: int = 100) -> RenderableType:
    e, remedies, other, changes = report.estimate, report.remedies, report.other, report.changes
    parts: list[RenderableType] = [Text(headline(e), style="bold")]
    for r in e.ranks:
        t, legend = component_table(e, r, width)
        parts.append(t)
        if legend:
            parts.append(Text("\n".join(legend), style="dim"))
        parts.append(Text("\n".join(budget_lines(e, r))))
        parts.append(MemoryBar(e, r))
    parts.append(Text(verdict_line(e), style=VERDICT_STYLE.get(e.verdict, "bold")))
    for line in remedy_lines(remedies):
        parts.append(Text(line))
    if other is not None and not compare_rows(e, other):
        parts.append(Text(f"{compare_title(e, other, changes)}\n{NO_COMPONENT_CHANGES}"))
    elif other is not None:
        t, legend = compare_table(e, other, changes, width)
        parts.append(t)
        if legend:
            parts.append(Text("\n".join(legend), style="dim"))
    for note in e.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def render_table(report: EstimateReport, width: int | None = None, *,
                 color: bool = False) -> str:
    """The estimate as rich tables, ``width`` columns wide (``None``: the terminal's)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system="auto" if color else None,
                      force_terminal=color, highlight=False)
    console.print(render_rich(report, console.width))
    return buf.getvalue()
