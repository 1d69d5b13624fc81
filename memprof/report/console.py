"""Reporters that print through a rich console, as text: the gate's table and a plain line.
Each returns the text the console would print (to a terminal in colour when ``color``), so that
commands hold no rich code."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.core.gate import GateResult


def _capture(width: int | None, color: bool, draw: Any) -> str:
    """What ``draw(console)`` prints, as text (``width`` None: the terminal's)."""
    import shutil

    from rich.console import Console

    buf = io.StringIO()
    con = Console(file=buf, width=width or shutil.get_terminal_size((100, 24)).columns,
                  force_terminal=color, color_system="auto" if color else None,
                  highlight=False)
    draw(con)
    return buf.getvalue()


def gate_table(result: GateResult, width: int | None = None, *, color: bool = False) -> str:
    """The gate's table (``memprof.report.gate.render_table``), as text."""
    from memprof.report.gate import render_table

    return _capture(width, color, lambda con: render_table(result, con))


def line(text: str, width: int | None = None, *, color: bool = False) -> str:
    """One line of plain text through the console (wrapped at ``width``)."""
    return _capture(width, color, lambda con: con.print(text, highlight=False))
