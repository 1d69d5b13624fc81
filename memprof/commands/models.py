"""``memprof models``: the bundled models."""

from __future__ import annotations

import sys
from argparse import Namespace

from memprof.commands.options import Option


def options() -> tuple[Option, ...]:
    """No flags."""
    return ()


def run(args: Namespace) -> int:
    """List the bundled models."""
    from memprof.report import output_width, render

    sys.stdout.write(render(None, "table", kind="models", width=output_width()))
    return 0
