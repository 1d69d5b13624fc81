"""``memprof devices``: the GPUs of this host (NVML, AMD SMI)."""

from __future__ import annotations

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
    from memprof.probes.devices import devices as host_devices

    if fmt not in ("table", "json"):
        raise BadInput(f"unknown --format {fmt[:40]!r}", hint="table or json")
    devs = host_devices()
    from memprof.report.devices import render_json, render_table

    tty = sys.stdout.isatty()
    sys.stdout.write(render_json(devs) if fmt == "json" else
                     render_table(devs, None if tty else 80, color=tty))
