"""``memprof models`` and ``memprof gpus``: what is bundled."""

from __future__ import annotations

import sys


def models() -> None:
    """List the bundled models."""
    from memprof.report.listing import render_table

    tty = sys.stdout.isatty()
    sys.stdout.write(render_table("models", None if tty else 80, color=tty))


def gpus() -> None:
    """List the GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    from memprof.report.listing import render_table

    tty = sys.stdout.isatty()
    sys.stdout.write(render_table("gpus", None if tty else 80, color=tty))
