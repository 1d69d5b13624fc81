"""``memprof devices``: the GPUs of this host (NVML, AMD SMI)."""

from __future__ import annotations

from argparse import Namespace

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """``--format``, ``--markdown``."""
    return (format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """List this host's GPUs: name, total memory as the engine sees it, free and used memory,
    the processes using them, the driver. Exit 3 when there is none to list (no library, no
    driver, no GPU)."""
    from memprof.probes.devices import devices as host_devices

    fmt = args.fmt
    check_format(fmt, FORMATS)
    markdown = check_markdown(args.markdown)
    devs = host_devices()
    emit(devs, fmt, markdown, kind="devices")
    return 0
