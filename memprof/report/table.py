"""The ``table`` reporter: an estimate as rich tables, one block per distinct rank."""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from memprof.base.units import fmt_bytes
from memprof.core.contract import EstimateReport
from memprof.report.estimate_rows import (
    budget_lines,
    compare_rows,
    compare_title,
    headline,
    rank_title,
    remedy_lines,
    rows,
    verdict_line,
)

VERDICT_STYLE = {"fits": "bold green", "runtime_oom": "bold yellow", "startup_oom": "bold red"}


def render_rich(report: EstimateReport) -> RenderableType:
    e, remedies, other, changes = report.estimate, report.remedies, report.other, report.changes
    parts: list[RenderableType] = [Text(headline(e), style="bold")]
    for r in e.ranks:
        t = Table(title=rank_title(r), title_justify="left", show_lines=False, expand=False)
        for col, just in (("component", "left"), ("category", "left"), ("count × each", "right"),
                          ("total", "right"), ("% GPU", "right"), ("profiled", "center")):
            t.add_column(col, justify=just, no_wrap=col != "component")  # type: ignore[arg-type]
        for row in rows(e, r):
            style = "dim" if row.note.startswith("placeholder") else (
                "yellow" if row.profiled == "NO" else None)
            t.add_row(row.component, row.category, row.each, row.total, row.share, row.profiled,
                      style=style)
        parts.append(t)
        parts.append(Text("\n".join(budget_lines(e, r))))
    parts.append(Text(verdict_line(e), style=VERDICT_STYLE.get(e.verdict, "bold")))
    for line in remedy_lines(remedies):
        parts.append(Text(line))
    if other is not None:
        t = Table(title=compare_title(e, other, changes), title_justify="left")
        for col in ("rank", "component", "category", "now", "compare", "Δ"):
            t.add_column(col, justify="left" if col in ("component", "category") else "right")
        for x in compare_rows(e, other):
            t.add_row(str(x.rank), x.component, x.category, fmt_bytes(x.a_bytes),
                      fmt_bytes(x.b_bytes), fmt_bytes(x.delta))
        parts.append(t)
    for note in e.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def render_table(report: EstimateReport, width: int | None = None, *,
                 color: bool = False) -> str:
    """The estimate as rich tables, ``width`` columns wide (``None``: the terminal's)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system="auto" if color else None,
                      force_terminal=color, highlight=False)
    console.print(render_rich(report))
    return buf.getvalue()
