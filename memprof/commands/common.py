"""What every command that prints a result shares: ``--format`` checked against the formats its
result has, ``--markdown FILE`` checked before any work and written whole, and the output
through ``memprof.report.render`` at the one width policy."""

from __future__ import annotations

import sys
from typing import Any

from memprof.commands.options import Option


def format_option(*formats: str) -> Option:
    """``--format/-f`` with the formats a command prints (the first is the default)."""
    return Option(dest="fmt", names=("--format", "-f"), default=formats[0], choices=formats,
                  help="What to print.")


MARKDOWN = Option(dest="markdown", names=("--markdown",), metavar="FILE",
                  help="Also write the report as Markdown to FILE (whole or not at all).")


def check_format(fmt: str, formats: tuple[str, ...]) -> None:
    """An unknown ``--format`` is bad input, before any work."""
    if fmt not in formats:
        from memprof.base.errors import BadInput

        raise BadInput(f"unknown --format {fmt[:40]!r}", hint=" or ".join(
            [", ".join(formats[:-1]), formats[-1]] if len(formats) > 1 else formats))


def check_markdown(path: str | None) -> Any:
    """``--markdown FILE`` checked (its folder exists, it is not a folder) before any work."""
    if path is None:
        return None
    from memprof.base.files import check_output

    return check_output(path, flag="--markdown")


def emit(result: Any, fmt: str, markdown: Any = None, **context: Any) -> None:
    """``result`` to stdout in ``fmt`` and, with ``markdown``, as Markdown to that file."""
    from memprof.report import is_terminal, output_width, render

    if markdown is not None:
        from memprof.base.files import write_atomic

        write_atomic(markdown, render(result, "markdown", width=None, **context))
    tty = is_terminal()
    sys.stdout.write(render(result, fmt, width=output_width(), color=tty, **context))
