"""``Device`` list (``memprof devices``) as table, JSON and Markdown.

Reporters of ``memprof devices`` (this host's GPUs, ``memprof.probes.devices.Device``): a rich
table with a note per problem a library reported, JSON (a list of ``device_dict`` records,
serialised) and Markdown (the table's rows and the notes)."""

from __future__ import annotations

import io
import json

from memprof.base.units import fmt_bytes
from memprof.probes.devices import Device, device_dict

COLUMNS = ("#", "name", "total", "free", "used", "processes", "driver")
RIGHT = ("#", "total", "free", "used")


def _size(v: int | None) -> str:
    return "n/a" if v is None else fmt_bytes(v)


def _cells(d: Device) -> tuple[str, ...]:
    procs = "n/a" if d.processes is None else (", ".join(
        f"{p.name}[{p.pid}] {_size(p.used_bytes)}" for p in d.processes) or "none")
    return (str(d.index), d.name or "n/a", _size(d.total_bytes), _size(d.free_bytes),
            _size(d.used_bytes), procs, d.driver or "n/a")


def _notes(devs: list[Device]) -> list[str]:
    return [f"note: GPU {d.index}: {p}" for d in devs for p in d.problems]


def render_json(devs: list[Device]) -> str:
    return json.dumps([device_dict(d) for d in devs], indent=2) + "\n"


def render_table(devs: list[Device], width: int | None = 80, *, color: bool = False) -> str:
    from rich.console import Console
    from rich.table import Table

    t = Table(pad_edge=False)
    for col in COLUMNS:
        t.add_column(col, no_wrap=col != "processes", justify="right" if col in RIGHT else "left")
    for d in devs:
        t.add_row(*_cells(d))
    buf = io.StringIO()
    con = Console(file=buf, width=width, highlight=False, force_terminal=color,
                  color_system="auto" if color else None)
    con.print(t)
    for line in _notes(devs):
        con.print(line)
    return buf.getvalue()


def render_markdown(devs: list[Device]) -> str:
    """This host's GPUs as GitHub Markdown: the table's rows, then the notes."""
    out = ["### memprof devices", "", "| " + " | ".join(COLUMNS) + " |",
           "|" + "|".join("---:" if c in RIGHT else "---" for c in COLUMNS) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(d)) + " |" for d in devs]
    notes = _notes(devs)
    return "\n".join(out + ([""] + [f"- {n}" for n in notes] if notes else [])) + "\n"
