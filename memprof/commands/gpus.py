"""``memprof gpus``: the GPU catalog."""

from __future__ import annotations

import sys
from argparse import Namespace

from memprof.commands.options import Option


def options() -> tuple[Option, ...]:
    """No flags."""
    return ()


def run(args: Namespace) -> int:
    """List the GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    from memprof.report import output_width, render

    sys.stdout.write(render(None, "table", kind="gpus", width=output_width()))
    return 0
