"""Reporters that print through a rich console, as text: the gate's table, the bundled models,
the GPU catalog and this host's devices. Each returns the text the console would print (to a
terminal in colour when ``color``), so that commands hold no rich code."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprof.core.gate import GateResult
    from memprof.probes.devices import Device


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


def models_table(width: int | None = None) -> str:
    """The bundled models (``memprof.report.listing.models_table``), as text."""
    from memprof.report.listing import models_table as table

    return _capture(width, False, lambda con: con.print(table()))


def gpus_table(width: int | None = None) -> str:
    """The GPU catalog (total memory as torch.cuda.mem_get_info reports it), as text."""
    from rich.table import Table

    from memprof.base.units import fmt_bytes
    from memprof.core.gpus import catalog

    t = Table()
    for col in ("name", "total", "bytes", "arch", "exact"):
        t.add_column(col, no_wrap=col == "name")
    for g in catalog():
        t.add_row(g.name, fmt_bytes(g.total_bytes), f"{g.total_bytes:,}", g.arch,
                  "yes" if g.exact else "approx.")
    return _capture(width, False, lambda con: con.print(t))


def devices_table(devs: list[Device], width: int | None = None, *, color: bool = False) -> str:
    """This host's GPUs (``memprof devices``), then a note per problem a device reported."""
    from rich.table import Table

    from memprof.base.units import fmt_bytes

    def size(v: int | None) -> str:
        return "n/a" if v is None else fmt_bytes(v)

    t = Table(pad_edge=False)
    for col in ("#", "name", "total", "free", "used", "processes", "driver"):
        t.add_column(col, no_wrap=col != "processes",
                     justify="right" if col in ("#", "total", "free", "used") else "left")
    for d in devs:
        procs = "n/a" if d.processes is None else (", ".join(
            f"{p.name}[{p.pid}] {size(p.used_bytes)}" for p in d.processes) or "none")
        t.add_row(str(d.index), d.name or "n/a", size(d.total_bytes), size(d.free_bytes),
                  size(d.used_bytes), procs, d.driver or "n/a")

    def draw(con: Any) -> None:
        con.print(t)
        for d in devs:
            for p in d.problems:
                con.print(f"note: GPU {d.index}: {p}")

    return _capture(width, color, draw)
