"""``memprof gpus``: the GPU catalog."""

from __future__ import annotations

from argparse import Namespace

from memprof.commands.common import MARKDOWN, check_format, check_markdown, emit, format_option
from memprof.commands.options import Option

FORMATS = ("table", "json", "markdown")


def options() -> tuple[Option, ...]:
    """``--format``, ``--markdown``."""
    return (format_option(*FORMATS), MARKDOWN)


def run(args: Namespace) -> int:
    """List the GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    check_format(args.fmt, FORMATS)
    emit("gpus", args.fmt, check_markdown(args.markdown), kind="listing")
    return 0
