"""``memprof devices``: the GPUs of this host (NVML, AMD SMI)."""

from __future__ import annotations

import json
import sys
from argparse import Namespace

from memprof.commands.common import check_format, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json")


def options() -> tuple[Option, ...]:
    """``--format``."""
    return (format_option(*FORMATS),)


def run(args: Namespace) -> int:
    """List this host's GPUs: name, total memory as the engine sees it, free and used memory,
    the processes using them, the driver. Exit 3 when there is none to list (no library, no
    driver, no GPU)."""
    from memprof.probes.devices import devices as host_devices

    fmt = args.fmt
    check_format(fmt, FORMATS)
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
        return 0
    from memprof.report import is_terminal, output_width, render

    sys.stdout.write(render(devs, "table", kind="devices", width=output_width(),
                            color=is_terminal()))
    return 0
