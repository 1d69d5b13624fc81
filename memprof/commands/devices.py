"""``memprof devices``: the GPUs of this host (NVML, AMD SMI)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer


def devices(
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """List this host's GPUs: name, total memory as the engine sees it, free and used memory,
    the processes using them, the driver. Exit 3 when there is none to list (no library, no
    driver, no GPU)."""
    from memprof.base.errors import BadInput
    from memprof.base.units import fmt_bytes
    from memprof.probes.devices import devices as host_devices

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    devs = host_devices()
    if fmt == "json":
        sys.stdout.write(json.dumps([{
            "index": d.index, "vendor": d.vendor, "name": d.name, "arch": d.arch,
            "total_bytes": d.total_bytes, "free_bytes": d.free_bytes,
            "used_bytes": d.used_bytes, "driver": d.driver,
            "processes": None if d.processes is None else [
                {"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes}
                for p in d.processes],
            "problems": list(d.problems)} for d in devs], indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

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
    con = Console(width=None if sys.stdout.isatty() else 80, highlight=False,
                  color_system=None if not sys.stdout.isatty() else "auto")
    con.print(t)
    for d in devs:
        for p in d.problems:
            con.print(f"note: GPU {d.index}: {p}")
